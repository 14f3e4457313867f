//! The `nvidia-smi topo -m`-style matrix with NCCL's path types and bandwidths, and CPU/NUMA
//! affinity per GPU.

use rnccl::topo::system::NodeRef;
use rnccl::topo::{NodeType, System};

use crate::render::{Table, gbs, mask_to_list};

/// `GPU<dev>` / `NET<dev>`, prefixed `h<host>:` on a multi-host (MNNVL) system.
fn name(sys: &System, r: NodeRef) -> String {
    let n = sys.node(r);
    let host = if sys.hosts.len() > 1 {
        format!("h{}:", n.host())
    } else {
        String::new()
    };
    match r.ty {
        NodeType::Gpu => format!("{host}GPU{}", n.gpu().map_or(r.idx as i32, |g| g.dev)),
        _ => format!("{host}NET{}", n.net().map_or(r.idx as i64, |x| x.dev)),
    }
}

/// Matrix, legend and the NET names.
pub fn lines(sys: &System) -> Vec<String> {
    let mut ends: Vec<NodeRef> = sys
        .gpus_by_rank()
        .into_iter()
        .map(|g| NodeRef::new(NodeType::Gpu, g))
        .collect();
    ends.extend((0..sys.count(NodeType::Net)).map(|n| NodeRef::new(NodeType::Net, n)));
    let mut header: Vec<String> = vec![String::new()];
    header.extend(ends.iter().map(|&e| name(sys, e)));
    header.extend(["CPU Affinity".to_string(), "NUMA".to_string()]);
    let mut t = Table::new(header);
    for &a in &ends {
        let mut row = vec![name(sys, a)];
        for &b in &ends {
            row.push(if a == b {
                "X".into()
            } else {
                match sys.path(a, b) {
                    Some(p) => format!("{} {}", p.ty.as_str(), gbs(p.bw)),
                    None => "-".into(),
                }
            });
        }
        let cpu = (0..sys.count(NodeType::Cpu))
            .filter_map(|c| {
                sys.path(a, NodeRef::new(NodeType::Cpu, c))
                    .map(|p| (p.hops(), c))
            })
            .filter(|(h, _)| *h > 0)
            .min()
            .map(|(_, c)| &sys.nodes(NodeType::Cpu)[c]);
        let info = cpu.and_then(|c| c.cpu());
        row.push(
            info.and_then(|c| c.affinity.as_deref())
                .map_or("-".into(), mask_to_list),
        );
        row.push(info.map_or("-".into(), |c| c.numa.to_string()));
        t.row(row);
    }
    let mut out = t.lines(2);
    for n in 0..sys.count(NodeType::Net) {
        let node = &sys.nodes(NodeType::Net)[n];
        if let Some(x) = node.net() {
            out.push(format!("  NET{} = {} port {}", x.dev, x.name, x.port));
        }
    }
    out.push("  Legend: LOC same device; NVL NVLink (direct or through NVSwitch); NVB NVLink through one GPU;".into());
    out.push(
        "    C2C chip-to-chip to the CPU; PIX at most one PCIe switch; PXB several PCIe switches;"
            .into(),
    );
    out.push("    P2C GPU-C2C-CPU-PCIe-NIC; PXN NVLink to a GPU next to the NIC; PHB through the CPU's host bridge;".into());
    out.push("    SYS across CPU sockets; NET through the network. Numbers: bottleneck bandwidth in GB/s.".into());
    out
}
