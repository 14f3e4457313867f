//! `rnccl topo --format json`: the nodes with their links, the paths between GPUs and network
//! devices, what detection read, findings and notes.

use rnccl::config::Finding;
use rnccl::topo::detect::Inventory;
use rnccl::topo::diagnose::{diagnose, diagnose_host};
use rnccl::topo::system::{NodeInfo, NodeRef};
use rnccl::topo::{NodeType, System, TopoNote};
use serde::Serialize;

use crate::render::Source;

#[derive(Serialize)]
struct LinkJson {
    r#type: &'static str,
    bw: f32,
    to: String,
}

#[derive(Serialize)]
struct NodeJson<'a> {
    r#type: &'static str,
    index: usize,
    label: String,
    busid: Option<&'a str>,
    info: &'a NodeInfo,
    links: Vec<LinkJson>,
}

#[derive(Serialize)]
struct PathJson {
    from: String,
    to: String,
    r#type: &'static str,
    bw: f32,
    hops: usize,
}

#[derive(Serialize)]
struct SystemJson<'a> {
    nodes: Vec<NodeJson<'a>>,
    paths: Vec<PathJson>,
    notes: &'a [TopoNote],
}

/// The whole view.
#[derive(Serialize)]
pub struct TopoJson<'a> {
    source: &'a str,
    system: Option<SystemJson<'a>>,
    host: Option<&'a Inventory>,
    findings: Vec<Finding>,
}

fn system(sys: &System) -> SystemJson<'_> {
    let mut nodes = Vec::new();
    for ty in NodeType::ALL {
        for (i, n) in sys.nodes(ty).iter().enumerate() {
            nodes.push(NodeJson {
                r#type: ty.as_str(),
                index: i,
                label: n.label(),
                busid: n.busid.as_deref(),
                info: &n.info,
                links: n
                    .links
                    .iter()
                    .map(|l| LinkJson {
                        r#type: l.ty.as_str(),
                        bw: l.bw,
                        to: sys.node(l.rem).label(),
                    })
                    .collect(),
            });
        }
    }
    let ends: Vec<NodeRef> = [NodeType::Gpu, NodeType::Net]
        .iter()
        .flat_map(|&t| (0..sys.count(t)).map(move |i| NodeRef::new(t, i)))
        .collect();
    let mut paths = Vec::new();
    for &a in &ends {
        for &b in &ends {
            if let Some(p) = sys.path(a, b).filter(|_| a != b) {
                paths.push(PathJson {
                    from: sys.node(a).label(),
                    to: sys.node(b).label(),
                    r#type: p.ty.as_str(),
                    bw: p.bw,
                    hops: p.hops(),
                });
            }
        }
    }
    SystemJson {
        nodes,
        paths,
        notes: &sys.notes,
    }
}

/// Builds the JSON view of `src`.
pub fn json(src: &Source) -> TopoJson<'_> {
    let findings = match (&src.system, &src.inventory) {
        (Some(s), _) => diagnose(s),
        (None, Some(i)) => diagnose_host(i),
        (None, None) => Vec::new(),
    };
    TopoJson {
        source: &src.label,
        system: src.system.as_ref().map(system),
        host: src.inventory.as_ref(),
        findings,
    }
}
