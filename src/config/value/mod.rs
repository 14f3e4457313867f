//! What NCCL makes of one raw value: [`read`] returns the value NCCL ends up using, what it means,
//! and every way that differs from what the text seems to say; [`verdict`] applies it to a
//! setting by name. Pure: no file system, no host.
//!
//! This is the one judge of knob values: `env-explain` shows its findings, and the engine's
//! accessors ([`crate::config::Config::int`] and friends) and
//! [`crate::config::Config::validate`] refuse exactly the values it calls errors.

mod list;
mod number;
mod word;

use serde::Serialize;

use super::error::BadValue;
use super::finding::{Finding, Severity};
use super::registry::{KnobSpec, KnobType, Status, did_you_mean, lookup};
use super::source::Setting;

pub(crate) use number::default_int;
pub use number::{format_bytes, format_duration};

/// What a setting comes to: an unknown name, a knob NCCL no longer reads, or a knob NCCL reads
/// and what it makes of the value.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Not a registered knob: NCCL ignores it. `suggestions` are close registered names.
    Unknown {
        /// The did-you-mean list ([`did_you_mean`]).
        suggestions: Vec<&'static str>,
    },
    /// A knob NCCL stopped reading: the value has no effect and is not checked.
    Removed(&'static KnobSpec),
    /// A knob NCCL reads, and what it makes of the value.
    Read(&'static KnobSpec, Reading),
}

/// The verdict on `name` set to `raw`, as `env-explain` and the engine both judge it.
pub fn verdict(name: &str, raw: &str) -> Verdict {
    match lookup(name) {
        None => Verdict::Unknown {
            suggestions: did_you_mean(name),
        },
        Some(spec) if matches!(spec.status, Status::Removed { .. }) => Verdict::Removed(spec),
        Some(spec) => Verdict::Read(spec, read(spec, raw)),
    }
}

/// The engine's error for `setting` of `spec` when `reading` (its [`read`]) holds an error:
/// the worst finding's message and hint, and what the knob accepts.
pub fn bad_value(spec: &KnobSpec, setting: &Setting, reading: &Reading) -> Option<BadValue> {
    let f = reading
        .findings
        .iter()
        .find(|f| f.severity == Severity::Error)?;
    Some(BadValue {
        name: spec.name.to_string(),
        value: setting.raw.clone(),
        origin: setting.source.clone(),
        problem: f.message.clone(),
        hint: f.hint.clone(),
        accepted: spec.accepted(),
    })
}

/// What NCCL makes of a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reading {
    /// The value NCCL acts on, in canonical form (`8` for `010`, `NVL`, `INIT,NET`...).
    pub effective: String,
    /// What that means, in words (empty when the value speaks for itself).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub meaning: String,
    /// Ways the value differs from what it seems to say, worst first. Not serialized: a report
    /// carries them in the setting's own findings.
    #[serde(skip_serializing)]
    pub findings: Vec<Finding>,
}

impl Reading {
    fn new(effective: impl Into<String>, meaning: impl Into<String>) -> Reading {
        Reading {
            effective: effective.into(),
            meaning: meaning.into(),
            findings: Vec::new(),
        }
    }

    /// Adds a finding.
    fn with(mut self, f: Finding) -> Reading {
        self.findings.push(f);
        self
    }

    /// True when a finding is an error.
    pub fn has_error(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Reads `raw` as NCCL would for `spec`. An empty value is NCCL's "unset" and reads as the
/// default.
pub fn read(spec: &KnobSpec, raw: &str) -> Reading {
    if raw.is_empty() {
        return Reading::new(spec.default_text(), "").with(Finding::note(
            "empty: NCCL treats an empty value as unset and uses the default",
        ));
    }
    let mut r = match spec.ty {
        KnobType::Int | KnobType::Bool | KnobType::Choice(_) => number::read_int(spec, raw),
        KnobType::TypedBool => number::read_typed_bool(spec, raw),
        KnobType::Float => number::read_float(raw),
        KnobType::Keyword(c) => word::read_keyword(spec, raw, c, false),
        KnobType::ExactKeyword(c) => word::read_keyword(spec, raw, c, true),
        KnobType::PathLevel => word::read_path_level(raw),
        KnobType::MergeLevel => word::read_merge_level(raw),
        KnobType::Bitset(c) => word::read_bitset(spec, raw, c),
        KnobType::NetdevsPolicy => word::read_netdevs_policy(raw),
        KnobType::CtaPolicy => word::read_cta_policy(raw),
        KnobType::DeviceList => list::read_device_list(spec, raw),
        KnobType::AlgoList => list::read_algo_proto(raw, true),
        KnobType::ProtoList => list::read_algo_proto(raw, false),
        KnobType::HostPort => list::read_host_port(raw),
        KnobType::CpuList => list::read_cpu_list(raw),
        KnobType::IntList => list::read_int_list(raw),
        KnobType::NicGroups => list::read_nic_groups(raw),
        KnobType::NameList => list::read_name_list(spec, raw),
        KnobType::Text => Reading::new(raw, ""),
        KnobType::File | KnobType::OutputFile => list::read_path(spec, raw),
    };
    r.findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rd(name: &str, raw: &str) -> Reading {
        read(lookup(name).unwrap(), raw)
    }

    fn worst(r: &Reading) -> Option<Severity> {
        r.findings.first().map(|f| f.severity)
    }

    #[test]
    fn integers_follow_strtoll() {
        let r = rd("NCCL_IB_TIMEOUT", "08");
        assert_eq!(
            (r.effective.as_str(), worst(&r)),
            ("0", Some(Severity::Error))
        );
        assert!(r.findings[0].message.contains("octal"), "{r:?}");
        let r = rd("NCCL_BUFFSIZE", "01000");
        assert_eq!(
            (r.effective.as_str(), worst(&r)),
            ("512", Some(Severity::Warning))
        );
        let r = rd("NCCL_BUFFSIZE", "0x400000");
        assert_eq!(r.effective, "4194304");
        assert!(r.meaning.contains("4 MiB"), "{r:?}");
        let r = rd("NCCL_BUFFSIZE", "4M");
        assert_eq!(
            (r.effective.as_str(), worst(&r)),
            ("4", Some(Severity::Error))
        );
        assert!(r.findings[0].hint.contains("suffix"), "{r:?}");
        let r = rd("NCCL_BUFFSIZE", "lots");
        assert_eq!(
            (r.effective.as_str(), worst(&r)),
            ("0", Some(Severity::Error))
        );
        let r = rd("NCCL_BUFFSIZE", "99999999999999999999");
        assert_eq!(worst(&r), Some(Severity::Error));
        assert_eq!(
            (r.effective.as_str(), r.meaning.as_str()),
            ("4194304 (4 MiB)", "the default"),
            "overflow means the default, shown as the value NCCL uses: {r:?}"
        );
        let r = rd("NCCL_NSOCKS_PERTHREAD", "-2");
        assert!(r.findings.is_empty(), "the default sentinel is fine: {r:?}");
        let r = rd("NCCL_IB_RETRY_CNT", "9");
        assert_eq!(worst(&r), Some(Severity::Error));
        let r = rd("NCCL_IB_TIMEOUT", "22");
        assert!(r.meaning.contains("17.2 s"), "{r:?}");
    }

    #[test]
    fn switches_and_choices() {
        let r = rd("NCCL_SHM_DISABLE", "true");
        assert_eq!(
            (r.effective.as_str(), worst(&r)),
            ("0", Some(Severity::Error))
        );
        assert!(r.meaning.contains("off"), "{r:?}");
        let r = rd("NCCL_P2P_DISABLE", "2");
        assert_eq!(worst(&r), Some(Severity::Error));
        let r = rd("NCCL_CROSS_NIC", "0");
        assert!(r.meaning.contains("same NIC"), "{r:?}");
        let r = rd("NCCL_SET_THREAD_NAME", "yes");
        assert_eq!(worst(&r), Some(Severity::Error));
        let r = rd("NCCL_SET_THREAD_NAME", "t");
        assert!(r.findings.is_empty() && r.effective == "TRUE", "{r:?}");
    }

    #[test]
    fn empty_is_unset() {
        let r = rd("NCCL_BUFFSIZE", "");
        assert_eq!(worst(&r), Some(Severity::Note));
    }
}
