//! The knob registry: every `NCCL_*` setting rnccl knows, read with NCCL's sources and
//! precedence, each effective value carrying where it came from.
//!
//! Precedence (NCCL's, `src/misc/param.cc:initEnvFunc`): the process environment, then
//! `NCCL_CONF_FILE` (or `$HOME/.nccl.conf` when unset), then `/etc/nccl.conf`; a file value never
//! overrides one already set. Every other module reads knobs only through [`Config`].

mod parse;
mod registry;
pub mod syntax;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use parse::parse_c_int;
pub use registry::{KNOBS, KnobSpec, KnobType, lookup};

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The registry default (the knob is not set anywhere).
    Default,
    /// The process environment.
    Env,
    /// A `KEY=VALUE` line of an nccl.conf-style file.
    ConfFile {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// Set by the program itself (a CLI flag such as `bench -T`), named here.
    Program(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Env => f.write_str("environment"),
            Source::ConfFile { path, line } => write!(f, "{}:{}", path.display(), line),
            Source::Program(what) => f.write_str(what),
        }
    }
}

/// One effective value: the raw text exactly as given, and its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The value as written (no trimming, as NCCL reads it).
    pub raw: String,
    /// Where it came from.
    pub source: Source,
}

/// A knob value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The value does not parse as the knob's type.
    #[error("{name}={value:?} (from {origin}) is not a valid {expected}: {hint}")]
    BadValue {
        /// Knob name.
        name: String,
        /// The raw value.
        value: String,
        /// Where the value came from.
        origin: Source,
        /// The type expected, in words.
        expected: String,
        /// What to do.
        hint: String,
    },
    /// A config file could not be read.
    #[error("cannot read {}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl From<ConfigError> for crate::Error {
    fn from(e: ConfigError) -> Self {
        crate::Error::InvalidUsage(e.to_string())
    }
}

/// Where to load settings from. `Default` reads the real process environment, `$HOME` and
/// `/etc/nccl.conf`; tests point the fields at temporary files.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Use these variables instead of the process environment.
    pub env: Option<BTreeMap<String, String>>,
    /// Use this directory as `$HOME` instead of the environment's.
    pub home: Option<PathBuf>,
    /// Use this file instead of `/etc/nccl.conf`.
    pub system_conf: Option<PathBuf>,
}

/// The effective configuration: every knob that is set, with its provenance. Knobs that are not
/// set read as their registry default.
#[derive(Debug, Clone, Default)]
pub struct Config {
    values: BTreeMap<String, Setting>,
}

impl Config {
    /// A configuration with nothing set: every knob reads as its default.
    pub fn defaults() -> Config {
        Config::default()
    }

    /// Loads the process environment and the conf files with NCCL's precedence.
    ///
    /// Errors: [`ConfigError::File`] when a conf file exists but cannot be read.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::load(&LoadOptions::default())
    }

    /// Loads settings as [`LoadOptions`] says, with NCCL's precedence.
    ///
    /// Errors: [`ConfigError::File`] when a conf file exists but cannot be read.
    pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
        let env: BTreeMap<String, String> = match &opts.env {
            Some(e) => e.clone(),
            None => std::env::vars().collect(),
        };
        let mut values = BTreeMap::new();
        for (k, v) in &env {
            if k.starts_with("NCCL_") || k.starts_with("RNCCL_") {
                values.insert(
                    k.clone(),
                    Setting {
                        raw: v.clone(),
                        source: Source::Env,
                    },
                );
            }
        }
        let user_file = match env.get("NCCL_CONF_FILE").filter(|v| !v.is_empty()) {
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
            .unwrap_or_else(|| PathBuf::from("/etc/nccl.conf"));
        for file in user_file.iter().chain(std::iter::once(&system)) {
            read_conf_file(file, &mut values)?;
        }
        Ok(Config { values })
    }

    /// Sets `name` with the highest precedence (used for CLI flags that map to knobs).
    pub fn set(&mut self, name: &str, value: impl Into<String>, source: Source) {
        self.values.insert(
            name.to_string(),
            Setting {
                raw: value.into(),
                source,
            },
        );
    }

    /// The effective setting of `name`, if it is set anywhere.
    pub fn setting(&self, name: &str) -> Option<&Setting> {
        self.values.get(name)
    }

    /// Every setting in effect, by name.
    pub fn settings(&self) -> impl Iterator<Item = (&str, &Setting)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The raw string value of `name` if set and non-empty (NCCL treats empty as unset).
    pub fn string(&self, name: &str) -> Option<&str> {
        debug_assert!(lookup(name).is_some(), "knob {name} is not in the registry");
        self.values
            .get(name)
            .map(|s| s.raw.as_str())
            .filter(|s| !s.is_empty())
    }

    /// The integer value of `name`, parsed as NCCL does (C `strtoll(s, NULL, 0)`: `0x` hex,
    /// leading-`0` octal), or the registry default when unset or empty.
    ///
    /// Errors: [`ConfigError::BadValue`] naming the knob, the value and its source when the value
    /// does not parse (NCCL would silently use the default; rnccl refuses).
    pub fn int(&self, name: &str) -> Result<i64, ConfigError> {
        let spec = lookup(name).unwrap_or_else(|| panic!("knob {name} is not in the registry"));
        match self.values.get(name).filter(|s| !s.raw.is_empty()) {
            None => Ok(parse_c_int(spec.default).expect("registry default of an integer knob parses")),
            Some(s) => parse_c_int(&s.raw).ok_or_else(|| ConfigError::BadValue {
                name: name.to_string(),
                value: s.raw.clone(),
                origin: s.source.clone(),
                expected: "integer".into(),
                hint: format!(
                    "write a decimal number (0x.. is hex, a leading 0 is octal), or unset it to get the default {}",
                    spec.default
                ),
            }),
        }
    }

    /// The boolean value of `name`: an integer knob read as `value != 0`, as NCCL does.
    ///
    /// Errors: as [`Config::int`].
    pub fn flag(&self, name: &str) -> Result<bool, ConfigError> {
        Ok(self.int(name)? != 0)
    }
}

/// Applies one nccl.conf-style file with NCCL's line rules: lines whose first character is `#`
/// are skipped, the key is the text before the first `=`, the value the rest verbatim (trailing
/// `\n`/`\r` stripped); a value never overrides one already set. A missing file is not an error.
fn read_conf_file(path: &Path, values: &mut BTreeMap<String, Setting>) -> Result<(), ConfigError> {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
            return Err(ConfigError::File {
                path: path.to_path_buf(),
                message: "is a directory".into(),
            });
        }
        Err(e) => {
            return Err(ConfigError::File {
                path: path.to_path_buf(),
                message: e.to_string(),
            });
        }
    };
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        values.entry(key.to_string()).or_insert_with(|| Setting {
            raw: value.to_string(),
            source: Source::ConfFile {
                path: path.to_path_buf(),
                line: i + 1,
            },
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn env_beats_user_file_beats_system_file() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.conf");
        let system = dir.path().join("system.conf");
        std::fs::write(
            &user,
            "NCCL_BUFFSIZE=0x100\n# NCCL_MIN_NCHANNELS=9\nNCCL_MAX_NCHANNELS=4\n",
        )
        .unwrap();
        std::fs::write(&system, "NCCL_MAX_NCHANNELS=8\nNCCL_SHM_DISABLE=1\r\n").unwrap();
        let opts = LoadOptions {
            env: env(&[
                ("NCCL_BUFFSIZE", "1024"),
                ("NCCL_CONF_FILE", user.to_str().unwrap()),
            ]),
            home: None,
            system_conf: Some(system.clone()),
        };
        let c = Config::load(&opts).unwrap();
        assert_eq!(c.int("NCCL_BUFFSIZE").unwrap(), 1024);
        assert_eq!(c.int("NCCL_MAX_NCHANNELS").unwrap(), 4);
        assert_eq!(
            c.setting("NCCL_MAX_NCHANNELS").unwrap().source,
            Source::ConfFile {
                path: user,
                line: 3
            }
        );
        assert!(c.flag("NCCL_SHM_DISABLE").unwrap());
        assert_eq!(
            c.int("NCCL_MIN_NCHANNELS").unwrap(),
            -2,
            "commented line ignored, default used"
        );
    }

    #[test]
    fn bad_integer_names_knob_value_and_source() {
        let c = Config::load(&LoadOptions {
            env: env(&[("NCCL_MAX_NCHANNELS", "lots")]),
            home: Some("/nonexistent".into()),
            system_conf: Some("/nonexistent/nccl.conf".into()),
        })
        .unwrap();
        let e = c.int("NCCL_MAX_NCHANNELS").unwrap_err().to_string();
        assert!(
            e.contains("NCCL_MAX_NCHANNELS") && e.contains("lots") && e.contains("environment"),
            "{e}"
        );
    }
}
