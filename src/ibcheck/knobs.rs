//! The knobs that consume what `ibcheck` reads (diagnostics.md §A.2 IB20, IB26 and the knob
//! table): every setting of the registry's InfiniBand subsystem and `NCCL_NET_GDR_LEVEL`,
//! judged as `env-explain` judges it (value, conflicts, `NCCL_IB_HCA` against these
//! ports), plus what they add up to here: the ports NCCL would use, the time a lost peer goes
//! unnoticed, traffic class and service level.

use std::path::Path;

use super::{Check, Verdict};
use crate::config::{Config, Subsystem, lookup};
use crate::explain::{HostDevices, explain};
use crate::ib::gid::LinkLayer;
use crate::ib::params::{IbParams, ack_timeout, time_to_failure};
use crate::ib::sysfs::IbHost;

/// The InfiniBand subsystem's knobs (the registry's `Subsystem::Ib`), and the GPUDirect level.
fn relevant(name: &str) -> bool {
    lookup(name).is_some_and(|k| k.subsystem == Subsystem::Ib) || name == "NCCL_NET_GDR_LEVEL"
}

/// The knob checks.
pub(super) fn check(cfg: &Config, host: &IbHost, root: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let report = explain(cfg, &HostDevices::from_sysfs(root));
    let mut any = false;
    for e in report.settings.iter().filter(|e| relevant(&e.name)) {
        any = true;
        let subject = format!("{}={}", e.name, e.value);
        if e.findings.is_empty() {
            out.push(
                Check::ok("knob", &subject, "value accepted").with(e.consequences.iter().cloned()),
            );
        }
        for f in &e.findings {
            out.push(Check::from_finding("knob", &subject, f).with(e.consequences.iter().cloned()));
        }
    }
    if !any {
        out.push(Check::ok(
            "knob",
            "NCCL_IB_*",
            "no NCCL_IB_* knob is set: NCCL's defaults apply",
        ));
    }
    let Ok(params) = IbParams::from_config(cfg) else {
        return out;
    };
    if params.disable {
        out.push(Check::found(
            "knob",
            "NCCL_IB_DISABLE",
            Verdict::Warning,
            "NCCL_IB_DISABLE is set: NCCL (and rnccl) leave these adapters unused and send inter-node traffic over TCP sockets",
            "unset NCCL_IB_DISABLE unless sockets are meant",
        ));
    }
    // The ports NCCL would use when NCCL_IB_HCA is unset (env-explain judges a set filter).
    if params.hca.is_none() && !params.disable {
        let used: Vec<String> = host
            .ports()
            .filter(|(_, p)| p.base.active() && p.link_layer().is_some())
            .map(|(h, p)| format!("{}:{}", h.name, p.base.port))
            .collect();
        out.push(if used.is_empty() {
            Check::found(
                "nccl-ports",
                "NCCL_IB_HCA",
                Verdict::Error,
                "no port is ACTIVE: NCCL finds no IB device and falls back to TCP sockets",
                "bring a port up (see the port checks above)",
            )
        } else {
            Check::ok(
                "nccl-ports",
                "NCCL_IB_HCA",
                format!(
                    "unset: NCCL would use every ACTIVE port: {}",
                    used.join(", ")
                ),
            )
        });
    }
    // Time to notice a lost peer (IB26).
    let s = format!(
        "NCCL_IB_TIMEOUT={} NCCL_IB_RETRY_CNT={}",
        params.timeout, params.retry_cnt
    );
    out.push(match time_to_failure(params.timeout, params.retry_cnt) {
        None => Check::found(
            "timeout",
            &s,
            Verdict::Error,
            "the ACK timeout is infinite: a lost peer or path hangs the job instead of failing it",
            "unset NCCL_IB_TIMEOUT (default 20, about 4.3 s per attempt)",
        ),
        Some(t) if t.as_secs_f64() < 2.0 => Check::found(
            "timeout",
            &s,
            Verdict::Warning,
            format!("a silent peer fails a transfer after {:.2} s: short congestion can kill a job (completion error 12)", t.as_secs_f64()),
            "keep NCCL_IB_TIMEOUT at 18 or more (default 20)",
        ),
        Some(t) if t.as_secs_f64() > 300.0 => Check::found(
            "timeout",
            &s,
            Verdict::Warning,
            format!("a lost peer goes unnoticed for {:.0} s", t.as_secs_f64()),
            "lower NCCL_IB_TIMEOUT (default 20)",
        ),
        Some(t) => Check::ok(
            "timeout",
            &s,
            format!(
                "a lost peer is reported after about {:.1} s ({:.2} s per attempt)",
                t.as_secs_f64(),
                ack_timeout(params.timeout).map_or(0.0, |a| a.as_secs_f64())
            ),
        ),
    });
    // Traffic class and service level.
    let roce = host
        .ports()
        .any(|(_, p)| p.link_layer() == Some(LinkLayer::Ethernet));
    let ib = host
        .ports()
        .any(|(_, p)| p.link_layer() == Some(LinkLayer::InfiniBand));
    let mut qos = Vec::new();
    if roce {
        qos.push(format!(
            "RoCE traffic class {} (DSCP {}, NCCL_IB_TC)",
            params.tc,
            params.tc >> 2
        ));
    }
    if ib || roce {
        qos.push(format!("service level {} (NCCL_IB_SL)", params.sl));
    }
    out.push(Check::ok(
        "qos",
        "NCCL_IB_TC NCCL_IB_SL",
        format!(
            "{}; the lossless class is site policy: match the switches' PFC/ECN configuration",
            qos.join(", ")
        ),
    ));
    out
}
