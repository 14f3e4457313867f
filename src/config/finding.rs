//! [`Finding`]: one problem or remark about a setting, with a [`Severity`].

use serde::Serialize;

/// How much a finding matters. `env-explain --check` fails on any [`Severity::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Worth knowing; nothing is wrong.
    Note,
    /// Probably not what was meant, or risky.
    Warning,
    /// NCCL will not do what the setting says (it rejects the value, reads another one, or fails).
    Error,
}

impl Severity {
    /// The lower-case word (`note`, `warning`, `error`).
    pub fn word(&self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// One problem or remark: what happens and, when there is something to do, what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// What happens, in a sentence.
    pub message: String,
    /// What to do about it (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hint: String,
}

impl Finding {
    /// An [`Severity::Error`].
    pub fn error(message: impl Into<String>, hint: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Error,
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// A [`Severity::Warning`].
    pub fn warning(message: impl Into<String>, hint: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Warning,
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// A [`Severity::Note`].
    pub fn note(message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Note,
            message: message.into(),
            hint: String::new(),
        }
    }
}
