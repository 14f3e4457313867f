//! Building a [`Config`] from its sources with NCCL's precedence, plus the YAML layer.
//!
//! Order, highest first: the process environment; the YAML config (its host sections over its
//! global `knobs`); the user conf file (`NCCL_CONF_FILE`, else `$HOME/.nccl.conf`); the system conf
//! file (`/etc/nccl.conf`, or `RNCCL_SYSTEM_CONF`). A lower source never overrides a higher one —
//! NCCL's `setenv(key, value, 0)` rule (`src/misc/param.cc:initEnvFunc`) — so the YAML config acts
//! like variables exported just before NCCL starts that never replace real ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::yaml::YamlConfig;
use super::{Config, ConfigError, Setting, Source, conf_file};

/// `NCCL_CONF_FILE`: the user conf file (NCCL reads it from the environment; rnccl also from YAML).
const CONF_FILE_VAR: &str = "NCCL_CONF_FILE";
/// `RNCCL_CONFIG`: the YAML config when `--config` is not given (environment only).
const YAML_VAR: &str = "RNCCL_CONFIG";
/// `RNCCL_SYSTEM_CONF`: replaces `/etc/nccl.conf` (environment or YAML).
const SYSTEM_CONF_VAR: &str = "RNCCL_SYSTEM_CONF";
/// The system conf file NCCL reads.
pub const SYSTEM_CONF: &str = "/etc/nccl.conf";

/// The knobs the loader itself acts on (checked by the honoured-list test).
#[cfg(test)]
pub(crate) const LOADER_KNOBS: [&str; 3] = [CONF_FILE_VAR, YAML_VAR, SYSTEM_CONF_VAR];

/// Where to load settings from. `Default` reads the real process environment, `$HOME`,
/// `/etc/nccl.conf` and the YAML named by `RNCCL_CONFIG`; tests point the fields at temporary files.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Use these variables instead of the process environment.
    pub env: Option<BTreeMap<String, String>>,
    /// Use this directory as `$HOME` instead of the environment's.
    pub home: Option<PathBuf>,
    /// Use this file instead of `/etc/nccl.conf` (and of `RNCCL_SYSTEM_CONF`).
    pub system_conf: Option<PathBuf>,
    /// Load this YAML config (the CLI's `--config`); `None` uses `RNCCL_CONFIG` if set.
    pub yaml: Option<PathBuf>,
    /// Match YAML host sections against this name instead of this machine's host name.
    pub hostname: Option<String>,
}

/// What a file is to the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileRole {
    /// The YAML config.
    Yaml,
    /// `NCCL_CONF_FILE` or `$HOME/.nccl.conf`.
    UserConf,
    /// `/etc/nccl.conf` or `RNCCL_SYSTEM_CONF`.
    SystemConf,
}

/// A file the loader looked at, in the order it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileRead {
    /// The file.
    pub path: PathBuf,
    /// What it is.
    pub role: FileRole,
    /// How many settings it supplied (`None`: the file does not exist).
    pub settings: Option<usize>,
}

/// Something about a source that changes what NCCL does (a conf line it skips, a name that
/// cannot apply), attached to a file and line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadNote {
    /// The file (empty for the environment).
    pub path: PathBuf,
    /// 1-based line (0 when not about a line).
    pub line: usize,
    /// What happens.
    pub message: String,
}

impl Config {
    /// Loads settings as [`LoadOptions`] says, with the precedence in this module's docs.
    ///
    /// Errors: [`ConfigError::File`] when a conf file exists but cannot be read or the YAML config
    /// does not exist; [`ConfigError::Yaml`] when the YAML config is malformed or holds a bad value.
    pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
        let env = match &opts.env {
            Some(e) => e.clone(),
            None => process_env(),
        };
        let mut cfg = Config::default();
        for (k, v) in &env {
            if is_knob_like(k) {
                cfg.offer(
                    k,
                    Setting {
                        raw: v.clone(),
                        source: Source::Env,
                    },
                );
            }
        }
        let hostname = opts.hostname.clone().unwrap_or_else(this_host);
        let yaml_path = opts.yaml.clone().or_else(|| {
            env.get(YAML_VAR)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        if let Some(path) = yaml_path {
            let yaml = YamlConfig::read(&path)?;
            let applied = cfg.apply_yaml(&yaml, &hostname);
            cfg.files.push(FileRead {
                path,
                role: FileRole::Yaml,
                settings: Some(applied),
            });
        }
        cfg.hostname = Some(hostname);

        let user_file = match cfg.early_value(CONF_FILE_VAR) {
            Some(p) => Some(PathBuf::from(p)),
            None => opts
                .home
                .clone()
                .or_else(|| env.get("HOME").map(PathBuf::from))
                .map(|h| h.join(".nccl.conf")),
        };
        let system = opts
            .system_conf
            .clone()
            .or_else(|| cfg.early_value(SYSTEM_CONF_VAR).map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(SYSTEM_CONF));
        if let Some(user) = user_file {
            cfg.read_conf_file(&user, FileRole::UserConf, &env)?;
        }
        cfg.read_conf_file(&system, FileRole::SystemConf, &env)?;
        Ok(cfg)
    }

    /// Adds a setting below everything already set: it wins only if the name is not set yet,
    /// otherwise it is kept as overridden.
    fn offer(&mut self, name: &str, setting: Setting) {
        if self.values.contains_key(name) {
            self.shadowed
                .entry(name.to_string())
                .or_default()
                .push(setting);
        } else {
            self.values.insert(name.to_string(), setting);
        }
    }

    /// A loader knob's value when it came from a source read before the conf files (environment
    /// or YAML) and is not empty.
    fn early_value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .filter(|s| matches!(s.source, Source::Env | Source::Yaml(_)))
            .map(|s| s.raw.as_str())
            .filter(|v| !v.is_empty())
    }

    /// Applies the YAML layer for `host`: host sections override the global knobs, later sections
    /// override earlier ones. Returns how many knobs the file sets for this host.
    fn apply_yaml(&mut self, yaml: &YamlConfig, host: &str) -> usize {
        let mut by_name: BTreeMap<String, Vec<Setting>> = BTreeMap::new();
        for (name, setting) in yaml.settings_for(host) {
            by_name.entry(name).or_default().push(setting);
        }
        let count = by_name.len();
        for (name, mut layers) in by_name {
            let top = layers.pop().expect("at least one layer per name");
            self.offer(&name, top);
            for lower in layers.into_iter().rev() {
                self.shadowed.entry(name.clone()).or_default().push(lower);
            }
        }
        count
    }

    /// Applies one nccl.conf-style file (see [`conf_file::parse`]); a missing file is not an error.
    fn read_conf_file(
        &mut self,
        path: &Path,
        role: FileRole,
        env: &BTreeMap<String, String>,
    ) -> Result<(), ConfigError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.files.push(FileRead {
                    path: path.to_path_buf(),
                    role,
                    settings: None,
                });
                return Ok(());
            }
            Err(e) => {
                return Err(ConfigError::File {
                    path: path.to_path_buf(),
                    message: format!(
                        "{e}; fix its permissions or remove it (NCCL would skip it silently)"
                    ),
                });
            }
        };
        let (entries, notes) = conf_file::parse(&bytes);
        for n in notes {
            self.notes.push(LoadNote {
                path: path.to_path_buf(),
                line: n.line,
                message: n.message,
            });
        }
        let count = entries.len();
        for e in entries {
            let foreign = !is_knob_like(&e.key);
            if foreign && env.contains_key(&e.key) {
                self.notes.push(LoadNote {
                    path: path.to_path_buf(),
                    line: e.line,
                    message: format!(
                        "{} is already set in the environment, so this line has no effect",
                        e.key
                    ),
                });
                continue;
            }
            let source = Source::ConfFile {
                path: path.to_path_buf(),
                line: e.line,
            };
            self.offer(
                &e.key,
                Setting {
                    raw: e.value,
                    source,
                },
            );
        }
        self.files.push(FileRead {
            path: path.to_path_buf(),
            role,
            settings: Some(count),
        });
        Ok(())
    }
}

/// Whether an environment variable is worth showing: `NCCL_*`/`RNCCL_*` in any case, so that a
/// misspelt `nccl_debug` is reported rather than silently ignored.
fn is_knob_like(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("NCCL_") || upper.starts_with("RNCCL_")
}

/// The process environment; values that are not UTF-8 are kept with replacement characters.
fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// This machine's host name (empty if the system will not say).
fn this_host() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}
