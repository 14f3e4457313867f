//! Errors of topology loading and detection.

use std::path::PathBuf;

use crate::config::ConfigError;

/// What went wrong while reading or building a topology.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// A topology or graph XML document is malformed or does not describe a usable system;
    /// `source` names the file (or `<string>`), `line` is 1-based.
    #[error("{file}:{line}: {message}")]
    Xml {
        /// The file the document came from, or `<string>`.
        file: String,
        /// 1-based line of the element or token at fault.
        line: usize,
        /// What is wrong and what NCCL expects.
        message: String,
    },
    /// A file could not be read or written.
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// A knob that topology reads has a value that cannot be used.
    #[error(transparent)]
    Config(Box<ConfigError>),
    /// The topology cannot serve the request (no GPU, GPU count differs from the ranks…).
    #[error("{0}")]
    Unusable(String),
    /// An `--assume` item for studying a file offline is malformed.
    #[error("--assume {item}: {message}")]
    Assumption {
        /// The item as given (`gpu=h1000`).
        item: String,
        /// What is wrong and what is accepted.
        message: String,
    },
}

impl From<ConfigError> for TopoError {
    fn from(e: ConfigError) -> Self {
        TopoError::Config(Box::new(e))
    }
}

impl From<TopoError> for crate::error::Error {
    fn from(e: TopoError) -> Self {
        match e {
            TopoError::Io {
                action,
                path,
                error,
            } => crate::error::Error::System {
                context: format!("trying to {action} {}", path.display()),
                os_error: error,
            },
            other => crate::error::Error::InvalidUsage(other.to_string()),
        }
    }
}
