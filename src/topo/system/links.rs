//! Whole-graph link passes after the XML is read (NCCL 2.28 src/graph/topo.cc): flattening of
//! Broadcom PEX switches, CPU-to-CPU links, NCCL's link order, and node removal.

use super::build::{Nodes, connect};
use super::{CpuArch, CpuModel, CpuNode, CpuVendor, NodeInfo, NodeRef};
use crate::topo::bw::{self, LOC_BW};
use crate::topo::kinds::{LinkType, NodeType};

/// Removes node `r` and every link to it, renumbering the nodes of its type after it (NCCL
/// `ncclTopoRemoveNode`). Paths must be recomputed afterwards.
fn remove_node(nodes: &mut Nodes, r: NodeRef) {
    for (t, v) in nodes.iter_mut().enumerate() {
        for (i, n) in v.iter_mut().enumerate() {
            if t == r.ty.index() && i == r.idx {
                continue;
            }
            n.links.retain(|l| l.rem != r);
            for l in &mut n.links {
                if l.rem.ty == r.ty && l.rem.idx > r.idx {
                    l.rem.idx -= 1;
                }
            }
        }
    }
    nodes[r.ty.index()].remove(r.idx);
    for v in nodes.iter_mut() {
        for n in v.iter_mut() {
            n.paths = Default::default();
        }
    }
}

/// Whether packed PCI ids belong to a Broadcom PEX Gen4 (4) or Gen5 (5) switch at `level`
/// (NCCL `getBcmGen`).
fn bcm_gen(id: u64, level: u64) -> u32 {
    if id & 0xffff_ffff_ffff_f000 == 0x1000_c010_1000_a000 {
        return 4;
    }
    if id & 0xffff_ffff_ffff_f000 == 0x1000_c030_1000_0000 | (level * 0x1000) {
        return 5;
    }
    0
}

/// Merges the second level of Broadcom PEX switches into the first, which sustains full
/// bandwidth across all ports (NCCL `ncclTopoFlattenBcmSwitches`).
pub(crate) fn flatten_bcm_switches(nodes: &mut Nodes) {
    let pci = NodeType::Pci.index();
    let mut s = 0;
    while s < nodes[pci].len() {
        let dev = match nodes[pci][s].info {
            NodeInfo::Pci { device } => device,
            _ => 0,
        };
        let gen_ = bcm_gen(dev, 0);
        if gen_ == 0 {
            s += 1;
            continue;
        }
        let sw = NodeRef::new(NodeType::Pci, s);
        let links = std::mem::take(&mut nodes[pci][s].links);
        let mut subs = Vec::new();
        let mut kept = Vec::new();
        for l in links {
            let sub = &nodes[l.rem.ty.index()][l.rem.idx];
            let is_sub = l.rem.ty == NodeType::Pci
                && matches!(sub.info, NodeInfo::Pci { device } if bcm_gen(device, 1) == gen_);
            if is_sub {
                subs.push(sub.id);
            } else {
                kept.push(l);
            }
        }
        nodes[pci][s].links = kept;
        for id in subs {
            let Some(idx) = nodes[pci].iter().position(|n| n.id == id) else {
                continue;
            };
            let sub_ref = NodeRef::new(NodeType::Pci, idx);
            let sub_links = nodes[pci][idx].links.clone();
            for l in sub_links {
                if l.rem == sw {
                    continue;
                }
                nodes[pci][s].links.push(l);
                let rem = &mut nodes[l.rem.ty.index()][l.rem.idx];
                if let Some(back) = rem.links.iter_mut().find(|b| b.rem == sub_ref) {
                    back.rem = sw;
                }
            }
            remove_node(nodes, sub_ref);
        }
        if let NodeInfo::Pci { device } = &mut nodes[pci][s].info {
            *device |= 0xffff;
        }
        s = 0;
    }
}

/// Inter-socket bandwidth from a CPU (NCCL `ncclTopoGetInterCpuBw`).
fn inter_cpu_bw(c: &CpuNode) -> f32 {
    match (c.arch, c.vendor, c.model) {
        (CpuArch::Power, ..) => bw::P9_BW,
        (CpuArch::Arm, ..) => bw::ARM_BW,
        (CpuArch::X86, CpuVendor::Intel, CpuModel::IntelErp) => bw::ERP_QPI_BW,
        (CpuArch::X86, CpuVendor::Intel, CpuModel::IntelSrp) => bw::SRP_QPI_BW,
        (CpuArch::X86, CpuVendor::Intel, CpuModel::IntelSkl) => bw::SKL_QPI_BW,
        (CpuArch::X86, CpuVendor::Intel, _) => bw::BDW_QPI_BW,
        (CpuArch::X86, CpuVendor::Amd, _) => bw::AMD_BW,
        (CpuArch::X86, CpuVendor::Zhaoxin, CpuModel::Yongfeng) => bw::YONGFENG_ZPI_BW,
        (CpuArch::X86, CpuVendor::Zhaoxin, _) => bw::ZPI_BW,
        _ => LOC_BW,
    }
}

/// Links every CPU to every other CPU of its host with the inter-socket bandwidth (NCCL
/// `ncclTopoConnectCpus`; CPUs of different hosts stay unconnected).
pub(crate) fn connect_cpus(nodes: &mut Nodes) {
    let n = nodes[NodeType::Cpu.index()].len();
    for a in 0..n {
        for b in 0..n {
            let cpus = &nodes[NodeType::Cpu.index()];
            if a == b || cpus[a].id >> 56 != cpus[b].id >> 56 {
                continue;
            }
            let bw = nodes[NodeType::Cpu.index()][a]
                .cpu()
                .map_or(LOC_BW, inter_cpu_bw);
            connect(
                nodes,
                NodeRef::new(NodeType::Cpu, a),
                NodeRef::new(NodeType::Cpu, b),
                LinkType::Sys,
                bw,
            );
        }
    }
}

/// Puts each PCI node's link to its parent last, recursively from every CPU (NCCL
/// `ncclTopoSortSystem`).
pub(crate) fn sort_links(nodes: &mut Nodes) {
    for c in 0..nodes[NodeType::Cpu.index()].len() {
        sort_rec(nodes, NodeRef::new(NodeType::Cpu, c), None);
    }
}

fn sort_rec(nodes: &mut Nodes, node: NodeRef, up: Option<NodeRef>) {
    if let Some(up) = up {
        let links = &mut nodes[node.ty.index()][node.idx].links;
        if let Some(p) = links.iter().position(|l| l.rem == up) {
            let l = links.remove(p);
            links.push(l);
        }
    }
    let down: Vec<NodeRef> = nodes[node.ty.index()][node.idx]
        .links
        .iter()
        .filter(|l| l.ty == LinkType::Pci && Some(l.rem) != up)
        .map(|l| l.rem)
        .collect();
    for d in down {
        sort_rec(nodes, d, Some(node));
    }
}
