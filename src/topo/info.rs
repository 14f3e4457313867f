//! NCCL's INFO GRAPH description of a topology (NCCL 2.28 src/graph/topo.cc `ncclTopoPrint`,
//! src/graph/paths.cc `printNodePaths`; internals §2.8), line for line, without the
//! `host:pid:tid [dev] NCCL INFO ` prefix.

use super::kinds::{LinkType, NodeType};
use super::system::{Node, NodeInfo, NodeRef, System};

/// The lines NCCL prints for `sys` after `ncclTopoSearchInit` (`inter`: several nodes): the
/// `=== System : maxBw .. totalBw .. ===` header, the tree from each CPU, a rule, and one path
/// line per GPU and NET.
pub fn system_lines(sys: &System, inter: bool) -> Vec<String> {
    let (max_bw, total_bw) = sys.search_bw(inter);
    let mut out = vec![format!(
        "=== System : maxBw {:.1} totalBw {:.1} ===",
        f64::from(max_bw),
        f64::from(total_bw)
    )];
    for c in 0..sys.count(NodeType::Cpu) {
        print_rec(
            sys,
            NodeRef::new(NodeType::Cpu, c),
            None,
            String::new(),
            &mut out,
        );
    }
    out.push("==========================================".into());
    for ty in [NodeType::Gpu, NodeType::Net] {
        for i in 0..sys.count(ty) {
            out.push(path_line(sys, NodeRef::new(ty, i)));
        }
    }
    out
}

fn describe(n: &Node) -> String {
    match &n.info {
        NodeInfo::Gpu(g) => format!("{} ({})", n.label(), g.rank),
        NodeInfo::Cpu(c) => format!(
            "{} ({}/{}/{})",
            n.label(),
            c.arch as u32,
            c.vendor as u32,
            c.model.code()
        ),
        NodeInfo::Pci { device } => format!("{} ({:x})", n.label(), device),
        _ => n.label(),
    }
}

fn print_rec(
    sys: &System,
    node: NodeRef,
    prev: Option<NodeRef>,
    prefix: String,
    out: &mut Vec<String>,
) {
    let n = sys.node(node);
    out.push(format!("{prefix}{}", describe(n)));
    let indent = " ".repeat(prefix.len());
    for l in &n.links {
        let rem = sys.node(l.rem);
        let head = format!("{indent}+ {}[{:.1}] - ", l.ty.as_str(), f64::from(l.bw));
        if l.ty == LinkType::Loc {
            out.push(format!("{head}{}", rem.label()));
        } else if l.ty != LinkType::Pci || Some(l.rem) != prev {
            if l.ty == LinkType::Pci {
                print_rec(sys, l.rem, Some(node), head, out);
            } else if let Some(net) = rem.net() {
                out.push(format!(
                    "{head}{} ({}/{:x}/{}/{:.6})",
                    rem.label(),
                    u8::from(net.coll),
                    net.asic,
                    net.port,
                    f64::from(net.bw)
                ));
            } else {
                out.push(format!("{head}{}", rem.label()));
            }
        }
    }
}

/// NCCL's path line for one node: `LABEL :` then `LABEL (hops/bw/TYPE) ` for every computed path,
/// by destination type in NCCL's order.
pub fn path_line(sys: &System, from: NodeRef) -> String {
    let mut line = format!("{} :", sys.node(from).label());
    for ty in NodeType::ALL {
        for (i, p) in sys.node(from).paths[ty.index()].iter().enumerate() {
            let to = sys.node(NodeRef::new(ty, i));
            line.push_str(&format!(
                "{} ({}/{:.1}/{}) ",
                to.label(),
                p.hops(),
                f64::from(p.bw),
                p.ty.as_str()
            ));
        }
    }
    line
}
