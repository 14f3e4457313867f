//! The YAML config: typed values, exports that load back to the same configuration, and hostile
//! input refused with a clear error.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use rnccl::config::yaml::{YamlConfig, to_env, to_yaml};
use rnccl::config::{Config, ConfigError, LoadOptions, Source};

fn parse(text: &str) -> Result<YamlConfig, ConfigError> {
    YamlConfig::parse(text, Path::new("test.yaml"))
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

fn load(env: &[(&str, &str)], yaml: Option<&Path>, system: Option<&Path>) -> Config {
    Config::load(&LoadOptions {
        env: Some(
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        home: Some("/nonexistent".into()),
        system_conf: Some(system.map_or("/nonexistent/nccl.conf".into(), Path::to_path_buf)),
        yaml: yaml.map(Path::to_path_buf),
        hostname: Some("node1".into()),
    })
    .unwrap()
}

fn values(c: &Config) -> BTreeMap<String, String> {
    c.settings()
        .map(|(k, s)| (k.to_string(), s.raw.clone()))
        .collect()
}

#[test]
fn typed_values_become_nccl_text() {
    let y = parse(
        "knobs:\n  NCCL_P2P_DISABLE: true\n  NCCL_SHM_DISABLE: no\n  NCCL_IB_TIMEOUT: 0x16\n  NCCL_BUFFSIZE: 010\n  NCCL_DEBUG_SUBSYS: [INIT, NET]\n  NCCL_ALGO: [Ring, \"AllReduce:Tree\"]\n  NCCL_THREAD_THRESHOLDS: [-1, -1, -1, 512]\n  NCCL_TESTS_MIN_BW: 12.5\n",
    )
    .unwrap();
    let got: Vec<(&str, &str)> = y
        .knobs
        .iter()
        .map(|k| (k.name.as_str(), k.raw.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("NCCL_P2P_DISABLE", "1"),
            ("NCCL_SHM_DISABLE", "0"),
            ("NCCL_IB_TIMEOUT", "22"),
            ("NCCL_BUFFSIZE", "010"),
            ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
            ("NCCL_ALGO", "Ring;AllReduce:Tree"),
            ("NCCL_THREAD_THRESHOLDS", "-1 -1 -1 512"),
            ("NCCL_TESTS_MIN_BW", "12.5"),
        ]
    );
}

#[test]
fn bad_names_and_values_are_refused_with_the_line() {
    let e = err("knobs:\n  NCCL_SOCKET_IFNAM: eth0\n");
    assert!(
        e.contains("test.yaml:2") && e.contains("did you mean NCCL_SOCKET_IFNAME"),
        "{e}"
    );
    let e = err("knobs:\n  NCCL_IB_GDR_LEVEL: PHB\n");
    assert!(e.contains("NCCL_NET_GDR_LEVEL"), "{e}");
    let e = err("knobs:\n  NCCL_IB_TIMEOUT: true\n");
    assert!(e.contains("not a switch"), "{e}");
    let e = err("knobs:\n  NCCL_IB_TIMEOUT: 2.5\n");
    assert!(e.contains("whole number"), "{e}");
    let e = err("knobs:\n  NCCL_IB_TIMEOUT:\n");
    assert!(e.contains("no value"), "{e}");
    let e = err("knobs:\n  NCCL_IB_TIMEOUT: [1, 2]\n");
    assert!(e.contains("not a list"), "{e}");
    let e = err("knob:\n  NCCL_IB_TIMEOUT: 3\n");
    assert!(e.contains("'knobs' and 'hosts'"), "{e}");
    let e = err("knobs:\n  NCCL_IB_TIMEOUT: 3\n  NCCL_IB_TIMEOUT: 4\n");
    assert!(e.contains("twice"), "{e}");
    let e = err("hosts:\n  \"gpu[\":\n    NCCL_IB_TIMEOUT: 3\n");
    assert!(e.contains("glob"), "{e}");
    let e = err("knobs:\n  RNCCL_CONFIG: other.yaml\n");
    assert!(e.contains("another config"), "{e}");
    let e = err("knobs: [\n");
    assert!(e.contains("test.yaml"), "{e}");
}

#[test]
fn values_nccl_would_misread_load_and_are_reported_by_explain() {
    let y = parse("knobs:\n  NCCL_IB_TIMEOUT: 08\n  NCCL_P2P_LEVEL: nvl\n").unwrap();
    let raws: Vec<&str> = y.knobs.iter().map(|k| k.raw.as_str()).collect();
    assert_eq!(
        raws,
        ["08", "nvl"],
        "kept verbatim, so an export of any configuration loads back"
    );
}

#[test]
fn hostile_yaml_is_refused() {
    let deep = format!(
        "knobs:\n  NCCL_IB_HCA: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let e = err(&deep);
    assert!(e.contains("nests deeper"), "{e}");

    let mut bomb = String::from("knobs:\n  NCCL_IB_HCA: &a mlx5_0\n");
    for i in 0..1_000 {
        bomb.push_str(&format!("  NCCL_X{i}: *a\n"));
    }
    let e = err(&bomb);
    assert!(e.contains("aliases") && e.contains("YAML bomb"), "{e}");

    let mut laughs = String::from("knobs:\n  NCCL_IB_HCA: &a [l, l, l, l, l, l, l, l, l]\n");
    for (i, prev) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        let name = (b'b' + i as u8) as char;
        laughs.push_str(&format!(
            "  NCCL_L{name}: &{name} [{}]\n",
            vec![format!("*{prev}"); 9].join(", ")
        ));
    }
    assert!(parse(&laughs).is_err(), "billion laughs must not load");

    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.yaml");
    std::fs::write(
        &huge,
        format!("knobs:\n  NCCL_HOSTID: \"{}\"\n", "x".repeat(2 << 20)),
    )
    .unwrap();
    let e = YamlConfig::read(&huge).unwrap_err().to_string();
    assert!(e.contains("limit"), "{e}");
}

#[test]
fn export_then_import_gives_the_same_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("nccl.conf");
    std::fs::write(
        &system,
        "NCCL_IB_HCA==mlx5_0:1\nNCCL_DEBUG_FILE=/tmp/nccl.%h.%p\nNCCL_IB_TIMEOUT=18\n",
    )
    .unwrap();
    let yaml = dir.path().join("in.yaml");
    std::fs::write(
        &yaml,
        "knobs:\n  NCCL_IB_TIMEOUT: 22\n  NCCL_ALGO: \"^Tree\"\nhosts:\n  node*:\n    NCCL_SOCKET_IFNAME: \"^docker,lo\"\n",
    )
    .unwrap();
    let env = [
        ("NCCL_BUFFSIZE", "0x400000"),
        ("NCCL_NET_GDR_LEVEL", "010"),
        ("NCCL_HOSTID", "rack 1 \"a\"\\b\t"),
        ("NCCL_FOO", "not a knob"),
    ];
    let original = load(&env, Some(&yaml), Some(&system));
    let exported = dir.path().join("out.yaml");
    std::fs::write(&exported, to_yaml(&original)).unwrap();
    let text = std::fs::read_to_string(&exported).unwrap();
    assert!(
        text.contains("#   NCCL_FOO=not a knob"),
        "unknown names are kept as comments:\n{text}"
    );

    let reloaded = load(&[], Some(&exported), None);
    let mut want = values(&original);
    want.remove("NCCL_FOO");
    assert_eq!(values(&reloaded), want);
    assert!(
        reloaded
            .settings()
            .all(|(_, s)| matches!(s.source, Source::Yaml(_)))
    );
}

#[test]
fn env_export_applies_host_sections() {
    let y = parse("knobs:\n  NCCL_SOCKET_IFNAME: eth\n  NCCL_DEBUG: WARN\nhosts:\n  node*:\n    NCCL_SOCKET_IFNAME: \"=ens1f0\"\n")
        .unwrap();
    let text = to_env(&y, "node3");
    assert!(
        text.contains(
            "export NCCL_SOCKET_IFNAME='=ens1f0'  # hosts.\"node*\".NCCL_SOCKET_IFNAME\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("export NCCL_DEBUG=WARN  # knobs.NCCL_DEBUG\n"),
        "{text}"
    );
    assert!(
        to_env(&y, "gpu1").contains("export NCCL_SOCKET_IFNAME=eth "),
        "other hosts keep the global value"
    );
}

#[test]
fn host_globs_match_names_and_first_labels_ignoring_case() {
    let y = parse(
        "hosts:\n  \"GPU-a?\":\n    NCCL_DEBUG: INFO\n  \"node[0-3]\":\n    NCCL_DEBUG: WARN\n  \"node[!0-3]*\":\n    NCCL_DEBUG: TRACE\n  \"*.ib.example\":\n    NCCL_DEBUG: VERSION\n",
    )
    .unwrap();
    let matched =
        |host: &str| -> Vec<String> { y.sections_for(host).map(|s| s.pattern.clone()).collect() };
    assert_eq!(matched("gpu-a7"), ["GPU-a?"]);
    assert_eq!(
        matched("gpu-A7.cluster.local"),
        ["GPU-a?"],
        "the first label"
    );
    assert!(matched("gpu-a17").is_empty(), "? is one character");
    assert_eq!(matched("node2"), ["node[0-3]"]);
    assert_eq!(matched("node7"), ["node[!0-3]*"]);
    assert_eq!(matched("nodex.ib.example"), ["node[!0-3]*", "*.ib.example"]);

    // Other dialects' syntax would be taken literally and match nothing, or the wrong hosts.
    for (pattern, says) in [
        ("node{1,2}", "alternatives"),
        ("node[^0-3]", "[!...]"),
        ("node[0-3", "valid host-name glob"),
    ] {
        let e = err(&format!("hosts:\n  \"{pattern}\":\n    NCCL_DEBUG: INFO\n"));
        assert!(e.contains(says) && e.contains(pattern), "{pattern}: {e}");
        assert!(e.contains("test.yaml:3:"), "{pattern}: names the line: {e}");
    }
}

proptest! {
    #[test]
    fn any_text_value_survives_export_and_import(v in "\\PC{0,40}") {
        let mut c = Config::defaults();
        c.set("NCCL_HOSTID", v.clone(), Source::Env);
        let text = to_yaml(&c);
        let y = YamlConfig::parse(&text, Path::new("x.yaml")).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&y.knobs[0].raw, &v);
    }
}

/// A duplicate key says which key, where both are, and what to do, in our words rather than the
/// YAML library's ("set DuplicateKeyPolicy in Options").
#[test]
fn duplicate_keys_name_the_key_and_both_lines() {
    let e = err("knobs:\n  NCCL_IB_TIMEOUT: 22\n  NCCL_BUFFSIZE: 4\n  NCCL_IB_TIMEOUT: 20\n");
    assert_eq!(
        e,
        "test.yaml:4: NCCL_IB_TIMEOUT is given twice in one mapping (first at line 2): keep one value (for a value on some hosts only, put it in a 'hosts' section)"
    );
    let e = err("hosts:\n  \"a*\":\n    NCCL_IB_HCA: x\n  \"a*\":\n    NCCL_IB_HCA: y\n");
    assert!(
        e.starts_with("test.yaml:4: \"a*\" is given twice in one mapping (first at line 2)"),
        "{e}"
    );
    let e = err("knobs:\n  NCCL_IB_TIMEOUT: 22\nknobs:\n  NCCL_BUFFSIZE: 4\n");
    assert_eq!(
        e,
        "test.yaml:3: 'knobs' is given twice (first at line 1): merge the two sections into one"
    );
    for text in [
        "knobs:\n  NCCL_IB_TIMEOUT: 22\n  NCCL_IB_TIMEOUT: 20\n",
        "hosts:\n  a:\n    NCCL_IB_HCA: x\n    NCCL_IB_HCA: y\n",
    ] {
        let e = err(text);
        assert!(
            !e.contains("DuplicateKeyPolicy") && !e.contains("Options"),
            "{e}"
        );
    }
}
