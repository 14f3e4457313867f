//! `rnccl ibcheck`'s analysis: reads a host's RDMA adapters (sysfs, and libibverbs when the
//! host is this one), its PCI tree and GPUs (topology detection) and the knobs in effect, then
//! runs the checks of diagnostics.md §A.2, each giving a [`Check`]: ok, note, warning or error,
//! with its evidence, what it means and the fix. The CLI renders the [`Report`].
//!
//! Rules that also exist elsewhere are not repeated: PCIe link training, ACS, NUMA and
//! GPUDirect placement come from [`crate::topo::diagnose`], knob values and `NCCL_IB_HCA`
//! matching from [`crate::explain`], the GID choice from [`crate::ib::gid`].

mod counters;
mod knobs;
pub mod perf;
mod placement;
mod port;

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::config::syntax::DeviceFilter;
use crate::config::{Config, ConfigError, Finding, Severity};
use crate::ib::counters::CounterDelta;
use crate::ib::params::IbParams;
use crate::ib::sysfs::IbHost;
use crate::ib::{DeviceAttr, PortAttr, Provider, VerbsError};
use crate::topo::detect::sysfs::Root;
use crate::topo::{System, TopoError};

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Passed.
    Ok,
    /// Worth knowing; nothing to fix.
    Note,
    /// Costs bandwidth or risks failures; `--strict` fails on it.
    Warning,
    /// NCCL will fail or run far below the hardware.
    Error,
}

impl Verdict {
    /// The word (`ok`, `note`, `warning`, `error`).
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Note => "note",
            Verdict::Warning => "warning",
            Verdict::Error => "error",
        }
    }
}

impl From<Severity> for Verdict {
    fn from(s: Severity) -> Verdict {
        match s {
            Severity::Note => Verdict::Note,
            Severity::Warning => Verdict::Warning,
            Severity::Error => Verdict::Error,
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// A stable id for scripts (`port-state`, `gid`, `counters`, `pcie-link`...).
    pub id: &'static str,
    /// What it is about: a port (`mlx5_0:1`), an adapter, a GPU-NIC pair, a knob, or `host`.
    pub subject: String,
    /// The outcome.
    pub verdict: Verdict,
    /// What was found, in a sentence.
    pub message: String,
    /// What to do (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hint: String,
    /// The facts behind it (`ports/1/state = 4: ACTIVE`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

impl Check {
    /// A passed check.
    pub(crate) fn ok(id: &'static str, subject: &str, message: impl Into<String>) -> Check {
        Check {
            id,
            subject: subject.to_string(),
            verdict: Verdict::Ok,
            message: message.into(),
            hint: String::new(),
            evidence: Vec::new(),
        }
    }

    /// A check with a problem.
    pub(crate) fn found(
        id: &'static str,
        subject: &str,
        verdict: Verdict,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Check {
        Check {
            id,
            subject: subject.to_string(),
            verdict,
            message: message.into(),
            hint: hint.into(),
            evidence: Vec::new(),
        }
    }

    /// A check from a finding of another module's rule (its code becomes the id when it has
    /// one).
    pub(crate) fn from_finding(id: &'static str, subject: &str, f: &Finding) -> Check {
        Check {
            id: if f.code.is_empty() { id } else { f.code },
            subject: subject.to_string(),
            verdict: f.severity.into(),
            message: f.message.clone(),
            hint: f.hint.clone(),
            evidence: Vec::new(),
        }
    }

    /// The same check with evidence.
    pub(crate) fn with(mut self, evidence: impl IntoIterator<Item = String>) -> Check {
        self.evidence.extend(evidence);
        self
    }
}

/// One port as libibverbs reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerbsPort {
    /// Port number.
    pub port: u8,
    /// `ibv_query_port`.
    pub attr: PortAttr,
}

/// One device as libibverbs reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerbsDevice {
    /// Device name.
    pub name: String,
    /// `ibv_query_device`, when the device opened.
    pub attr: Option<DeviceAttr>,
    /// Ports queried.
    pub ports: Vec<VerbsPort>,
    /// Why the device could not be opened or queried.
    pub error: Option<String>,
}

/// What libibverbs says, when it was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerbsView {
    /// The library loaded (`libibverbs.so.1`).
    pub library: Option<String>,
    /// Why it was not used (not loaded, or a captured tree was examined).
    pub unavailable: Option<String>,
    /// Whether it can register DMA-BUF memory.
    pub dmabuf: Option<bool>,
    /// Devices it lists.
    pub devices: Vec<VerbsDevice>,
}

impl VerbsView {
    /// The verbs attributes of `hca`'s `port`.
    pub fn port(&self, hca: &str, port: u32) -> Option<&PortAttr> {
        self.devices
            .iter()
            .find(|d| d.name == hca)?
            .ports
            .iter()
            .find(|p| u32::from(p.port) == port)
            .map(|p| &p.attr)
    }

    /// Queries every device of `provider`.
    pub fn query(provider: &Provider) -> VerbsView {
        let verbs = &provider.0;
        let mut view = VerbsView {
            library: Some(verbs.describe()),
            dmabuf: Some(verbs.dmabuf()),
            ..VerbsView::default()
        };
        let names = match verbs.device_names() {
            Ok(n) => n,
            Err(e) => {
                view.unavailable = Some(e.to_string());
                return view;
            }
        };
        for name in names {
            let mut d = VerbsDevice {
                name: name.clone(),
                attr: None,
                ports: Vec::new(),
                error: None,
            };
            match verbs.open(&name).and_then(|dev| {
                let attr = dev.query_device()?;
                let ports = (1..=attr.phys_port_cnt)
                    .map(|p| dev.query_port(p).map(|a| VerbsPort { port: p, attr: a }))
                    .collect::<Result<Vec<_>, VerbsError>>()?;
                Ok((attr, ports))
            }) {
                Ok((attr, ports)) => {
                    d.attr = Some(attr);
                    d.ports = ports;
                }
                Err(e) => d.error = Some(e.to_string()),
            }
            view.devices.push(d);
        }
        view
    }
}

/// Computed facts of one port, beside what sysfs says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortReport {
    /// Adapter.
    pub hca: String,
    /// Port number.
    pub port: u32,
    /// Whether NCCL would use it (ACTIVE, IB or RoCE, selected by `NCCL_IB_HCA`).
    pub nccl_uses: bool,
    /// The GID index NCCL would use.
    pub nccl_gid_index: Option<usize>,
    /// Its netdev's MTU and state.
    pub netdev_mtu: Option<u32>,
    /// Its netdev's `operstate`.
    pub netdev_state: Option<String>,
    /// The adapter's PCIe link now, usable Gb/s.
    pub pcie_gbps: Option<f64>,
    /// The adapter's PCIe link at its best, usable Gb/s.
    pub pcie_max_gbps: Option<f64>,
    /// How the counters moved over `--interval`.
    pub delta: Option<CounterDelta>,
}

/// A GPU and the network device NCCL pairs it with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The GPU (`GPU0 0000:1b:00.0`).
    pub gpu: String,
    /// NCCL's network device for it (`mlx5_0:1`).
    pub net: String,
    /// NCCL's path type between them (`PIX`, `PXB`, `PHB`, `SYS`...).
    pub path: String,
    /// Whether NCCL would use GPUDirect RDMA between them.
    pub gdr: bool,
    /// NUMA node of the GPU and of the adapter (-1: not reported).
    pub numa: (Option<i64>, Option<i64>),
}

/// How many checks ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Passed.
    pub ok: usize,
    /// Notes.
    pub notes: usize,
    /// Warnings.
    pub warnings: usize,
    /// Errors.
    pub errors: usize,
}

/// Everything `ibcheck` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What was examined (`this host (node1)`, `captured host DIR`).
    pub source: String,
    /// The adapters examined (after `--hca`), as sysfs shows them.
    pub host: IbHost,
    /// Computed facts per port.
    pub ports: Vec<PortReport>,
    /// What libibverbs says.
    pub verbs: VerbsView,
    /// GPUs and their network devices (empty without GPUs).
    pub placement: Vec<Placement>,
    /// The memory lock limit (`Max locked memory` of /proc/self/limits), bytes; `None` for
    /// unlimited.
    pub memlock: Option<Option<u64>>,
    /// Seconds between the two counter reads (`--interval`).
    pub interval_s: Option<f64>,
    /// Every check, in order: host, per port, counters, placement, knobs.
    pub checks: Vec<Check>,
    /// Totals.
    pub counts: Counts,
}

impl Report {
    /// True when the host has no RDMA adapter at all (before `--hca`).
    pub fn no_devices(&self) -> bool {
        self.host.hcas.is_empty() && self.checks.iter().all(|c| c.id != "hca-filter")
    }

    /// The exit status: 2 on any error, 1 on a warning when `strict`, else 0.
    pub fn exit_code(&self, strict: bool) -> u8 {
        if self.counts.errors > 0 {
            2
        } else if strict && self.counts.warnings > 0 {
            1
        } else {
            0
        }
    }
}

/// Why `ibcheck` could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A knob value the registry refuses.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Topology detection failed.
    #[error(transparent)]
    Topo(#[from] TopoError),
}

/// How to run the checks.
pub struct Options<'a> {
    /// The tree to read (`/` for this host).
    pub root: &'a Path,
    /// `--hca`: examine only the ports this filter selects (NCCL_IB_HCA syntax).
    pub filter: Option<&'a DeviceFilter>,
    /// `--interval`: read the counters twice, this far apart.
    pub interval: Option<Duration>,
    /// `--expect-rate`: the port rate every port should run at, Gb/s.
    pub expect_gbps: Option<f64>,
    /// libibverbs (or another provider) to query, for this host; `None` skips the verbs query
    /// (a captured tree), `Some(Err)` says why it is missing.
    pub verbs: Option<Result<Provider, VerbsError>>,
    /// Called just before waiting `interval` between the counter reads.
    pub before_wait: &'a dyn Fn(Duration),
}

/// Runs every check on the host under `opts.root` with the knobs in `cfg`.
///
/// Errors: [`CheckError::Config`] for a knob value the registry refuses (an `NCCL_IB_*` value,
/// `NCCL_SOCKET_IFNAME`...); [`CheckError::Topo`] when the PCI tree or GPUs cannot be read.
pub fn run(cfg: &Config, opts: &Options<'_>) -> Result<Report, CheckError> {
    let root = Root::new(opts.root);
    let params = IbParams::from_config(cfg)?;
    let mut host = IbHost::read(&root);
    let mut checks = Vec::new();
    let total_hcas = host.hcas.len();
    if let Some(f) = opts.filter {
        for h in &mut host.hcas {
            let name = h.name.clone();
            h.ports.retain(|p| f.matches(&name, Some(p.base.port)));
        }
        host.hcas.retain(|h| !h.ports.is_empty());
        if host.hcas.is_empty() && total_hcas > 0 {
            checks.push(Check::found(
                "hca-filter",
                "--hca",
                Verdict::Error,
                "--hca selects no port of this host",
                "name an adapter that exists (rnccl ibcheck without --hca lists them)",
            ));
        }
    }
    let inventory = crate::topo::detect::detect(opts.root, cfg)?;
    let system = System::from_host(cfg, inventory.clone())?;
    let verbs = match &opts.verbs {
        None => VerbsView {
            unavailable: Some("not queried: a captured tree is examined".into()),
            ..VerbsView::default()
        },
        Some(Err(e)) => VerbsView {
            unavailable: Some(e.to_string()),
            ..VerbsView::default()
        },
        Some(Ok(v)) => VerbsView::query(v),
    };
    let mut ports = port::reports(&host, &params, &inventory);
    if host.hcas.is_empty() {
        return Ok(finish(
            cfg,
            opts,
            host,
            ports,
            verbs,
            Vec::new(),
            checks,
            &root,
        ));
    }
    checks.extend(port::host_checks(
        &host,
        &verbs,
        &params,
        opts.verbs.is_some(),
    ));
    for (h, p) in host.ports() {
        let rep = ports
            .iter()
            .find(|r| r.hca == h.name && r.port == p.base.port)
            .cloned();
        checks.extend(port::port_checks(
            &host,
            h,
            p,
            rep.as_ref(),
            &verbs,
            &params,
            opts.expect_gbps,
        ));
    }
    if let Some(interval) = opts.interval {
        (opts.before_wait)(interval);
        std::thread::sleep(interval);
        let again = IbHost::read(&root);
        for r in &mut ports {
            let before = host
                .ports()
                .find(|(h, p)| h.name == r.hca && p.base.port == r.port);
            let after = again
                .ports()
                .find(|(h, p)| h.name == r.hca && p.base.port == r.port);
            if let (Some((_, b)), Some((_, a))) = (before, after) {
                r.delta = Some(CounterDelta::between(&b.counters, &a.counters, interval));
            }
        }
    }
    for (h, p) in host.ports() {
        let delta = ports
            .iter()
            .find(|r| r.hca == h.name && r.port == p.base.port)
            .and_then(|r| r.delta.as_ref());
        checks.extend(counters::port_counters(h, p, delta));
    }
    if opts.interval.is_none() {
        checks.push(Check::found(
            "counters",
            "host",
            Verdict::Note,
            "counters are totals since the driver loaded (or they were reset); what grows now is unknown",
            "run with --interval 10 to read them twice and see which grow, with data rates",
        ));
    }
    let (placement, placement_checks) =
        placement::check(&host, &inventory, system.as_ref(), &verbs, &root);
    checks.extend(placement_checks);
    Ok(finish(
        cfg, opts, host, ports, verbs, placement, checks, &root,
    ))
}

#[allow(clippy::too_many_arguments)]
fn finish(
    cfg: &Config,
    opts: &Options<'_>,
    host: IbHost,
    ports: Vec<PortReport>,
    verbs: VerbsView,
    placement: Vec<Placement>,
    mut checks: Vec<Check>,
    root: &Root,
) -> Report {
    if !host.hcas.is_empty() {
        checks.extend(knobs::check(cfg, &host, opts.root));
    }
    let memlock = placement::memlock(root);
    if !host.hcas.is_empty()
        && let Some(c) = placement::memlock_check(memlock)
    {
        checks.push(c);
    }
    let mut counts = Counts::default();
    for c in &checks {
        match c.verdict {
            Verdict::Ok => counts.ok += 1,
            Verdict::Note => counts.notes += 1,
            Verdict::Warning => counts.warnings += 1,
            Verdict::Error => counts.errors += 1,
        }
    }
    let source = if root.is_host() {
        match crate::os::host::short_hostname() {
            h if h.is_empty() => "this host".to_string(),
            h => format!("this host ({h})"),
        }
    } else {
        format!("captured host {}", opts.root.display())
    };
    Report {
        source,
        host,
        ports,
        verbs,
        placement,
        memlock,
        interval_s: opts.interval.map(|d| d.as_secs_f64()),
        checks,
        counts,
    }
}

#[cfg(test)]
mod tests;
