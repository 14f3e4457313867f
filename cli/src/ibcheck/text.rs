//! The text report of `rnccl ibcheck`: ports, GIDs of RoCE ports, counters, placement, the
//! bandwidth tests, then every check with its verdict, fix and evidence.

use rnccl::ib::counters::LINK_ERRORS_SEVERE;
use rnccl::ib::gid::LinkLayer;
use rnccl::ib::mtu_bytes;
use rnccl::ibcheck::perf::PerfReport;
use rnccl::ibcheck::{Check, Report, Verdict};

use crate::render::Table;

fn dash(s: Option<String>) -> String {
    s.unwrap_or_else(|| "-".into())
}

/// The report as lines.
pub fn lines(r: &Report, perf: Option<&PerfReport>) -> Vec<String> {
    let mut out = vec![format!("rnccl ibcheck: {}", r.source)];
    out.push(match (&r.verbs.library, &r.verbs.unavailable) {
        (Some(l), None) => format!("libibverbs: {l}"),
        (_, Some(why)) => format!("libibverbs: {why}"),
        _ => "libibverbs: -".into(),
    });
    out.push(String::new());
    out.push("Ports".into());
    let mut t = Table::new([
        "port", "state", "phys", "rate", "layer", "lid/sm", "mtu", "netdev", "PCIe", "NCCL", "GID",
    ]);
    for (h, p) in r.host.ports() {
        let rep = r
            .ports
            .iter()
            .find(|x| x.hca == h.name && x.port == p.base.port);
        let layer = p.link_layer().map_or("?", LinkLayer::nccl_name);
        let lid = match p.link_layer() {
            Some(LinkLayer::InfiniBand) => {
                format!("{:#x}/{:#x}", p.lid.unwrap_or(0), p.sm_lid.unwrap_or(0))
            }
            _ => "-".into(),
        };
        let mtu = r
            .verbs
            .port(&h.name, p.base.port)
            .map(|v| mtu_bytes(v.active_mtu).to_string());
        let netdev = p.netdev.as_ref().map(|n| {
            let st = rep.and_then(|x| x.netdev_state.clone()).unwrap_or_default();
            let m = rep
                .and_then(|x| x.netdev_mtu)
                .map_or(String::new(), |m| format!(" mtu {m}"));
            format!("{n} {st}{m}")
        });
        let pcie = rep.and_then(|x| x.pcie_gbps).map(|g| {
            let max = rep
                .and_then(|x| x.pcie_max_gbps)
                .filter(|m| *m > g + 0.5)
                .map_or(String::new(), |m| format!(" of {m:.0}"));
            format!("{g:.0}{max} Gb/s")
        });
        t.row([
            format!("{}:{}", h.name, p.base.port),
            p.base.state_word().to_string(),
            p.phys_word().to_string(),
            dash(p.base.rate.clone()),
            layer.to_string(),
            lid,
            dash(mtu),
            dash(netdev),
            dash(pcie),
            if rep.is_some_and(|x| x.nccl_uses) {
                "yes"
            } else {
                "no"
            }
            .to_string(),
            dash(rep.and_then(|x| x.nccl_gid_index).map(|i| i.to_string())),
        ]);
    }
    out.extend(t.lines(2));
    let roce: Vec<_> = r
        .host
        .ports()
        .filter(|(_, p)| p.link_layer() == Some(LinkLayer::Ethernet))
        .collect();
    if !roce.is_empty() {
        out.push(String::new());
        out.push("GID tables of RoCE ports (* = the index NCCL uses)".into());
        let mut t = Table::new(["port", "index", "gid", "address", "type", "netdev"]);
        for (h, p) in roce {
            let pick = r
                .ports
                .iter()
                .find(|x| x.hca == h.name && x.port == p.base.port)
                .and_then(|x| x.nccl_gid_index);
            for g in &p.gids {
                t.row([
                    format!("{}:{}", h.name, p.base.port),
                    format!(
                        "{}{}",
                        g.index,
                        if pick == Some(g.index) { "*" } else { "" }
                    ),
                    g.gid.to_string(),
                    g.gid.ip().to_string(),
                    g.gid_type
                        .map_or("(unreadable)", |t| t.as_str())
                        .to_string(),
                    dash(g.ndev.clone()),
                ]);
            }
        }
        out.extend(t.lines(2));
    }
    out.push(String::new());
    out.push(match r.interval_s {
        Some(s) => format!("Counters: totals, and growth over {s:.1} s"),
        None => "Counters: totals".into(),
    });
    let mut t = Table::new([
        "port",
        "link errors",
        "symbol/recovery/downed",
        "transport errors",
        "tx Gb/s",
        "rx Gb/s",
    ]);
    for (h, p) in r.host.ports() {
        let c = &p.counters;
        let rep = r
            .ports
            .iter()
            .find(|x| x.hca == h.name && x.port == p.base.port);
        let d = rep.and_then(|x| x.delta.as_ref());
        let with_delta = |name: &str| {
            let v = c.get(name).unwrap_or(0);
            match d.map(|d| d.of(name)) {
                Some(g) if g > 0 => format!("{} (+{g})", v + g),
                _ => v.to_string(),
            }
        };
        let transport: u64 = [
            "local_ack_timeout_err",
            "rnr_nak_retry_err",
            "req_cqe_error",
            "resp_cqe_error",
        ]
        .iter()
        .filter_map(|n| c.hw_counters.get(*n))
        .sum();
        t.row([
            format!("{}:{}", h.name, p.base.port),
            c.link_error_total().to_string(),
            LINK_ERRORS_SEVERE[..3]
                .iter()
                .map(|n| with_delta(n))
                .collect::<Vec<_>>()
                .join("/"),
            transport.to_string(),
            dash(d.and_then(|d| d.tx_gbps).map(|g| format!("{g:.2}"))),
            dash(d.and_then(|d| d.rx_gbps).map(|g| format!("{g:.2}"))),
        ]);
    }
    out.extend(t.lines(2));
    if !r.placement.is_empty() {
        out.push(String::new());
        out.push("Placement: each GPU and the network device NCCL pairs it with".into());
        let mut t = Table::new(["gpu", "net", "path", "GPUDirect", "NUMA gpu/nic"]);
        for p in &r.placement {
            t.row([
                p.gpu.clone(),
                p.net.clone(),
                p.path.clone(),
                if p.gdr { "yes" } else { "no" }.to_string(),
                format!(
                    "{}/{}",
                    p.numa.0.map_or("?".into(), |n| n.to_string()),
                    p.numa.1.map_or("?".into(), |n| n.to_string())
                ),
            ]);
        }
        out.extend(t.lines(2));
    }
    let mut checks: Vec<&Check> = r.checks.iter().collect();
    if let Some(p) = perf {
        out.push(String::new());
        out.push(
            "RDMA write tests (ib_write_bw / ib_write_lat method; latency is half the round trip)"
                .into(),
        );
        let mut t = Table::new([
            "from",
            "to",
            "bytes",
            "iters",
            "Gb/s",
            "MiB/s",
            "link Gb/s",
            "lat min/median/p99 us",
        ]);
        for x in &p.results {
            t.row([
                x.from.clone(),
                x.to.clone(),
                x.size.to_string(),
                x.iters.to_string(),
                format!("{:.2}", x.bw_gbps),
                format!("{:.0}", x.bw_mibs),
                dash(x.link_gbps.map(|g| g.to_string())),
                format!(
                    "{:.2}/{:.2}/{:.2}",
                    x.latency.min, x.latency.median, x.latency.p99
                ),
            ]);
        }
        out.extend(t.lines(2));
        checks.extend(p.results.iter().map(|x| &x.check));
        checks.extend(p.failures.iter());
    }
    out.push(String::new());
    out.push("Checks".into());
    for c in &checks {
        out.push(format!(
            "  {:<7} [{}] {}: {}",
            c.verdict.word(),
            c.id,
            c.subject,
            c.message
        ));
        if c.verdict > Verdict::Ok {
            if !c.hint.is_empty() {
                out.push(format!("          -> {}", c.hint));
            }
            for e in &c.evidence {
                out.push(format!("          evidence: {e}"));
            }
        }
    }
    let count = |v: Verdict| checks.iter().filter(|c| c.verdict == v).count();
    out.push(String::new());
    out.push(format!(
        "Summary: {} ok, {} notes, {} warnings, {} errors",
        count(Verdict::Ok),
        count(Verdict::Note),
        count(Verdict::Warning),
        count(Verdict::Error)
    ));
    out
}
