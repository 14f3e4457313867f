//! Known topology traps, found in the model and in what detection read (internals §2.6,
//! ecosystem §2): PCIe links trained below their capability, ACS redirecting peer-to-peer
//! traffic on bridges between GPUs or between a GPU and a NIC (NVIDIA/nccl#2079), GPUs and their
//! NICs on different NUMA nodes, virtual machines whose PCI tree hides the switches
//! (NVIDIA/nccl#1464, #1843), and GPU pairs NCCL will not connect with P2P or GPUDirect RDMA.

use super::detect::Inventory;
use super::detect::pci::{PciDevice, gts};
use super::kinds::{NodeType, PathType};
use super::system::{NodeInfo, NodeRef, System};
use crate::config::{Finding, Severity};

/// Every finding for `sys` (and its inventory, when it came from this host), warnings first;
/// each carries a stable code (`pcie-link`, `acs`, `numa`, `numa-unknown`, `vm-flat-pci`,
/// `no-p2p`, `no-gdr`).
pub fn diagnose(sys: &System) -> Vec<Finding> {
    let mut out = sys
        .inventory
        .as_ref()
        .map(diagnose_host)
        .unwrap_or_default();
    numa(sys, &mut out);
    unknown_numa(sys, &mut out);
    flat_pci(sys, &mut out);
    p2p_and_gdr(sys, &mut out);
    out.sort_by_key(|f| std::cmp::Reverse(f.severity));
    out
}

/// The findings that need only what detection read (PCIe links, ACS), for hosts without a GPU.
pub fn diagnose_host(inv: &Inventory) -> Vec<Finding> {
    let mut out = Vec::new();
    pcie_links(inv, &mut out);
    acs(inv, &mut out);
    out.sort_by_key(|f| std::cmp::Reverse(f.severity));
    out
}

fn kind(d: &PciDevice) -> &'static str {
    match d.class.as_deref().unwrap_or("") {
        c if c.starts_with("0x03") => "GPU",
        c if c.starts_with("0x02") => "NIC",
        c if c.starts_with("0x0604") => "bridge",
        _ => "device",
    }
}

fn pcie_links(inv: &Inventory, out: &mut Vec<Finding>) {
    for d in &inv.pci {
        out.extend(pcie_link(d));
    }
}

/// The findings about one PCI function's link (code `pcie-link`): trained narrower than its
/// maximum width (warning), or slower than its maximum speed (a warning for NICs and bridges, a
/// note for GPUs, which slow their links when idle). Devices other than GPUs, NICs and bridges
/// get none.
pub fn pcie_link(d: &PciDevice) -> Vec<Finding> {
    let mut out = Vec::new();
    let k = kind(d);
    if k == "device" {
        return out;
    }
    let (Some(max_w), Some(cur_w)) = (d.max_link_width, d.current_link_width) else {
        return out;
    };
    let max_s = d.max_link_speed.as_deref().and_then(gts);
    let cur_s = d.current_link_speed.as_deref().and_then(gts);
    if cur_w > 0 && cur_w < max_w {
        out.push(
            Finding::new(
                Severity::Warning,
                format!("{k} {} runs its PCIe link at x{cur_w}, below its x{max_w}", d.busid),
                "reseat the card or check the slot and riser wiring; the missing lanes cap bandwidth",
            )
            .with_code("pcie-link")
            .about([d.busid.clone()]),
        );
    }
    if let (Some(m), Some(c)) = (max_s, cur_s)
        && c > 0.0
        && c < m
    {
        let (severity, advice) = if k == "GPU" {
            (
                Severity::Note,
                "GPUs lower the link speed when idle; check again under load (nvidia-smi -q -d PCI)",
            )
        } else {
            (
                Severity::Warning,
                "check BIOS PCIe generation settings and the slot; a slow link caps bandwidth",
            )
        };
        out.push(
            Finding::new(
                severity,
                format!(
                    "{k} {} runs its PCIe link at {} GT/s, below its {} GT/s",
                    d.busid, c, m
                ),
                advice,
            )
            .with_code("pcie-link")
            .about([d.busid.clone()]),
        );
    }
    out
}

fn chain<'a>(inv: &'a Inventory, busid: &str) -> Vec<&'a PciDevice> {
    let mut v = Vec::new();
    let mut cur = inv.pci_device(busid);
    while let Some(d) = cur {
        v.push(d);
        cur = d.parent.as_deref().and_then(|p| inv.pci_device(p));
    }
    v
}

fn acs(inv: &Inventory, out: &mut Vec<Finding>) {
    let ends: Vec<(&str, String)> = inv
        .pci
        .iter()
        .filter(|d| matches!(kind(d), "GPU" | "NIC"))
        .map(|d| (kind(d), d.busid.clone()))
        .collect();
    let mut seen: Vec<String> = Vec::new();
    for (i, (ka, a)) in ends.iter().enumerate() {
        for (kb, b) in &ends[i + 1..] {
            if *ka == "NIC" && *kb == "NIC" {
                continue;
            }
            let (ca, cb) = (chain(inv, a), chain(inv, b));
            let common = ca
                .iter()
                .position(|x| cb.iter().any(|y| y.busid == x.busid));
            let below_a = &ca[..common.unwrap_or(ca.len())];
            let below_b = &cb[..cb
                .iter()
                .position(|y| ca.iter().any(|x| x.busid == y.busid))
                .unwrap_or(cb.len())];
            for br in below_a
                .iter()
                .chain(below_b)
                .filter(|d| d.is_bridge() && d.acs_redirects())
            {
                if seen.contains(&br.busid) {
                    continue;
                }
                seen.push(br.busid.clone());
                out.push(Finding::new(
                    Severity::Warning,
                    format!(
                        "ACS is enabled on bridge {} (ACSCtl {:#06x}) between {ka} {a} and {kb} {b}: peer-to-peer traffic is redirected to the root complex",
                        br.busid,
                        br.acs_ctl.unwrap_or(0)
                    ),
                    format!(
                        "disable ACS on bare metal (BIOS, or `setpci -s {} ECAP_ACS+6.w=0000`); NCCL can hang or run slowly otherwise (NVIDIA/nccl#2079)",
                        br.busid
                    ),
                )
                .with_code("acs")
                .about([br.busid.clone(), a.clone(), b.clone()]));
            }
        }
    }
}

/// The NUMA id of the CPU closest to node `r` (fewest hops).
fn numa_of(sys: &System, r: NodeRef) -> Option<i64> {
    let mut best: Option<(usize, i64)> = None;
    for c in 0..sys.count(NodeType::Cpu) {
        let p = sys.path(r, NodeRef::new(NodeType::Cpu, c))?;
        let numa = sys.nodes(NodeType::Cpu)[c].cpu()?.numa;
        if p.hops() > 0 && best.is_none_or(|(h, _)| p.hops() < h) {
            best = Some((p.hops(), numa));
        }
    }
    best.map(|(_, n)| n)
}

fn gpu_name(sys: &System, g: usize) -> String {
    let n = &sys.nodes(NodeType::Gpu)[g];
    format!(
        "GPU{} ({})",
        n.gpu().map_or(g as i32, |x| x.dev),
        n.busid.as_deref().unwrap_or("?")
    )
}

fn net_name(sys: &System, n: usize) -> String {
    sys.nodes(NodeType::Net)[n]
        .net()
        .map_or_else(|| format!("NET{n}"), |x| x.name.clone())
}

/// The PCI bus ids of GPU `g` and of the adapter (NIC node) of network device `n`.
pub fn pair_busids(sys: &System, g: usize, n: usize) -> Vec<String> {
    let gpu = sys.nodes(NodeType::Gpu)[g].busid.clone();
    let nic = sys.nodes(NodeType::Net)[n]
        .links
        .iter()
        .find(|l| l.rem.ty == NodeType::Nic)
        .and_then(|l| sys.node(l.rem).busid.clone());
    gpu.into_iter().chain(nic).collect()
}

fn numa(sys: &System, out: &mut Vec<Finding>) {
    for g in 0..sys.count(NodeType::Gpu) {
        let Some(gn) = numa_of(sys, NodeRef::new(NodeType::Gpu, g)) else {
            continue;
        };
        let Some(n) = sys.local_net(g, 0) else {
            continue;
        };
        let Some(nn) = numa_of(sys, NodeRef::new(NodeType::Net, n)) else {
            continue;
        };
        if gn != nn && gn >= 0 && nn >= 0 {
            out.push(Finding::new(
                Severity::Warning,
                format!(
                    "{} is on NUMA node {gn} but its network device {} is on NUMA node {nn}: traffic crosses the inter-socket link",
                    gpu_name(sys, g),
                    net_name(sys, n)
                ),
                "pin ranks to the GPU's NUMA node and prefer NICs on the same socket (NCCL_IB_HCA), or move the NIC",
            )
            .with_code("numa")
            .about(pair_busids(sys, g, n)));
        }
    }
}

fn unknown_numa(sys: &System, out: &mut Vec<Finding>) {
    let lost: Vec<String> = (0..sys.count(NodeType::Gpu))
        .filter(|&g| numa_of(sys, NodeRef::new(NodeType::Gpu, g)) == Some(-1))
        .map(|g| gpu_name(sys, g))
        .collect();
    if !lost.is_empty() {
        out.push(Finding::new(
            Severity::Note,
            format!(
                "the platform reports no NUMA node for {} (numa_node = -1): NCCL cannot pin its threads near the GPU (\"Affinity for GPU is empty, ignoring\")",
                lost.join(", ")
            ),
            "pin each rank to the CPUs nearest its GPU yourself (numactl, taskset), or give NCCL_TOPO_FILE a <cpu numaid affinity>",
        )
        .with_code("numa-unknown"));
    }
}

fn flat_pci(sys: &System, out: &mut Vec<Finding>) {
    let gpus = sys.nodes(NodeType::Gpu);
    if gpus.len() < 2 || sys.count(NodeType::Pci) > 0 {
        return;
    }
    let on_cpu = gpus.iter().all(|g| {
        g.links
            .iter()
            .any(|l| l.ty == super::LinkType::Pci && l.rem.ty == NodeType::Cpu)
    });
    if !on_cpu {
        return;
    }
    let why = sys
        .inventory
        .as_ref()
        .and_then(|i| i.host.virtualization.clone())
        .map_or_else(String::new, |w| format!(" (virtual machine: {w})"));
    let nvswitch = sys.count(NodeType::Nvs) > 0;
    out.push(Finding::new(
        if nvswitch { Severity::Note } else { Severity::Warning },
        format!(
            "every GPU hangs directly off the root complex, with no PCIe switch{why}: a hypervisor probably hides the real tree, so NCCL sees GPU-GPU and GPU-NIC paths as PHB{}",
            if nvswitch { " (GPU-GPU traffic still uses NVLink)" } else { " and disables PCIe P2P and GPUDirect RDMA" }
        ),
        "give NCCL the host's real PCI tree with NCCL_TOPO_FILE (fake bus ids are fine; rnccl topo --format xml writes a starting point), see NVIDIA/nccl#1843",
    )
    .with_code("vm-flat-pci"));
}

fn p2p_and_gdr(sys: &System, out: &mut Vec<Finding>) {
    let ng = sys.count(NodeType::Gpu);
    for a in 0..ng {
        for b in a + 1..ng {
            let p = sys.path(
                NodeRef::new(NodeType::Gpu, a),
                NodeRef::new(NodeType::Gpu, b),
            );
            let through_cpu = p.is_some_and(|p| {
                p.links.iter().any(|l| sys.link(*l).rem.ty == NodeType::Cpu)
                    && p.ty >= PathType::Phb
            });
            if through_cpu {
                out.push(Finding::new(
                    Severity::Note,
                    format!(
                        "{} and {} are {} apart: NCCL does not use P2P between them (P2P level {}), data goes through host memory",
                        gpu_name(sys, a),
                        gpu_name(sys, b),
                        p.map_or("?", |p| p.ty.as_str()),
                        sys.params.p2p_level.map_or("PXB (default)", |l| l.as_str())
                    ),
                    "expected without NVLink across root complexes; NCCL_P2P_LEVEL=SYS forces P2P where the platform supports it",
                )
                .with_code("no-p2p"));
            }
        }
    }
    for g in 0..ng {
        for n in 0..sys.count(NodeType::Net) {
            let Some(p) = sys.path(
                NodeRef::new(NodeType::Gpu, g),
                NodeRef::new(NodeType::Net, n),
            ) else {
                continue;
            };
            let net_gdr = matches!(&sys.nodes(NodeType::Net)[n].info, NodeInfo::Net(x) if x.gdr);
            if net_gdr && !sys.gdr(g, n) && p.ty <= PathType::Phb && sys.local_net(g, 0) == Some(n)
            {
                out.push(Finding::new(
                    Severity::Note,
                    format!(
                        "{} reaches its network device {} over {}: no GPUDirect RDMA (GDR level {}), receives go through host memory",
                        gpu_name(sys, g),
                        net_name(sys, n),
                        p.ty.as_str(),
                        sys.params.net_gdr_level.map_or("PXB (default)", |l| l.as_str())
                    ),
                    "place the NIC under the GPU's PCIe switch, or raise NCCL_NET_GDR_LEVEL if the platform handles it",
                )
                .with_code("no-gdr")
                .about(pair_busids(sys, g, n)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_vm_with_nvswitch_is_a_note() {
        let sys =
            System::from_xml_str(include_str!("../../tests/fixtures/anchors/h200x2/topo.xml"))
                .unwrap();
        let f = diagnose(&sys);
        assert!(
            f.iter()
                .any(|f| f.code == "vm-flat-pci" && f.severity == Severity::Note),
            "{f:?}"
        );
        assert!(!f.iter().any(|f| f.code == "no-p2p"));
    }
}
