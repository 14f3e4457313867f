//! Sources and precedence: environment > YAML (host sections over global) > NCCL_CONF_FILE or
//! $HOME/.nccl.conf > /etc/nccl.conf > default, with provenance for every value, in temporary
//! homes and files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rnccl::config::{Config, FileRole, LoadOptions, Source, YamlKey};

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    /// Loads with `env` (HOME is the sandbox's `home/`), the sandbox's `etc/nccl.conf`, and host
    /// `node07`.
    fn load(&self, env: &[(&str, &str)], yaml: Option<&Path>) -> Config {
        let mut vars: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        vars.insert("HOME".into(), self.path("home").display().to_string());
        Config::load(&LoadOptions {
            env: Some(vars),
            home: None,
            system_conf: Some(self.path("etc/nccl.conf")),
            yaml: yaml.map(Path::to_path_buf),
            hostname: Some("node07.cluster.example".into()),
        })
        .unwrap()
    }
}

fn conf(path: &Path, line: usize) -> Source {
    Source::ConfFile {
        path: path.to_path_buf(),
        line,
    }
}

#[test]
fn home_conf_then_system_conf() {
    let s = Sandbox::new();
    let home = s.write("home/.nccl.conf", "NCCL_DEBUG=INFO\nNCCL_IB_HCA=mlx5_0\n");
    let etc = s.write(
        "etc/nccl.conf",
        "NCCL_IB_HCA=mlx5_9\nNCCL_GRAPH_FILE=/old/graph.xml\n",
    );
    let c = s.load(&[("NCCL_DEBUG", "WARN")], None);
    assert_eq!(c.setting("NCCL_DEBUG").unwrap().source, Source::Env);
    assert_eq!(c.overridden("NCCL_DEBUG")[0].source, conf(&home, 1));
    assert_eq!(c.setting("NCCL_IB_HCA").unwrap().source, conf(&home, 2));
    assert_eq!(c.overridden("NCCL_IB_HCA")[0].source, conf(&etc, 1));
    assert_eq!(c.setting("NCCL_GRAPH_FILE").unwrap().source, conf(&etc, 2));
    let roles: Vec<(FileRole, Option<usize>)> =
        c.files().iter().map(|f| (f.role, f.settings)).collect();
    assert_eq!(
        roles,
        [
            (FileRole::UserConf, Some(2)),
            (FileRole::SystemConf, Some(2))
        ]
    );
}

#[test]
fn nccl_conf_file_replaces_the_home_file() {
    let s = Sandbox::new();
    s.write("home/.nccl.conf", "NCCL_DEBUG=INFO\n");
    let custom = s.write("custom.conf", "NCCL_DEBUG=TRACE\n");
    let c = s.load(&[("NCCL_CONF_FILE", custom.to_str().unwrap())], None);
    assert_eq!(c.setting("NCCL_DEBUG").unwrap().source, conf(&custom, 1));
    assert!(
        c.files()
            .iter()
            .all(|f| f.path != s.path("home/.nccl.conf")),
        "{:?}",
        c.files()
    );

    let c = s.load(&[("NCCL_CONF_FILE", "")], None);
    assert_eq!(
        c.setting("NCCL_DEBUG").unwrap().raw,
        "INFO",
        "an empty NCCL_CONF_FILE means unset"
    );

    let missing = s.path("missing.conf");
    let c = s.load(&[("NCCL_CONF_FILE", missing.to_str().unwrap())], None);
    assert!(
        c.setting("NCCL_DEBUG").is_none(),
        "a missing file is skipped, the home file is not read"
    );
    assert_eq!(c.files()[0].settings, None);
}

#[test]
fn conf_file_naming_nccl_conf_file_has_no_effect() {
    let s = Sandbox::new();
    let other = s.write("other.conf", "NCCL_DEBUG=TRACE\n");
    s.write(
        "etc/nccl.conf",
        &format!("NCCL_CONF_FILE={}\n", other.display()),
    );
    let c = s.load(&[], None);
    assert!(c.setting("NCCL_DEBUG").is_none());
}

#[test]
fn yaml_sits_between_environment_and_conf_files() {
    let s = Sandbox::new();
    let home = s.write(
        "home/.nccl.conf",
        "NCCL_IB_TIMEOUT=18\nNCCL_IB_RETRY_CNT=5\n",
    );
    let yaml = s.write(
        "cluster.yaml",
        "knobs:\n  NCCL_IB_TIMEOUT: 22\n  NCCL_DEBUG: WARN\n  NCCL_SOCKET_IFNAME: eth\n",
    );
    let c = s.load(&[("NCCL_DEBUG", "INFO")], Some(&yaml));
    assert_eq!(
        c.setting("NCCL_DEBUG").unwrap().raw,
        "INFO",
        "environment beats YAML"
    );
    let t = c.setting("NCCL_IB_TIMEOUT").unwrap();
    assert_eq!(t.raw, "22", "YAML beats conf files");
    assert_eq!(
        t.source,
        Source::Yaml(Box::new(YamlKey {
            path: yaml.clone(),
            line: 2,
            key: "knobs.NCCL_IB_TIMEOUT".into()
        }))
    );
    assert_eq!(c.overridden("NCCL_IB_TIMEOUT")[0].source, conf(&home, 1));
    assert_eq!(
        c.setting("NCCL_IB_RETRY_CNT").unwrap().source,
        conf(&home, 2)
    );
    assert_eq!(c.files()[0].role, FileRole::Yaml);
}

#[test]
fn host_sections_override_global_and_each_other() {
    let s = Sandbox::new();
    let yaml = s.write(
        "cluster.yaml",
        r#"knobs:
  NCCL_SOCKET_IFNAME: eth
  NCCL_IB_HCA: mlx5
hosts:
  "node*":
    NCCL_SOCKET_IFNAME: "=ens1f0"
    NCCL_IB_HCA: "=mlx5_0"
  "NODE07":
    NCCL_IB_HCA: "=mlx5_1"
  "gpu-*":
    NCCL_SOCKET_IFNAME: ib
"#,
    );
    let c = s.load(&[], Some(&yaml));
    let ifname = c.setting("NCCL_SOCKET_IFNAME").unwrap();
    assert_eq!(ifname.raw, "=ens1f0");
    assert!(
        matches!(&ifname.source, Source::Yaml(y) if y.line == 6 && y.key == "hosts.\"node*\".NCCL_SOCKET_IFNAME")
    );
    let hca = c.setting("NCCL_IB_HCA").unwrap();
    assert_eq!(
        hca.raw, "=mlx5_1",
        "the later section wins; globs ignore case and the domain"
    );
    let lost: Vec<&str> = c
        .overridden("NCCL_IB_HCA")
        .iter()
        .map(|s| s.raw.as_str())
        .collect();
    assert_eq!(lost, ["=mlx5_0", "mlx5"]);
}

#[test]
fn yaml_can_choose_the_conf_files() {
    let s = Sandbox::new();
    let custom = s.write("custom.conf", "NCCL_DEBUG=INFO\n");
    let system = s.write("system.conf", "NCCL_IB_HCA=mlx5_0\n");
    let yaml = s.write(
        "c.yaml",
        &format!(
            "knobs:\n  NCCL_CONF_FILE: {}\n  RNCCL_SYSTEM_CONF: {}\n",
            custom.display(),
            system.display()
        ),
    );
    let mut vars = BTreeMap::new();
    vars.insert("HOME".to_string(), s.path("home").display().to_string());
    let c = Config::load(&LoadOptions {
        env: Some(vars),
        yaml: Some(yaml),
        ..LoadOptions::default()
    })
    .unwrap();
    assert_eq!(c.setting("NCCL_DEBUG").unwrap().source, conf(&custom, 1));
    assert_eq!(c.setting("NCCL_IB_HCA").unwrap().source, conf(&system, 1));
}

#[test]
fn rnccl_config_in_the_environment_is_honoured() {
    let s = Sandbox::new();
    let yaml = s.write("c.yaml", "knobs:\n  RNCCL_TIMEOUT: 42\n");
    let c = s.load(&[("RNCCL_CONFIG", yaml.to_str().unwrap())], None);
    assert_eq!(c.int("RNCCL_TIMEOUT").unwrap(), 42);
}

#[test]
fn unreadable_sources_are_errors_that_say_what_to_do() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.path("etc/nccl.conf")).unwrap();
    let err = Config::load(&LoadOptions {
        env: Some(BTreeMap::new()),
        system_conf: Some(s.path("etc/nccl.conf")),
        ..LoadOptions::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("etc/nccl.conf"), "{err}");
    assert!(
        !err.contains("--"),
        "library errors name no command-line flag: {err}"
    );
    let err = Config::load(&LoadOptions {
        env: Some(BTreeMap::new()),
        yaml: Some(s.path("nope.yaml")),
        ..LoadOptions::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("nope.yaml") && err.contains("check the YAML config's path"),
        "{err}"
    );
}
