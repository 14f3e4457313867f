//! The system graph as a tree from each NUMA node: PCIe switches, GPUs with their NVLinks, NICs
//! with their network ports, and the links between CPUs.

use rnccl::topo::bw::nvlink_bw;
use rnccl::topo::system::{CpuArch, CpuModel, CpuVendor, NodeInfo, NodeRef};
use rnccl::topo::{LinkType, NodeType, System};

use crate::render::{gbs, mask_to_list};

/// The tree lines; on a multi-host (MNNVL) system each host's CPUs under a `Host N` heading.
pub fn lines(sys: &System) -> Vec<String> {
    let mut out = Vec::new();
    let mut host = None;
    for c in 0..sys.count(NodeType::Cpu) {
        let r = NodeRef::new(NodeType::Cpu, c);
        if sys.hosts.len() > 1 && host != Some(sys.host_of(r)) {
            let h = sys.host_of(r);
            host = Some(h);
            let gpus = sys
                .nodes(NodeType::Gpu)
                .iter()
                .filter(|g| g.host() == h)
                .count();
            out.push(format!(
                "Host {h} (host_hash {:#x}): {gpus} GPU(s)",
                sys.hosts[h]
            ));
        }
        out.push(label(sys, r));
        let n = sys.node(r);
        let kids: Vec<(NodeRef, String)> = n
            .links
            .iter()
            .map(|l| match l.ty {
                LinkType::Pci => (l.rem, format!("PCIe {}", gbs(l.bw))),
                other => (l.rem, format!("{} {}", other.as_str(), gbs(l.bw))),
            })
            .collect();
        let count = kids.len();
        for (i, (k, via)) in kids.into_iter().enumerate() {
            let last = i + 1 == count;
            if k.ty == NodeType::Cpu || n.links[i].ty != LinkType::Pci {
                out.push(format!(
                    "{}{} to {}",
                    if last { "└─ " } else { "├─ " },
                    via,
                    short(sys, k)
                ));
            } else {
                rec(sys, k, r, &via, "", last, &mut out);
            }
        }
    }
    out
}

fn short(sys: &System, r: NodeRef) -> String {
    let n = sys.node(r);
    match &n.info {
        NodeInfo::Gpu(g) => format!("GPU {}", g.dev),
        NodeInfo::Cpu(c) => format!("CPU NUMA {}", c.numa),
        NodeInfo::Nvs => "NVSwitch".into(),
        NodeInfo::Net(x) => format!("NET {}", x.name),
        _ => n.label(),
    }
}

fn label(sys: &System, r: NodeRef) -> String {
    let n = sys.node(r);
    match &n.info {
        NodeInfo::Cpu(c) => {
            let arch = match c.arch {
                CpuArch::X86 => "x86_64",
                CpuArch::Arm => "arm64",
                CpuArch::Power => "ppc64",
                CpuArch::Unknown => "unknown arch",
            };
            let vendor = match c.vendor {
                CpuVendor::Intel => " Intel",
                CpuVendor::Amd => " AMD",
                CpuVendor::Zhaoxin => " Zhaoxin",
                CpuVendor::Unknown => "",
            };
            let model = match c.model {
                CpuModel::IntelBdw => " (Broadwell class)",
                CpuModel::IntelSkl => " (Skylake class)",
                CpuModel::IntelSrp => " (Sapphire Rapids)",
                CpuModel::IntelErp => " (Emerald Rapids)",
                CpuModel::Yongfeng => " (Yongfeng)",
                CpuModel::Unknown => "",
            };
            let cpus = c
                .affinity
                .as_deref()
                .map_or("not given".into(), mask_to_list);
            format!("CPU NUMA {}: {arch}{vendor}{model}, CPUs {cpus}", c.numa)
        }
        NodeInfo::Gpu(g) => {
            let name = sys
                .inventory
                .as_ref()
                .and_then(|i| i.gpus.iter().find(|x| Some(&x.busid) == n.busid.as_ref()))
                .map_or(String::new(), |x| format!(" {}", x.name));
            format!(
                "GPU {} {}{name} sm {} rank {}",
                g.dev,
                n.busid.as_deref().unwrap_or("?"),
                g.sm,
                g.rank
            )
        }
        NodeInfo::Pci { device } => format!(
            "PCI switch {} ({:04x}:{:04x})",
            n.busid.as_deref().unwrap_or("?"),
            device >> 48,
            (device >> 32) & 0xffff
        ),
        NodeInfo::Nic => match &n.busid {
            Some(b) => format!("NIC {b}"),
            None => "NIC (no PCI device: attached to the CPU)".into(),
        },
        NodeInfo::Net(x) => format!(
            "NET {} {} port {}: {:.0} Gb/s ({} GB/s), GPUDirect RDMA {}",
            x.dev,
            x.name,
            x.port,
            f64::from(x.bw) * 8.0,
            gbs(x.bw),
            if x.gdr { "yes" } else { "no" }
        ),
        NodeInfo::Nvs => "NVSwitch".into(),
    }
}

fn rec(
    sys: &System,
    r: NodeRef,
    up: NodeRef,
    via: &str,
    prefix: &str,
    last: bool,
    out: &mut Vec<String>,
) {
    out.push(format!(
        "{prefix}{}{}  [{via}]",
        if last { "└─ " } else { "├─ " },
        label(sys, r)
    ));
    let next = format!("{prefix}{}", if last { "   " } else { "│  " });
    let n = sys.node(r);
    let mut items: Vec<String> = Vec::new();
    let mut down: Vec<(NodeRef, String)> = Vec::new();
    let sm = n.gpu().map_or(0, |g| g.sm);
    for l in n.links.iter().filter(|l| l.rem != up) {
        match l.ty {
            LinkType::Pci => down.push((l.rem, format!("PCIe {}", gbs(l.bw)))),
            LinkType::Net => down.push((l.rem, format!("{} GB/s", gbs(l.bw)))),
            LinkType::Nvl => {
                let links = (l.bw / nvlink_bw(sm)).round();
                let speed = sys
                    .inventory
                    .as_ref()
                    .and_then(|i| i.gpus.iter().find(|x| Some(&x.busid) == n.busid.as_ref()))
                    .and_then(|x| x.nvlink_speed_mbps)
                    .map_or(String::new(), |s| {
                        format!("; NVML: {:.3} GB/s per link", s as f64 / 1000.0)
                    });
                items.push(format!(
                    "NVLink to {}: {links} links x {} = {} GB/s{speed}",
                    short(sys, l.rem),
                    gbs(nvlink_bw(sm)),
                    gbs(l.bw)
                ));
            }
            LinkType::C2c => {
                items.push(format!("C2C to {}: {} GB/s", short(sys, l.rem), gbs(l.bw)))
            }
            LinkType::Loc => items.push(format!("P2P switch link to {}", short(sys, l.rem))),
            _ => {}
        }
    }
    let total = items.len() + down.len();
    for (i, it) in items.into_iter().enumerate() {
        out.push(format!(
            "{next}{}{it}",
            if i + 1 == total { "└─ " } else { "├─ " }
        ));
    }
    let base = total - down.len();
    for (i, (d, v)) in down.into_iter().enumerate() {
        rec(sys, d, r, &v, &next, base + i + 1 == total, out);
    }
}
