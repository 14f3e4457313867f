//! [`Finding`]: one problem or remark, with a [`Severity`] — about a setting (`env-explain`) or
//! about a topology (`topo::diagnose`). The one type every diagnostic of rnccl reports in.

use serde::Serialize;

/// How much a finding matters. `env-explain --check` fails on any [`Severity::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Worth knowing; nothing is wrong, or it may be expected.
    Note,
    /// Probably not what was meant, risky, or costing bandwidth now.
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
    /// A short stable code for scripts (`pcie-link`, `acs`, `numa`...; empty when the finding has
    /// none, as `env-explain`'s do not).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub code: &'static str,
    /// What happens, in a sentence, naming the devices or knobs involved.
    pub message: String,
    /// What to do about it (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hint: String,
    /// The devices the finding is about, by PCI bus id (`0000:1b:00.0`), so a report on some
    /// devices (`ibcheck` on the HCAs) can take the findings of a whole-host rule that concern
    /// them; empty when the finding is about no particular device.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub about: Vec<String>,
}

impl Finding {
    /// A finding of any severity.
    pub fn new(severity: Severity, message: impl Into<String>, hint: impl Into<String>) -> Finding {
        Finding {
            severity,
            code: "",
            message: message.into(),
            hint: hint.into(),
            about: Vec::new(),
        }
    }

    /// An [`Severity::Error`].
    pub fn error(message: impl Into<String>, hint: impl Into<String>) -> Finding {
        Finding::new(Severity::Error, message, hint)
    }

    /// A [`Severity::Warning`].
    pub fn warning(message: impl Into<String>, hint: impl Into<String>) -> Finding {
        Finding::new(Severity::Warning, message, hint)
    }

    /// A [`Severity::Note`].
    pub fn note(message: impl Into<String>) -> Finding {
        Finding::new(Severity::Note, message, "")
    }

    /// The same finding with a stable code.
    pub fn with_code(mut self, code: &'static str) -> Finding {
        self.code = code;
        self
    }

    /// The same finding, about these devices (PCI bus ids).
    pub fn about<S: Into<String>>(mut self, devices: impl IntoIterator<Item = S>) -> Finding {
        self.about.extend(devices.into_iter().map(Into::into));
        self
    }
}
