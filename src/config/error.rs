//! [`ConfigError`]: a knob value, a knob name, a conf file or a YAML config that cannot be used;
//! [`BadValue`]: one knob value NCCL would not use as written.

use std::fmt;
use std::path::PathBuf;

use super::Source;

/// One knob value that cannot be used: what NCCL would make of it, what to do, and the syntax the
/// knob accepts. The verdict comes from [`crate::config::value::read`], the code `env-explain`
/// shows, so the engine and `env-explain` always agree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadValue {
    /// Knob name.
    pub name: String,
    /// The raw value.
    pub value: String,
    /// Where the value came from.
    pub origin: Source,
    /// What is wrong with it, in a sentence (what NCCL would do with it).
    pub problem: String,
    /// What to do.
    pub hint: String,
    /// The values the knob accepts, in words (`an integer from 64 to 512`, NCCL's list syntax...).
    pub accepted: String,
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?} (from {}) cannot be used: {}",
            self.name, self.value, self.origin, self.problem
        )?;
        if !self.hint.is_empty() {
            write!(f, "; {}", self.hint)?;
        }
        write!(f, ". {} takes {}", self.name, self.accepted)
    }
}

/// A knob value, knob name, conf file or YAML config that cannot be used. Every variant says what
/// is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The value does not parse as the knob's type, or lies outside its valid range.
    #[error("{0}")]
    BadValue(Box<BadValue>),
    /// Several knob values cannot be used ([`crate::config::Config::validate`]), in name order.
    #[error("{} NCCL settings cannot be used:\n{}", .0.len(), bullet_list(.0))]
    BadValues(Vec<BadValue>),
    /// A program asked for a knob the registry does not hold (a misspelt name in code or input).
    #[error("{name} is not a knob rnccl knows{}", suggestion_text(.suggestions))]
    UnknownKnob {
        /// The name asked for.
        name: String,
        /// Registered names close to it.
        suggestions: Vec<&'static str>,
    },
    /// A program read a knob with an accessor for another type (`Config::int` on a list knob).
    #[error("{name} is a {ty} knob, not {wanted}; read it with Config::{accessor}")]
    WrongType {
        /// The knob.
        name: String,
        /// Its registry type (`device-list`, `float`...).
        ty: &'static str,
        /// What the accessor reads (`an integer`, `a switch`, `a number`).
        wanted: &'static str,
        /// The accessor that fits the knob.
        accessor: &'static str,
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

impl From<BadValue> for ConfigError {
    fn from(b: BadValue) -> Self {
        ConfigError::BadValue(Box::new(b))
    }
}

fn bullet_list(values: &[BadValue]) -> String {
    values
        .iter()
        .map(|v| format!("  - {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn suggestion_text(names: &[&str]) -> String {
    if names.is_empty() {
        "; every knob is listed in docs/knobs.md".to_string()
    } else {
        format!("; did you mean {}?", names.join(" or "))
    }
}

impl From<ConfigError> for crate::error::Error {
    fn from(e: ConfigError) -> Self {
        crate::error::Error::InvalidUsage(e.to_string())
    }
}
