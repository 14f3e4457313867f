//! Where a value came from: [`Source`] and the [`Setting`] that carries it.

use std::path::PathBuf;

use serde::Serialize;

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
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
    /// A key of a YAML config (`--config` or `RNCCL_CONFIG`); boxed to keep errors that carry a
    /// source small.
    Yaml(Box<YamlKey>),
    /// Set by the program itself (a CLI flag such as `bench -T`), named here.
    Program(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Env => f.write_str("environment"),
            Source::ConfFile { path, line } => write!(f, "{}:{}", path.display(), line),
            Source::Yaml(y) => write!(f, "{}:{} ({})", y.path.display(), y.line, y.key),
            Source::Program(what) => f.write_str(what),
        }
    }
}

/// Where in a YAML config a value was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct YamlKey {
    /// The file.
    pub path: PathBuf,
    /// 1-based line of the value.
    pub line: usize,
    /// The key path, e.g. `knobs.NCCL_IB_HCA` or `hosts."gpu-*".NCCL_IB_HCA`.
    pub key: String,
}

/// One effective value: the raw text exactly as given, and its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The value as written (no trimming, as NCCL reads it).
    pub raw: String,
    /// Where it came from.
    pub source: Source,
}
