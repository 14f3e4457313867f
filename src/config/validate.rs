//! [`Config::validate`]: every setting judged at once, with the verdict `env-explain` shows
//! ([`value::verdict`]), so a communicator refuses bad values before it meets its peers.

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

use super::finding::Severity;
use super::value::{self, Verdict};
use super::{Config, ConfigError};

impl Config {
    /// Checks the value of every setting in effect with [`value::verdict`], the code behind
    /// `rnccl env-explain`, so the engine refuses exactly what `env-explain` calls an error.
    ///
    /// Names the registry does not know (typos, other programs' variables) and knobs NCCL stopped
    /// reading stop nothing, as in NCCL, which ignores them; each is logged once per process as a
    /// warning (target `rnccl::env`) with `env-explain`'s did-you-mean.
    ///
    /// Errors: [`ConfigError::BadValue`] for one bad value, [`ConfigError::BadValues`] listing
    /// every one (in name order) when there are several; each names the knob, the value, where it
    /// came from, what NCCL would make of it, what to do and what the knob accepts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut bad = Vec::new();
        for (name, setting) in self.settings() {
            match value::verdict(name, &setting.raw) {
                Verdict::Read(spec, reading) => {
                    bad.extend(value::bad_value(spec, setting, &reading));
                }
                Verdict::Unknown { .. } | Verdict::Removed(_) => {
                    for f in super::names::name_findings(name, setting)
                        .into_iter()
                        .filter(|f| f.severity >= Severity::Warning)
                    {
                        let hint = if f.hint.is_empty() {
                            String::new()
                        } else {
                            format!("; {}", f.hint)
                        };
                        warn_once(format!(
                            "{name}={:?} (from {}): {}{hint}",
                            setting.raw, setting.source, f.message
                        ));
                    }
                }
            }
        }
        match bad.len() {
            0 => Ok(()),
            1 => Err(bad.remove(0).into()),
            _ => Err(ConfigError::BadValues(bad)),
        }
    }
}

/// Logs `message` as a warning unless this process already did: communicators created one after
/// another (or one per thread) validate the same settings again.
fn warn_once(message: String) {
    static SEEN: OnceLock<Mutex<BTreeSet<String>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if seen.insert(message.clone()) {
        tracing::warn!(target: "rnccl::env", "{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_value_is_listed_with_its_syntax() {
        let e = Config::from_pairs(&[
            ("NCCL_PROTO", "bogus"),
            ("NCCL_NTHREADS", "-5"),
            ("NCCL_DEBUG", "verbose"),
            ("NCCL_IB_TIMEOUT", "22"),
        ])
        .unwrap()
        .validate()
        .unwrap_err();
        let ConfigError::BadValues(list) = &e else {
            panic!("{e:?}")
        };
        let names: Vec<&str> = list.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["NCCL_DEBUG", "NCCL_NTHREADS", "NCCL_PROTO"]);
        let text = e.to_string();
        assert!(text.starts_with("3 NCCL settings cannot be used"), "{text}");
        assert!(
            text.contains("an integer from 64 to 512")
                && text.contains("VERSION, WARN, INFO, ABORT, TRACE")
                && text.contains("LL, LL128, Simple"),
            "{text}"
        );
    }

    #[test]
    fn unknown_names_and_good_values_pass() {
        Config::from_pairs(&[
            ("NCCL_SOCKET_IFNAM", "eth0"),
            ("NCCL_IB_GDR_LEVEL", "PHB"),
            ("NCCL_BUFFSIZE", "01000"),
            ("NCCL_DEBUG", "info"),
        ])
        .unwrap()
        .validate()
        .unwrap();
        let one = Config::from_pairs(&[("NCCL_NTHREADS", "1e9")])
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(
            matches!(&one, ConfigError::BadValue(b) if b.name == "NCCL_NTHREADS"),
            "{one:?}"
        );
    }
}
