//! The analysis behind `rnccl env-explain`: for every setting in effect, what NCCL makes of it,
//! where it came from, what it overrides, and what is wrong with it, alone (bad value, unknown or
//! removed name, risky knob), with other knobs (conflicts), or on this host (interfaces and HCAs
//! that do not exist). The CLI only renders the [`Report`].
//!
//! It sits above the knob registry ([`crate::config`]), which stays the ground floor: judging a
//! setting against this host needs its interfaces and adapters ([`crate::topo`]), and some
//! consequences need InfiniBand's formulas ([`crate::ib`]).

mod conflicts;
mod consequences;
mod devices;
mod host;

pub use host::HostDevices;

use std::path::PathBuf;

use serde::Serialize;

use crate::config::names;
use crate::config::value::{self, Reading, Verdict};
use crate::config::{
    Category, Config, FileRead, Finding, KnobSpec, Setting, Severity, Source, lookup,
};

/// One setting in effect, explained.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    /// The variable name.
    pub name: String,
    /// The value as given.
    pub value: String,
    /// Where it came from.
    pub source: Source,
    /// Whether the registry knows the name.
    pub known: bool,
    /// Its category, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// Whether rnccl's engine acts on it.
    pub honoured: bool,
    /// What NCCL makes of the value (absent for unknown and removed names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reading: Option<Reading>,
    /// Numbers worked out from it (timeouts, sizes), in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<String>,
    /// Lower-precedence settings of the same name that this one overrides, highest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<Setting>,
    /// Problems and remarks, worst first.
    pub findings: Vec<Finding>,
}

impl Explained {
    /// The worst severity among the findings, if any.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// A remark about a source file rather than a setting (a conf line NCCL skips).
#[derive(Debug, Clone, Serialize)]
pub struct FileFinding {
    /// The file.
    pub path: PathBuf,
    /// 1-based line (0: the whole file).
    pub line: usize,
    /// The remark.
    pub finding: Finding,
}

/// How many findings of each severity a report holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Errors.
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// Notes.
    pub notes: usize,
}

/// Everything `env-explain` says about a configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The host name YAML host sections were matched against.
    pub host: String,
    /// The files read, in order.
    pub files: Vec<FileRead>,
    /// Every setting in effect, by name.
    pub settings: Vec<Explained>,
    /// Remarks about source files.
    pub file_findings: Vec<FileFinding>,
    /// Totals.
    pub counts: Counts,
}

impl Report {
    /// True when any finding is an error (what `--check` gates on).
    pub fn has_errors(&self) -> bool {
        self.counts.errors > 0
    }
}

/// Explains every setting of `cfg`, checking device filters against `host`.
pub fn explain(cfg: &Config, host: &HostDevices) -> Report {
    let mut settings: Vec<Explained> = cfg
        .settings()
        .map(|(name, setting)| explain_one(cfg, name, setting, host))
        .collect();
    conflicts::check(cfg, &mut settings);
    for s in &mut settings {
        s.findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    }
    let file_findings: Vec<FileFinding> = cfg
        .notes()
        .iter()
        .map(|n| FileFinding {
            path: n.path.clone(),
            line: n.line,
            finding: Finding::warning(n.message.clone(), ""),
        })
        .collect();
    let mut counts = Counts::default();
    let all = settings
        .iter()
        .flat_map(|s| s.findings.iter())
        .chain(file_findings.iter().map(|f| &f.finding));
    for f in all {
        match f.severity {
            Severity::Error => counts.errors += 1,
            Severity::Warning => counts.warnings += 1,
            Severity::Note => counts.notes += 1,
        }
    }
    Report {
        host: cfg.hostname().unwrap_or_default().to_string(),
        files: cfg.files().to_vec(),
        settings,
        file_findings,
        counts,
    }
}

fn explain_one(cfg: &Config, name: &str, setting: &Setting, host: &HostDevices) -> Explained {
    let spec = lookup(name);
    let mut e = Explained {
        name: name.to_string(),
        value: setting.raw.clone(),
        source: setting.source.clone(),
        known: spec.is_some(),
        category: spec.map(|k| k.category),
        honoured: spec.is_some_and(KnobSpec::honoured),
        reading: None,
        consequences: Vec::new(),
        overridden: cfg
            .overridden(name)
            .iter()
            .filter(|o| o.raw != setting.raw)
            .cloned()
            .collect(),
        findings: Vec::new(),
    };
    e.findings.extend(names::check(name, setting, spec));
    let Verdict::Read(spec, reading) = value::verdict(name, &setting.raw) else {
        return e;
    };
    e.findings.extend(reading.findings.iter().cloned());
    if !reading.has_error() {
        e.findings
            .extend(devices::check(cfg, spec, &setting.raw, host));
    }
    e.consequences = consequences::compute(cfg, spec);
    e.reading = Some(reading);
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadOptions;

    fn report(pairs: &[(&str, &str)]) -> Report {
        let cfg = Config::load(&LoadOptions {
            env: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            home: Some("/nonexistent".into()),
            system_conf: Some("/nonexistent/nccl.conf".into()),
            hostname: Some("node1".into()),
            ..LoadOptions::default()
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/class/net/eth0")).unwrap();
        std::fs::write(dir.path().join("sys/class/net/eth0/operstate"), "up").unwrap();
        explain(&cfg, &HostDevices::from_sysfs(dir.path()))
    }

    fn item<'a>(r: &'a Report, name: &str) -> &'a Explained {
        r.settings.iter().find(|s| s.name == name).unwrap()
    }

    #[test]
    fn unknown_removed_and_dangerous() {
        let r = report(&[
            ("NCCL_SOCKET_IFNAM", "eth0"),
            ("NCCL_IB_GDR_LEVEL", "PHB"),
            ("NCCL_PROTO", "LL128"),
            ("nccl_debug", "INFO"),
            ("RNCCL_TIMEOUTS", "5"),
            ("NCCL_VERSION", "2.28.3-1"),
        ]);
        let typo = item(&r, "NCCL_SOCKET_IFNAM");
        assert_eq!(typo.worst(), Some(Severity::Error));
        assert!(
            typo.findings[0].hint.contains("NCCL_SOCKET_IFNAME"),
            "{typo:?}"
        );
        let removed = item(&r, "NCCL_IB_GDR_LEVEL");
        assert!(
            removed.findings[0].hint.contains("NCCL_NET_GDR_LEVEL"),
            "{removed:?}"
        );
        assert_eq!(item(&r, "NCCL_PROTO").worst(), Some(Severity::Warning));
        let lower = item(&r, "nccl_debug");
        assert!(lower.findings[0].hint.contains("NCCL_DEBUG"), "{lower:?}");
        let own = item(&r, "RNCCL_TIMEOUTS");
        assert!(
            own.findings[0].message.starts_with("rnccl does not read"),
            "{own:?}"
        );
        let image = item(&r, "NCCL_VERSION");
        assert_eq!(image.worst(), Some(Severity::Note), "{image:?}");
        assert!(image.findings[0].message.contains("container"), "{image:?}");
        assert!(r.has_errors());
    }

    #[test]
    fn host_devices_and_conflicts() {
        let r = report(&[
            ("NCCL_SOCKET_IFNAME", "ens"),
            ("NCCL_P2P_DISABLE", "1"),
            ("NCCL_P2P_LEVEL", "NVL"),
            ("NCCL_IB_TIMEOUT", "22"),
        ]);
        let ifname = item(&r, "NCCL_SOCKET_IFNAME");
        assert!(ifname.findings[0].message.contains("eth0"), "{ifname:?}");
        let level = item(&r, "NCCL_P2P_LEVEL");
        assert!(
            level.findings[0].message.contains("NCCL_P2P_DISABLE"),
            "{level:?}"
        );
        let timeout = item(&r, "NCCL_IB_TIMEOUT");
        assert!(timeout.consequences[0].contains("2.3 min"), "{timeout:?}");
    }
}
