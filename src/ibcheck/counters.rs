//! Counter checks (diagnostics.md §A.2 IB13, IB14): lifetime totals, and what grew during
//! `--interval`, with data rates.

use super::{Check, Verdict};
use crate::ib::counters::{
    CounterDelta, LINK_ERRORS_OTHER, LINK_ERRORS_SEVERE, TRANSPORT_ERRORS_OTHER,
    TRANSPORT_ERRORS_SEVERE,
};
use crate::ib::sysfs::{IbHca, IbPort};

/// Above this many lifetime PMA errors a port is failing (Meta GCM `check_ib_counters`).
pub(super) const LINK_ERROR_LIMIT: u64 = 100;

fn list<'a>(names: impl Iterator<Item = &'a &'a str>, value: impl Fn(&str) -> u64) -> Vec<String> {
    names
        .filter_map(|n| {
            let v = value(n);
            (v > 0).then(|| format!("{n} {v}"))
        })
        .collect()
}

/// The counter checks of one port.
pub(super) fn port_counters(h: &IbHca, p: &IbPort, delta: Option<&CounterDelta>) -> Vec<Check> {
    let s = format!("{}:{}", h.name, p.base.port);
    let c = &p.counters;
    let mut out = Vec::new();
    if c.counters.is_empty() && c.hw_counters.is_empty() {
        out.push(Check::found(
            "counters",
            &s,
            Verdict::Note,
            "no counters readable (counters/ and hw_counters/ absent or unreadable)",
            "",
        ));
        return out;
    }
    let total = c.link_error_total();
    let nonzero = list(LINK_ERRORS_SEVERE.iter().chain(LINK_ERRORS_OTHER), |n| {
        c.counters.get(n).copied().unwrap_or(0)
    });
    out.push(if total > LINK_ERROR_LIMIT {
        Check::found(
            "counters",
            &s,
            Verdict::Error,
            format!("{total} link errors since the counters were last cleared ({})", nonzero.join(", ")),
            "the link is bad: replace the cable or transceiver, check the switch port; clear the counters (perfquery -x -R) and watch them with --interval",
        )
    } else if total > 0 {
        Check::found(
            "counters",
            &s,
            Verdict::Warning,
            format!("link errors since the counters were last cleared: {}", nonzero.join(", ")),
            "run with --interval to see whether they still grow; if they do, replace the cable or transceiver",
        )
    } else {
        Check::ok("counters", &s, "no link errors counted")
    });
    let hw = list(TRANSPORT_ERRORS_SEVERE.iter(), |n| {
        c.hw_counters.get(n).copied().unwrap_or(0)
    });
    if !hw.is_empty() {
        out.push(Check::found(
            "transport-counters",
            &s,
            Verdict::Note,
            format!(
                "queue pairs have hit retries or errors since the driver loaded: {}",
                hw.join(", ")
            ),
            "run with --interval while jobs run; growth now points at the fabric (timeouts) or at peers that exited",
        ));
    }
    let Some(d) = delta else {
        return out;
    };
    let ev = vec![format!("over {:.1} s", d.seconds)];
    let rates = match (d.tx_gbps, d.rx_gbps) {
        (Some(t), Some(r)) => format!(" (traffic: {t:.2} Gb/s out, {r:.2} Gb/s in)"),
        _ => String::new(),
    };
    let severe = list(LINK_ERRORS_SEVERE.iter(), |n| d.of(n));
    let other = list(LINK_ERRORS_OTHER.iter(), |n| d.of(n));
    let tsevere = list(TRANSPORT_ERRORS_SEVERE.iter(), |n| d.of(n));
    let tother = list(TRANSPORT_ERRORS_OTHER.iter(), |n| d.of(n));
    if !severe.is_empty() {
        out.push(
            Check::found(
                "counters-delta",
                &s,
                Verdict::Error,
                format!("link errors grew during the check: {}{rates}", severe.join(", ")),
                "the link is failing now: replace the cable or transceiver, or move to another switch port",
            )
            .with(ev.clone()),
        );
    }
    if !tsevere.is_empty() {
        out.push(
            Check::found(
                "counters-delta",
                &s,
                Verdict::Error,
                format!("queue pairs failed during the check: {}{rates}", tsevere.join(", ")),
                "timeouts and RNR retries exhausted mean lost peers or a congested or misrouted fabric (check the GID/route, PFC/ECN on RoCE, and NCCL_IB_TIMEOUT)",
            )
            .with(ev.clone()),
        );
    }
    let quiet = severe.is_empty() && tsevere.is_empty() && other.is_empty() && tother.is_empty();
    if !other.is_empty() || !tother.is_empty() {
        let all: Vec<String> = other.into_iter().chain(tother).collect();
        out.push(
            Check::found(
                "counters-delta",
                &s,
                Verdict::Warning,
                format!("drops, retransmissions or congestion marks grew during the check: {}{rates}", all.join(", ")),
                "check the switch buffers and congestion control (PFC/ECN on RoCE, adaptive routing on IB)",
            )
            .with(ev.clone()),
        );
    }
    if quiet {
        out.push(
            Check::ok(
                "counters-delta",
                &s,
                format!("no error counter grew{rates}"),
            )
            .with(ev),
        );
    }
    out
}
