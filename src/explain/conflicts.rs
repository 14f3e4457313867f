//! Settings that cancel or contradict each other. Each rule names the NCCL code that makes one
//! knob win.

use super::Explained;
use crate::config::{Config, Finding, Status, lookup, value};

/// What NCCL effectively reads for `name` (its canonical value), or `None` when unset, unknown or
/// empty.
fn effective(cfg: &Config, name: &str) -> Option<String> {
    let raw = cfg.setting(name)?.raw.as_str();
    let spec = lookup(name)?;
    (!raw.is_empty()).then(|| value::read(spec, raw).effective)
}

fn int(cfg: &Config, name: &str) -> Option<i64> {
    effective(cfg, name)?.parse().ok()
}

fn add(items: &mut [Explained], name: &str, f: Finding) {
    if let Some(e) = items.iter_mut().find(|e| e.name == name) {
        e.findings.push(f);
    }
}

/// Adds conflict findings to the settings they make ineffective.
pub(super) fn check(cfg: &Config, items: &mut [Explained]) {
    if int(cfg, "NCCL_P2P_DISABLE") == Some(1) && cfg.setting("NCCL_P2P_LEVEL").is_some() {
        add(
            items,
            "NCCL_P2P_LEVEL",
            Finding::warning(
                "ignored: NCCL_P2P_DISABLE=1 is read first and turns P2P off (src/graph/paths.cc:ncclGetLevel)",
                "remove one of the two",
            ),
        );
    }
    for (old, new) in [
        ("NCCL_MAX_NRINGS", "NCCL_MAX_NCHANNELS"),
        ("NCCL_MIN_NRINGS", "NCCL_MIN_NCHANNELS"),
    ] {
        if cfg.setting(old).is_some() && cfg.setting(new).is_some() {
            add(
                items,
                old,
                Finding::warning(
                    format!("ignored because {new} is set"),
                    format!("remove {old}"),
                ),
            );
        }
    }
    for (min, max, how) in [
        (
            "NCCL_MIN_NCHANNELS",
            "NCCL_MAX_NCHANNELS",
            "channels are limited by the maximum",
        ),
        (
            "NCCL_MIN_CTAS",
            "NCCL_MAX_CTAS",
            "NCCL lowers the minimum to the maximum",
        ),
    ] {
        if let (Some(lo), Some(hi)) = (int(cfg, min), int(cfg, max))
            && lo > hi
            && hi > 0
        {
            add(
                items,
                min,
                Finding::warning(
                    format!("{min}={lo} is above {max}={hi}: {how}"),
                    "make the minimum at most the maximum",
                ),
            );
        }
    }
    let ib_off = if int(cfg, "NCCL_IB_DISABLE").is_some_and(|v| v != 0) {
        Some("NCCL_IB_DISABLE=1 turns the IB transport off")
    } else if effective(cfg, "NCCL_NET").is_some_and(|n| !n.eq_ignore_ascii_case("IB")) {
        Some("NCCL_NET selects a network other than IB")
    } else {
        None
    };
    if let Some(why) = ib_off {
        let names: Vec<String> = items
            .iter()
            .filter(|e| e.name.starts_with("NCCL_IB_") && e.name != "NCCL_IB_DISABLE")
            .filter(|e| {
                lookup(&e.name).is_some_and(|k| !matches!(k.status, Status::Removed { .. }))
            })
            .map(|e| e.name.clone())
            .collect();
        for n in names {
            add(items, &n, Finding::warning(format!("no effect: {why}"), ""));
        }
    }
    if cfg.setting("NCCL_IB_GID_INDEX").is_some() {
        for n in [
            "NCCL_IB_ADDR_FAMILY",
            "NCCL_IB_ADDR_RANGE",
            "NCCL_IB_ROCE_VERSION_NUM",
        ] {
            add(
                items,
                n,
                Finding::warning("ignored: NCCL_IB_GID_INDEX picks the GID explicitly", ""),
            );
        }
    }
    let level = effective(cfg, "NCCL_DEBUG");
    let below_info = matches!(level.as_deref(), None | Some("VERSION" | "WARN"));
    if below_info {
        let shown = level.as_deref().map_or("unset".to_string(), str::to_string);
        add(
            items,
            "NCCL_DEBUG_SUBSYS",
            Finding::warning(
                format!(
                    "no effect while NCCL_DEBUG is {shown}: subsystems filter INFO and TRACE messages"
                ),
                "set NCCL_DEBUG=INFO",
            ),
        );
    }
    if matches!(level.as_deref(), None | Some("VERSION")) {
        add(
            items,
            "NCCL_DEBUG_FILE",
            Finding::warning(
                "no effect while NCCL_DEBUG is unset or VERSION: nothing is logged",
                "set NCCL_DEBUG=WARN or INFO",
            ),
        );
    }
    for (rank, file) in [
        ("NCCL_TOPO_DUMP_FILE_RANK", "NCCL_TOPO_DUMP_FILE"),
        ("NCCL_GRAPH_DUMP_FILE_RANK", "NCCL_GRAPH_DUMP_FILE"),
        ("NCCL_OOB_NET_IFNAME", "NCCL_OOB_NET_ENABLE"),
        ("NCCL_COLLNET_NODE_THRESHOLD", "NCCL_COLLNET_ENABLE"),
    ] {
        let enabled = cfg
            .setting(file)
            .is_some_and(|s| !s.raw.is_empty() && s.raw != "0");
        if cfg.setting(rank).is_some() && !enabled {
            add(
                items,
                rank,
                Finding::note(format!("no effect unless {file} is set")),
            );
        }
    }
    if int(cfg, "NCCL_CHECK_POINTERS").is_some_and(|v| v != 0)
        && cfg.setting("NCCL_CHECK_MODE").is_some()
    {
        add(
            items,
            "NCCL_CHECK_POINTERS",
            Finding::note("NCCL_CHECK_MODE is also set and wins (it is read later)"),
        );
    }
    if int(cfg, "NCCL_SHM_DISABLE").is_some_and(|v| v != 0)
        && int(cfg, "NCCL_P2P_DISABLE") == Some(1)
    {
        add(
            items,
            "NCCL_SHM_DISABLE",
            Finding::note("with NCCL_P2P_DISABLE=1 too, GPUs of one node talk through the network"),
        );
    }
    if let (Some(t), Some(s)) = (
        int(cfg, "NCCL_SOCKET_NTHREADS"),
        int(cfg, "NCCL_NSOCKS_PERTHREAD"),
    ) && t > 0
        && s > 0
        && t * s > 64
    {
        add(
            items,
            "NCCL_NSOCKS_PERTHREAD",
            Finding::warning(
                format!(
                    "{t} threads × {s} sockets = {} sockets per connection; NCCL caps it at 64",
                    t * s
                ),
                "keep threads × sockets at 64 or less",
            ),
        );
    }
}
