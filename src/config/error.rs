//! [`ConfigError`]: a knob value, a conf file or a YAML config that cannot be used.

use std::path::PathBuf;

use super::Source;

/// A knob value, conf file or YAML config that cannot be used. Every variant says what is wrong
/// and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The value does not parse as the knob's type, or lies outside its valid range.
    #[error("{name}={value:?} (from {origin}) is not a valid {expected}: {hint}")]
    BadValue {
        /// Knob name.
        name: String,
        /// The raw value.
        value: String,
        /// Where the value came from.
        origin: Source,
        /// The type expected, in words.
        expected: &'static str,
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
    /// A YAML config is malformed, hostile, or holds a value that does not fit its knob.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Yaml {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem, when known.
        line: Option<usize>,
        /// What is wrong and what to do.
        message: String,
    },
}

impl From<ConfigError> for crate::Error {
    fn from(e: ConfigError) -> Self {
        crate::Error::InvalidUsage(e.to_string())
    }
}
