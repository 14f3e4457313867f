//! `rnccl env-explain` driven as a user runs it: golden outputs (insta) in a fixed environment
//! (cleared variables, temporary HOME and system conf, a sysfs fixture, a fixed host name), and
//! the exit status of `--check`.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let e = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(e.path("home")).unwrap();
        std::fs::create_dir_all(e.path("etc")).unwrap();
        e
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `rnccl` with only `vars` set, HOME and the system conf inside the sandbox, host `node07`
    /// (for `env-explain`) and the sysfs fixture.
    fn run(&self, vars: &[(&str, &str)], args: &[&str]) -> Output {
        let mut cmd = Command::cargo_bin("rnccl").unwrap();
        cmd.env_clear()
            .env("HOME", self.path("home"))
            .env("RNCCL_SYSTEM_CONF", self.path("etc/nccl.conf"))
            .current_dir(self.dir.path());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let explain = args.iter().position(|a| *a == "env-explain");
        let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        if let Some(i) = explain {
            let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs");
            full.splice(
                i + 1..i + 1,
                [
                    "--host".into(),
                    "node07".into(),
                    "--sysfs-root".into(),
                    fixture.display().to_string(),
                ],
            );
        }
        cmd.args(&full).output().unwrap()
    }

    /// Stdout (or stderr) with the sandbox path replaced by `[TMP]`.
    fn text(&self, bytes: &[u8]) -> String {
        let s = String::from_utf8(bytes.to_vec()).unwrap();
        let tmp = self.dir.path().display().to_string();
        s.replace(&tmp, "[TMP]")
    }
}

/// A sandbox with conf files and a YAML config that between them hit most checks.
fn busy() -> (Env, Vec<(&'static str, &'static str)>) {
    let e = Env::new();
    e.write(
        "home/.nccl.conf",
        "# user settings\nNCCL_DEBUG = INFO\nNCCL_SOCKET_IFNAME=\"eth0\"\nexport NCCL_ALGO=Ring\njust words\nNCCL_IB_TIMEOUT=18\n",
    );
    e.write(
        "etc/nccl.conf",
        "NCCL_GRAPH_FILE=/old/graph.xml\nNCCL_IB_RETRY_CNT=7\n",
    );
    e.write(
        "cluster.yaml",
        "knobs:\n  NCCL_BUFFSIZE: 0x400000\n  NCCL_DEBUG_SUBSYS: [INIT, NET]\nhosts:\n  \"node*\":\n    NCCL_IB_HCA: mlx5_1\n",
    );
    let vars = vec![
        ("NCCL_SOCKET_IFNAM", "eth0"),
        ("NCCL_SOCKET_IFNAME", "eth1"),
        ("NCCL_IB_TIMEOUT", "08"),
        ("NCCL_P2P_DISABLE", "1"),
        ("NCCL_P2P_LEVEL", "NVL"),
        ("NCCL_PROTO", "LL128"),
        ("NCCL_IB_GDR_LEVEL", "PHB"),
        ("RNCCL_CONFIG", "cluster.yaml"),
    ];
    (e, vars)
}

#[test]
fn settings_in_effect() {
    let (e, vars) = busy();
    let out = e.run(&vars, &["env-explain"]);
    assert!(out.status.success(), "{}", e.text(&out.stderr));
    let text = e.text(&out.stdout);
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
    assert!(
        text.lines()
            .all(|l| l.chars().count() <= 80 || !l.contains(' ')),
        "80 columns:\n{text}"
    );
    insta::assert_snapshot!("settings_in_effect", text);
}

#[test]
fn check_gates_on_errors() {
    let (e, vars) = busy();
    assert_eq!(
        e.run(&vars, &["env-explain", "--check"]).status.code(),
        Some(1)
    );
    let clean = Env::new();
    let out = clean.run(
        &[("NCCL_IB_TIMEOUT", "22"), ("NCCL_SOCKET_IFNAME", "=eth0")],
        &["env-explain", "--check"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", clean.text(&out.stdout));
    let out = clean.run(&[], &["env-explain", "--check"]);
    assert_eq!(out.status.code(), Some(0));
    let text = clean.text(&out.stdout);
    assert!(
        text.contains("RNCCL_SYSTEM_CONF=[TMP]/etc/nccl.conf")
            && text.contains("1 setting: 0 errors"),
        "{text}"
    );
}

#[test]
fn knob_entries() {
    let e = Env::new();
    let out = e.run(
        &[("NCCL_IB_TIMEOUT", "22")],
        &["env-explain", "NCCL_IB_TIMEOUT", "ib_retry_cnt"],
    );
    assert!(out.status.success());
    insta::assert_snapshot!("knob_entries", e.text(&out.stdout));
}

/// Each list knob's fix shows its own names; an integer too large for 64 bits reads as the value
/// NCCL then uses, never as the default's sentinel (-2).
#[test]
fn bad_values_get_their_own_fix() {
    let e = Env::new();
    let out = e.run(
        &[
            ("NCCL_PROTO", "bogus"),
            ("NCCL_ALGO", "bogus"),
            ("NCCL_BUFFSIZE", "99999999999999999999"),
        ],
        &["env-explain", "NCCL_PROTO", "NCCL_ALGO", "NCCL_BUFFSIZE"],
    );
    let text = e.text(&out.stdout);
    // Each knob's entry starts with a line holding its name alone.
    let entry = |name: &str| {
        let start = text
            .find(&format!("{name}\n"))
            .unwrap_or_else(|| panic!("no entry for {name}: {text}"));
        let rest = &text[start + name.len()..];
        rest[..rest.find("\nNCCL_").unwrap_or(rest.len())].to_string()
    };
    let proto = entry("NCCL_PROTO");
    assert!(
        proto.contains("'Simple'")
            && proto.contains("LL, LL128, Simple")
            && !proto.contains("Tree"),
        "{proto}"
    );
    let algo = entry("NCCL_ALGO");
    assert!(algo.contains("'Ring'") && !algo.contains("LL128"), "{algo}");
    let buffsize = entry("NCCL_BUFFSIZE");
    let reads = buffsize
        .lines()
        .find(|l| l.trim_start().starts_with("reads as"))
        .unwrap_or_else(|| panic!("{buffsize}"));
    assert_eq!(reads.trim(), "reads as  4194304 (4 MiB)", "{buffsize}");
}

/// `RNCCL_SOCKET_CC` is judged on this host: what it comes to, or why a communicator would
/// refuse it (and `--check` fails then).
#[test]
fn the_congestion_control_is_judged_on_this_kernel() {
    let e = Env::new();
    // The entries wrap at 80 columns: compare words.
    let flat = |t: String| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let out = e.run(&[("RNCCL_SOCKET_CC", "reno")], &["env-explain", "--check"]);
    let text = flat(e.text(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("on this host: congestion control reno (RNCCL_SOCKET_CC=reno)"),
        "{text}"
    );
    let out = e.run(
        &[("RNCCL_SOCKET_CC", "no-such-cc")],
        &["env-explain", "--check"],
    );
    let text = flat(e.text(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("RNCCL_SOCKET_CC=no-such-cc: this kernel has no such congestion")
            && text.contains("refuses it at init"),
        "{text}"
    );
}

#[test]
fn unknown_knob_name_suggests() {
    let e = Env::new();
    let out = e.run(&[], &["env-explain", "NCCL_SOCKET_IFNAM"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        e.text(&out.stderr),
        "rnccl: error: NCCL_SOCKET_IFNAM is not a knob rnccl knows; did you mean NCCL_SOCKET_IFNAME?\n"
    );
}

#[test]
fn all_knobs_filtered() {
    let e = Env::new();
    let out = e.run(&[], &["env-explain", "--all", "--subsystem", "ras"]);
    insta::assert_snapshot!("all_ras", e.text(&out.stdout));
    let out = e.run(
        &[],
        &[
            "env-explain",
            "--all",
            "--category",
            "dangerous",
            "--subsystem",
            "ib",
        ],
    );
    let text = e.text(&out.stdout);
    assert!(
        text.starts_with("2 knobs;") && text.contains("NCCL_GDR_FLUSH_DISABLE"),
        "{text}"
    );
    let out = e.run(&[], &["env-explain", "--all", "--subsystem", "nope"]);
    assert!(!out.status.success() && e.text(&out.stderr).contains("possible values"));
}

#[test]
fn exports() {
    let (e, vars) = busy();
    let out = e.run(&vars, &["env-explain", "--export", "yaml"]);
    let exported = e.text(&out.stdout);
    insta::assert_snapshot!("export_yaml", exported);
    let out = e.run(&vars, &["env-explain", "--export", "env"]);
    insta::assert_snapshot!("export_env", e.text(&out.stdout));

    let raw = e.run(&vars, &["env-explain", "--export", "yaml"]).stdout;
    std::fs::write(e.path("out.yaml"), raw).unwrap();
    let reloaded = e.run(
        &[("RNCCL_SYSTEM_CONF", "/nonexistent")],
        &["--config", "out.yaml", "env-explain", "--export", "yaml"],
    );
    assert!(reloaded.status.success(), "{}", e.text(&reloaded.stderr));
    let values = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("  NCCL_") || l.starts_with("  RNCCL_"))
            .map(|l| l.split("  #").next().unwrap().to_string())
            .collect()
    };
    let mut want = values(&exported);
    want.retain(|l| !l.starts_with("  RNCCL_SYSTEM_CONF"));
    let mut got = values(&e.text(&reloaded.stdout));
    got.retain(|l| !l.starts_with("  RNCCL_SYSTEM_CONF"));
    assert_eq!(got, want, "export, then import, gives the same values");

    let out = Env::new().run(&[], &["env-explain", "--export", "env"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--export env turns a YAML config"));
}

#[test]
fn machine_readable_formats() {
    let (e, vars) = busy();
    let out = e.run(&vars, &["env-explain", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["host"], "node07");
    let typo = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "NCCL_SOCKET_IFNAM")
        .unwrap();
    assert_eq!(typo["findings"][0]["severity"], "error");
    assert!(v["counts"]["errors"].as_u64().unwrap() > 0);

    let out = e.run(
        &vars,
        &["env-explain", "--format", "yaml", "NCCL_IB_TIMEOUT"],
    );
    let text = e.text(&out.stdout);
    assert!(text.contains("name: NCCL_IB_TIMEOUT"), "{text}");
    assert!(
        text.contains("effective: '0'") || text.contains("effective: \"0\""),
        "{text}"
    );

    let out = e.run(
        &[],
        &["env-explain", "--format", "markdown", "NCCL_SOCKET_FAMILY"],
    );
    insta::assert_snapshot!("markdown_entry", e.text(&out.stdout));
    let out = e.run(&[], &["env-explain", "--format", "markdown"]);
    assert!(!out.status.success() && e.text(&out.stderr).contains("--all or NAME"));
}

#[test]
fn bad_yaml_is_a_clear_error() {
    let e = Env::new();
    e.write("bad.yaml", "knobs:\n  NCCL_SOCKET_IFNAM: eth0\n");
    let out = e.run(&[], &["--config", "bad.yaml", "env-explain"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        e.text(&out.stderr),
        "rnccl: error: cannot load the NCCL configuration: bad.yaml:2: knobs.NCCL_SOCKET_IFNAM: NCCL_SOCKET_IFNAM is not a knob rnccl knows; did you mean NCCL_SOCKET_IFNAME?\n"
    );
}

#[test]
fn help_documents_the_precedence() {
    let out = Env::new().run(&[], &["env-explain", "--help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1. the process environment") && text.contains("4. /etc/nccl.conf"),
        "{text}"
    );
}
