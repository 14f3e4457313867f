//! Checks of the RDMA stack and of each port: state and physical state, netdev, rate against the
//! adapter's capability and its peers, SM and LID, MTU, firmware, link layers, the GID NCCL
//! would use (diagnostics.md §A.2 IB01-IB07, IB11, IB12, IB16, IB17, IB19).

use std::collections::BTreeMap;

use super::{Check, PortReport, VerbsView, Verdict};
use crate::ib::gid::{GidTable, GidType, LinkLayer, nccl_gid_index};
use crate::ib::params::IbParams;
use crate::ib::rate::{part, pcie_gbps};
use crate::ib::sysfs::{IbHca, IbHost, IbPort};
use crate::ib::verbs::mtu_bytes;
use crate::topo::detect::Inventory;
use crate::topo::detect::pci::gts;

fn subject(h: &IbHca, p: &IbPort) -> String {
    format!("{}:{}", h.name, p.base.port)
}

/// The computed facts of every port.
pub(super) fn reports(host: &IbHost, params: &IbParams, inv: &Inventory) -> Vec<PortReport> {
    host.ports()
        .map(|(h, p)| {
            let nd = p.netdev.as_deref().and_then(|n| host.netif(n));
            let pci = h.pci_busid.as_deref().and_then(|b| inv.pci_device(b));
            let bw = |s: Option<&String>, w: Option<u32>| Some(pcie_gbps(f64::from(gts(s?)?), w?));
            PortReport {
                hca: h.name.clone(),
                port: p.base.port,
                nccl_uses: p.base.active()
                    && p.link_layer().is_some()
                    && params.selects(&h.name, p.base.port)
                    && !params.disable,
                nccl_gid_index: p.link_layer().map(|l| nccl_gid_index(l, p, &params.gid)),
                netdev_mtu: nd.and_then(|n| n.mtu),
                netdev_state: nd.and_then(|n| n.operstate.clone()),
                pcie_gbps: pci
                    .and_then(|d| bw(d.current_link_speed.as_ref(), d.current_link_width)),
                pcie_max_gbps: pci.and_then(|d| bw(d.max_link_speed.as_ref(), d.max_link_width)),
                delta: None,
            }
        })
        .collect()
}

/// Host-wide checks: the RDMA stack, firmware uniformity, link layers among NCCL's ports.
pub(super) fn host_checks(
    host: &IbHost,
    verbs: &VerbsView,
    params: &IbParams,
    live: bool,
) -> Vec<Check> {
    let mut out = Vec::new();
    let names: Vec<&str> = host.hcas.iter().map(|h| h.name.as_str()).collect();
    out.push(
        Check::ok(
            "rdma-stack",
            "host",
            format!("{} RDMA adapter(s): {}", names.len(), names.join(", ")),
        )
        .with([format!("/sys/class/infiniband: {}", names.join(" "))]),
    );
    if host.umad_abi.is_none() {
        out.push(Check::found(
            "rdma-stack",
            "host",
            Verdict::Warning,
            "no /sys/class/infiniband_mad/abi_version: the ib_umad module is not loaded, so ibstat, ibdiagnet and perftest's MAD queries do not work",
            "load ib_umad (modprobe ib_umad), or install the NIC driver's full stack (DOCA-OFED/rdma-core)",
        ));
    }
    let no_uverbs: Vec<&str> = names
        .iter()
        .filter(|n| !host.uverbs.iter().any(|u| u == *n))
        .copied()
        .collect();
    if !no_uverbs.is_empty() {
        out.push(Check::found(
            "rdma-stack",
            "host",
            Verdict::Error,
            format!(
                "no verbs device (/sys/class/infiniband_verbs/uverbs*) for {}: libibverbs cannot open {}, so NCCL cannot use {}",
                no_uverbs.join(", "),
                if no_uverbs.len() == 1 { "it" } else { "them" },
                if no_uverbs.len() == 1 { "it" } else { "them" }
            ),
            "load ib_uverbs (modprobe ib_uverbs); in a container, map /dev/infiniband and the sysfs class",
        ));
    }
    if live {
        match (&verbs.library, &verbs.unavailable) {
            (Some(lib), None) => out.push(
                Check::ok(
                    "verbs",
                    "host",
                    format!(
                        "libibverbs loaded ({lib}); it lists {} device(s)",
                        verbs.devices.len()
                    ),
                )
                .with(verbs.devices.iter().filter_map(|d| {
                    d.error.as_ref().map(|e| format!("{}: {e}", d.name))
                })),
            ),
            (_, Some(why)) => out.push(Check::found(
                "verbs",
                "host",
                Verdict::Error,
                format!("libibverbs is not usable: {why}; NCCL cannot use the adapters and falls back to TCP sockets"),
                "install rdma-core's libibverbs1 and the provider (ibverbs-providers, or DOCA-OFED), or point NCCL_IBVERBS_LIB at it",
            )),
            (None, None) => {}
        }
        if verbs.unavailable.is_none() {
            let unseen: Vec<&str> = names
                .iter()
                .filter(|n| !verbs.devices.iter().any(|d| d.name == **n))
                .copied()
                .collect();
            if !unseen.is_empty() {
                out.push(Check::found(
                    "verbs",
                    "host",
                    Verdict::Error,
                    format!(
                        "libibverbs does not list {} although sysfs shows {}: no user-space provider drives {} (or the kernel's verbs interface is missing), so NCCL cannot use {}",
                        unseen.join(", "),
                        if unseen.len() == 1 { "it" } else { "them" },
                        if unseen.len() == 1 { "it" } else { "them" },
                        if unseen.len() == 1 { "it" } else { "them" },
                    ),
                    "install the provider library (ibverbs-providers for mlx5, or DOCA-OFED) matching the kernel driver; check ibv_devices",
                ));
            }
        }
        for d in verbs.devices.iter().filter(|d| d.error.is_some()) {
            out.push(Check::found(
                "verbs",
                &d.name,
                Verdict::Error,
                format!(
                    "libibverbs cannot open or query {}: {}",
                    d.name,
                    d.error.as_deref().unwrap_or("")
                ),
                "check /dev/infiniband permissions and the driver (dmesg); NCCL skips a device it cannot open",
            ));
        }
    }
    // Firmware: one version per adapter model.
    let mut fw: BTreeMap<&str, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for h in &host.hcas {
        if let (Some(t), Some(v)) = (&h.hca_type, &h.fw_ver) {
            fw.entry(t).or_default().entry(v).or_default().push(&h.name);
        }
    }
    for (model, versions) in &fw {
        if versions.len() > 1 {
            let list: Vec<String> = versions
                .iter()
                .map(|(v, hs)| format!("{v} on {}", hs.join(", ")))
                .collect();
            out.push(Check::found(
                "firmware",
                model,
                Verdict::Warning,
                format!("{model} adapters run different firmware: {}", list.join("; ")),
                "update every adapter to the same firmware (mlxfwmanager); mixed versions behave differently under load",
            ));
        } else if let Some((v, hs)) = versions.iter().next() {
            out.push(Check::ok(
                "firmware",
                model,
                format!("firmware {v} on all {} adapter(s)", hs.len()),
            ));
        }
    }
    // Link layers among the ports NCCL would use.
    let mut layers: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (h, p) in host.ports() {
        if p.base.active()
            && params.selects(&h.name, p.base.port)
            && let Some(l) = p.link_layer()
        {
            layers.entry(l.nccl_name()).or_default().push(subject(h, p));
        }
    }
    if layers.len() > 1 {
        let list: Vec<String> = layers
            .iter()
            .map(|(l, ps)| format!("{l}: {}", ps.join(", ")))
            .collect();
        out.push(Check::found(
            "link-layer",
            "host",
            Verdict::Warning,
            format!(
                "NCCL would use InfiniBand and RoCE ports together ({}); a management or storage port is probably among them",
                list.join("; ")
            ),
            "restrict NCCL to the fabric's ports with NCCL_IB_HCA (e.g. =mlx5_0,mlx5_1)",
        ));
    }
    out
}

/// The checks of one port.
pub(super) fn port_checks(
    host: &IbHost,
    h: &IbHca,
    p: &IbPort,
    rep: Option<&PortReport>,
    verbs: &VerbsView,
    params: &IbParams,
    expect_gbps: Option<f64>,
) -> Vec<Check> {
    let s = subject(h, p);
    let mut out = vec![state(h, p, &s, params)];
    if !p.base.active() {
        return out;
    }
    if let Some(c) = netdev(p, rep, &s) {
        out.push(c);
    }
    out.extend(rate(host, h, p, &s, expect_gbps));
    if let Some(c) = sm(p, &s) {
        out.push(c);
    }
    out.extend(mtu(p, rep, verbs.port(&h.name, p.base.port), &s));
    out.extend(gid(p, rep, params, &s));
    out
}

fn state(h: &IbHca, p: &IbPort, s: &str, params: &IbParams) -> Check {
    let ev = vec![
        format!(
            "ports/{}/state = {}",
            p.base.port,
            p.base.state.as_deref().unwrap_or("?")
        ),
        format!(
            "ports/{}/phys_state = {}",
            p.base.port,
            p.phys_state.as_deref().unwrap_or("?")
        ),
    ];
    let (st, ph) = (p.state_num(), p.phys_num());
    let explicit = params.hca.is_some() && params.selects(&h.name, p.base.port);
    let c = match (st, ph) {
        (Some(4), Some(5) | None) => Check::ok("port-state", s, "ACTIVE, LinkUp"),
        (Some(4), Some(6 | 4)) => Check::found(
            "port-state",
            s,
            Verdict::Warning,
            format!(
                "ACTIVE but the physical link is in {} (retraining after errors)",
                p.phys_word()
            ),
            "watch the error counters (--interval); a link that keeps retraining needs its cable or transceiver replaced",
        ),
        (Some(2), _) => Check::found(
            "port-state",
            s,
            Verdict::Warning,
            "INIT: the physical link is up but no subnet manager has configured the port, so it carries no traffic and NCCL skips it",
            "start or fix the subnet manager (opensm, UFM) for this fabric; check sminfo",
        ),
        (Some(3), _) => Check::found(
            "port-state",
            s,
            Verdict::Warning,
            "ARMED: the subnet manager has not finished activating the port; NCCL skips it",
            "wait for the subnet manager's sweep; if it stays ARMED, check the SM logs",
        ),
        (Some(1), _) => {
            let why = match ph {
                Some(2) => {
                    "physical state Polling: no cable, or nothing answering at the other end"
                }
                Some(3) => "physical state Disabled: the port is administratively off",
                _ => "the physical link is not up",
            };
            Check::found(
                "port-state",
                s,
                if explicit {
                    Verdict::Error
                } else {
                    Verdict::Warning
                },
                format!(
                    "DOWN ({why}); NCCL skips it{}",
                    if explicit {
                        ", although NCCL_IB_HCA selects it"
                    } else {
                        ""
                    }
                ),
                "check the cable and the switch port (ibstat, mlxlink); enable the port if it was disabled",
            )
        }
        _ => Check::found(
            "port-state",
            s,
            Verdict::Warning,
            format!("unknown state {:?}", p.base.state.as_deref().unwrap_or("")),
            "read ibstat for this port",
        ),
    };
    c.with(ev)
}

fn netdev(p: &IbPort, rep: Option<&PortReport>, s: &str) -> Option<Check> {
    let nd = p.netdev.as_deref();
    let state = rep.and_then(|r| r.netdev_state.as_deref());
    match (p.link_layer(), nd, state) {
        (Some(LinkLayer::Ethernet), None, _) => Some(Check::found(
            "netdev",
            s,
            Verdict::Warning,
            "RoCE port without a network interface: no IP address, so no routable GID",
            "check the driver binding (ibdev2netdev) and configure the interface",
        )),
        (Some(l), Some(n), Some(st)) if st != "up" && st != "unknown" => Some(
            Check::found(
                "netdev",
                s,
                if l == LinkLayer::Ethernet {
                    Verdict::Error
                } else {
                    Verdict::Warning
                },
                if l == LinkLayer::Ethernet {
                    format!("its interface {n} is {st}: RoCE needs it up (its GIDs come from the interface's addresses)")
                } else {
                    format!("its IPoIB interface {n} is {st}: bootstraps or sockets over it fail")
                },
                format!("bring {n} up (ip link set {n} up) and give it an address"),
            )
            .with([format!("/sys/class/net/{n}/operstate = {st}")]),
        ),
        (_, Some(n), Some(st)) => Some(Check::ok("netdev", s, format!("interface {n} is {st}"))),
        _ => None,
    }
}

fn rate(host: &IbHost, h: &IbHca, p: &IbPort, s: &str, expect: Option<f64>) -> Vec<Check> {
    let Some(r) = &p.link_rate else {
        return vec![Check::found(
            "rate",
            s,
            Verdict::Warning,
            "no readable rate",
            "read ibstat for this port",
        )];
    };
    let ev = format!(
        "ports/{}/rate = {}",
        p.base.port,
        p.base.rate.as_deref().unwrap_or("")
    );
    let model = part(h.pci_id.0.as_deref(), h.pci_id.1.as_deref());
    // Peers: the fastest ACTIVE port of the same model and link layer on this host.
    let peer_best = host
        .ports()
        .filter(|(oh, op)| {
            oh.hca_type == h.hca_type && op.link_layer() == p.link_layer() && op.base.active()
        })
        .filter_map(|(_, op)| op.link_rate.as_ref().map(|r| r.gbps))
        .fold(0.0, f64::max);
    let mut out = Vec::new();
    let described = match (r.width, &r.speed) {
        (Some(w), Some(sp)) => format!("{} Gb/s ({w}X {sp})", r.gbps),
        _ => format!("{} Gb/s", r.gbps),
    };
    if let Some(e) = expect
        && r.gbps < e
    {
        out.push(
            Check::found(
                "rate",
                s,
                Verdict::Error,
                format!("runs at {described}, below the expected {e} Gb/s"),
                "check the cable, the transceiver and the switch port's speed setting (mlxlink -d <pci> shows the negotiation)",
            )
            .with([ev.clone()]),
        );
        return out;
    }
    let ib = p.link_layer() == Some(LinkLayer::InfiniBand);
    let below_part = model.filter(|m| ib && r.gbps < m.max_gbps);
    if let Some(m) = below_part {
        let why = match (r.width, &r.speed, m.ib_speed) {
            (Some(w), _, _) if w < m.width => {
                format!("{w} of its {} lanes are up (width degraded)", m.width)
            }
            (_, Some(sp), Some(best)) if sp != best => {
                format!("the lanes run at {sp}, not {best} (speed degraded)")
            }
            _ => "the link trained below the part's best".to_string(),
        };
        out.push(
            Check::found(
                "rate",
                s,
                Verdict::Warning,
                format!("runs at {described}, below the {}'s {} Gb/s: {why}", m.name, m.max_gbps),
                "reseat or replace the cable/transceiver, check the switch port; a cable rated for a lower speed also does this",
            )
            .with([ev]),
        );
    } else if r.gbps < peer_best {
        out.push(
            Check::found(
                "rate",
                s,
                Verdict::Warning,
                format!("runs at {described}, below the {peer_best} Gb/s of the same adapters on this host"),
                "check the cable, transceiver and switch port of this link",
            )
            .with([ev]),
        );
    } else if let Some(w) = r.width.filter(|&w| w < 4 && r.speed.is_some() && ib) {
        out.push(
            Check::found(
                "rate",
                s,
                Verdict::Warning,
                format!("runs at {described}: only {w} lane(s) are up"),
                "check the cable and the switch port; a 4X port running narrower loses bandwidth",
            )
            .with([ev]),
        );
    } else {
        out.push(
            Check::ok(
                "rate",
                s,
                match model {
                    Some(m) => format!("{described}, the {}'s best", m.name),
                    None => described,
                },
            )
            .with([ev]),
        );
    }
    out
}

fn sm(p: &IbPort, s: &str) -> Option<Check> {
    if p.link_layer() != Some(LinkLayer::InfiniBand) {
        return None;
    }
    let ev = vec![
        format!("lid = {:#x}", p.lid.unwrap_or(0)),
        format!("sm_lid = {:#x}", p.sm_lid.unwrap_or(0)),
    ];
    Some(if p.lid.unwrap_or(0) == 0 || p.sm_lid.unwrap_or(0) == 0 {
        Check::found(
            "sm",
            s,
            Verdict::Error,
            "ACTIVE InfiniBand port without a LID or subnet manager LID: no subnet manager has configured it, so peers cannot address it",
            "run a subnet manager on the fabric (opensm, UFM) and check sminfo",
        )
        .with(ev)
    } else {
        Check::ok(
            "sm",
            s,
            format!(
                "LID {:#x}, subnet manager at LID {:#x}",
                p.lid.unwrap_or(0),
                p.sm_lid.unwrap_or(0)
            ),
        )
        .with(ev)
    })
}

fn mtu(
    p: &IbPort,
    rep: Option<&PortReport>,
    verbs: Option<&crate::ib::verbs::PortAttr>,
    s: &str,
) -> Vec<Check> {
    let mut out = Vec::new();
    if p.link_layer() == Some(LinkLayer::Ethernet)
        && let Some(m) = rep.and_then(|r| r.netdev_mtu)
    {
        let nd = p.netdev.as_deref().unwrap_or("?");
        out.push(if m < 4200 {
            Check::found(
                "mtu",
                s,
                Verdict::Warning,
                format!(
                    "interface {nd} has MTU {m}, so RoCE runs with {}-byte packets (4096 needs an interface MTU of 4200 or more)",
                    if m >= 2200 { 2048 } else { 1024 }
                ),
                format!("raise the MTU of {nd} and of the switch ports to 9000 (ip link set {nd} mtu 9000)"),
            )
            .with([format!("/sys/class/net/{nd}/mtu = {m}")])
        } else {
            Check::ok("mtu", s, format!("interface {nd} MTU {m}: RoCE can use 4096-byte packets"))
        });
    }
    if let Some(v) = verbs {
        let (a, m) = (mtu_bytes(v.active_mtu), mtu_bytes(v.max_mtu));
        if a < m && a > 0 {
            out.push(Check::found(
                "mtu",
                s,
                Verdict::Warning,
                format!("active MTU {a} below the port's {m} (ibv_query_port)"),
                if p.link_layer() == Some(LinkLayer::InfiniBand) {
                    "set the partition MTU to 4K in the subnet manager (NVIDIA's NGC tuning guide)"
                } else {
                    "raise the interface and switch MTU"
                },
            ));
        } else if a > 0 {
            out.push(Check::ok(
                "mtu",
                s,
                format!("active MTU {a} (ibv_query_port)"),
            ));
        }
    }
    out
}

fn gid(p: &IbPort, rep: Option<&PortReport>, params: &IbParams, s: &str) -> Vec<Check> {
    let mut out = Vec::new();
    let Some(link) = p.link_layer() else {
        return out;
    };
    let Some(idx) = rep.and_then(|r| r.nccl_gid_index) else {
        return out;
    };
    let len = p.len();
    if link == LinkLayer::InfiniBand {
        out.push(Check::ok(
            "gid",
            s,
            if idx == 0 {
                "NCCL uses GID index 0 (LID routing within the subnet)".to_string()
            } else {
                format!("NCCL uses GID index {idx}, which carries a routable FLID")
            },
        ));
        return out;
    }
    let gid = p.gid(idx);
    let ty = p.gid_type(idx);
    let ev = vec![
        format!("gids/{idx} = {gid}"),
        format!(
            "gid_attrs/types/{idx} = {}",
            ty.map_or("(unreadable)", GidType::as_str)
        ),
    ];
    let set = params.gid.gid_index >= 0;
    if set && idx >= len {
        out.push(Check::found(
            "gid",
            s,
            Verdict::Error,
            format!("NCCL_IB_GID_INDEX={idx} is beyond the port's {len}-entry GID table"),
            "unset NCCL_IB_GID_INDEX and let NCCL choose (see the GID table with --format json)",
        ));
        return out;
    }
    let wanted = params.gid.roce_version;
    let problem = if !gid.is_configured() {
        Some("an empty entry")
    } else if gid.is_link_local() {
        Some("a link-local (fe80::) address, which does not route")
    } else if gid.family() != params.gid.family {
        Some("not of NCCL_IB_ADDR_FAMILY")
    } else if ty.map(GidType::version) != Some(wanted) {
        Some(if ty.is_none() {
            "of unknown RoCE version"
        } else if wanted == 2 {
            "RoCE v1, which does not route across IP subnets"
        } else {
            "not of NCCL_IB_ROCE_VERSION_NUM"
        })
    } else {
        None
    };
    let how = if set {
        "NCCL_IB_GID_INDEX points at"
    } else if idx == 0 {
        "NCCL's automatic choice falls back to"
    } else {
        "NCCL's automatic choice is"
    };
    out.push(match problem {
        Some(what) => Check::found(
            "gid",
            s,
            Verdict::Error,
            format!("{how} GID index {idx} ({gid}), {what}: connections fail with completion error 12 (transport retry counter exceeded) or never leave the host"),
            if set {
                "unset NCCL_IB_GID_INDEX (NCCL's documentation advises against it since 2.21), or name a RoCE v2 entry with the interface's IPv4 address"
            } else {
                "give the interface an IPv4 address so the driver adds a RoCE v2 GID for it, or set NCCL_IB_ADDR_FAMILY/NCCL_IB_ADDR_RANGE to the address NCCL should use"
            },
        )
        .with(ev),
        None => Check::ok(
            "gid",
            s,
            format!(
                "NCCL uses GID index {idx}: {}, {} ({})",
                gid.ip(),
                ty.map_or("?", GidType::as_str),
                if set { "NCCL_IB_GID_INDEX" } else { "automatic choice" }
            ),
        )
        .with(ev),
    });
    if set && problem.is_none() {
        out.push(Check::found(
            "gid",
            s,
            Verdict::Warning,
            format!("NCCL_IB_GID_INDEX={idx} is set; NCCL's documentation (2.21 and later) says to leave it unset, as indices differ between hosts and containers"),
            "unset NCCL_IB_GID_INDEX; NCCL picks the RoCE v2 IPv4 entry itself",
        ));
    }
    let untyped: Vec<String> = p
        .gids
        .iter()
        .filter(|e| e.gid_type.is_none())
        .map(|e| e.index.to_string())
        .collect();
    if !untyped.is_empty() {
        out.push(Check::found(
            "gid",
            s,
            Verdict::Warning,
            format!(
                "gid_attrs/types is unreadable for populated GID entries {}: NCCL cannot tell their RoCE version (in containers, nccl#1573) and fails to start if the file is missing",
                untyped.join(", ")
            ),
            "map the host's /sys/class/infiniband into the container, or set NCCL_IB_GID_INDEX to the RoCE v2 entry",
        ));
    }
    out
}
