//! NCCL's channel search within a node (NCCL 2.28 src/graph/search.cc `ncclTopoCompute`;
//! internals §3.2): start at the fastest per-channel speed the system can carry, search under a
//! step budget, relax the constraints one at a time (different orders per channel, a simpler
//! tree, worse path types, crossing NICs, lower speeds), double the channels of a good solution
//! (`ncclTopoDupChannels`), then try to raise the speed again.

mod rec;
mod state;

use serde::Serialize;

use crate::conn::MAX_CHANNELS;
use crate::graph::types::{Graph, Pattern};
use crate::topo::system::{CpuArch, CpuVendor};
use crate::topo::{NodeType, PathType, System};
use state::State;

/// Per-channel speeds the search tries, GB/s, fastest first (NCCL `speedArrayIntra` etc.):
/// indexed by [intra (0) / inter (1)] for sm < 90, sm 90..99, sm >= 100.
const SPEEDS_INTRA: [f32; 13] = [
    40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
];
const SPEEDS_INTER: [f32; 19] = [
    48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];
const SM90_SPEEDS_INTRA: [f32; 11] = [
    60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
];
const SM90_SPEEDS_INTER: [f32; 17] = [
    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
    0.12,
];
const SM100_SPEEDS_INTRA: [f32; 11] = [
    90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
];
const SM100_SPEEDS_INTER: [f32; 18] = [
    96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];

/// Step budgets (NCCL `NCCL_SEARCH_GLOBAL_TIMEOUT`, `NCCL_SEARCH_TIMEOUT`,
/// `NCCL_SEARCH_TIMEOUT_TREE`, `NCCL_SEARCH_TIMEOUT_SAMECHANNELS`).
const GLOBAL_TIMEOUT: i64 = 1 << 19;
const TIMEOUT: i64 = 1 << 14;
const TIMEOUT_TREE: i64 = 1 << 14;
const TIMEOUT_SAME_CHANNELS: i64 = 1 << 8;

/// Knobs of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SearchParams {
    /// `NCCL_CROSS_NIC`: 0 same NIC, 1 any NIC, 2 (default) try same, then alternate.
    pub cross_nic: u8,
    /// `NCCL_MNNVL_SCATTER_NETS_ENABLE` (default on): on multi-host systems, list the GPUs'
    /// preferred NETs GPU by GPU for each channel.
    pub scatter_nets: bool,
    /// `NCCL_MNNVL_RAIL_PER_HOST` (default off): on multi-host systems with
    /// `NCCL_CROSS_NIC=0`, a rail is the NIC's PCI id and port rather than its GUID.
    pub rail_per_host: bool,
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            cross_nic: 2,
            scatter_nets: true,
            rail_per_host: false,
        }
    }
}

fn speeds(inter: bool, cc_min: u32) -> &'static [f32] {
    match (inter, cc_min) {
        (false, 100..) => &SM100_SPEEDS_INTRA,
        (false, 90..) => &SM90_SPEEDS_INTRA,
        (false, _) => &SPEEDS_INTRA,
        (true, 100..) => &SM100_SPEEDS_INTER,
        (true, 90..) => &SM90_SPEEDS_INTER,
        (true, _) => &SPEEDS_INTER,
    }
}

/// Best and worst path type from any GPU to any node of type `ty` (NCCL
/// `ncclTopoGetGpuMinPath` / `ncclTopoGetGpuMaxPath`).
fn gpu_path_range(sys: &System, ty: NodeType) -> (PathType, PathType) {
    let (mut lo, mut hi) = (PathType::Sys, PathType::Loc);
    for (i, g) in sys.nodes(NodeType::Gpu).iter().enumerate() {
        for (j, p) in g.paths[ty.index()].iter().enumerate() {
            if ty == NodeType::Gpu && i == j {
                continue;
            }
            lo = lo.min(p.ty);
            hi = hi.max(p.ty);
        }
    }
    (lo, hi)
}

/// Whether the GPUs form exactly two NVLink islands (NCCL `ncclTopoSplitNvLink`).
fn split_nvlink(sys: &System) -> bool {
    let n = sys.count(NodeType::Gpu);
    let mut domain: Vec<usize> = (0..n).collect();
    for g in 0..n {
        let d = domain[g];
        let paths = &sys.nodes(NodeType::Gpu)[g].paths[NodeType::Gpu.index()];
        for (p, dom) in domain.iter_mut().enumerate().skip(g + 1) {
            if paths.get(p).is_some_and(|x| x.ty == PathType::Nvl) {
                *dom = d;
            }
        }
    }
    let mut count = vec![0; n];
    for d in domain {
        count[d] += 1;
    }
    count.iter().filter(|&&c| c > 1).count() == 2
}

/// NCCL `ncclTopoDupChannels`: doubles fast channels (up to `max_channels`), splitting their
/// bandwidth.
fn dup_channels(g: &mut Graph, cc_min: u32) {
    if g.n_channels == 0 || g.pattern == Pattern::Nvls || g.bw_intra < 25.0 {
        return;
    }
    if cc_min > 80 && g.bw_intra < 50.0 && g.n_channels > 4 {
        return;
    }
    let n = g.n_channels;
    let dup = (n * 2).min(g.max_channels);
    let ng = g.ngpus;
    g.intra.copy_within(0..(dup - n) * ng, n * ng);
    g.inter.copy_within(0..(dup - n) * 2, n * 2);
    let div = dup.div_ceil(n) as f32;
    g.bw_intra /= div;
    g.bw_inter /= div;
    g.n_channels = dup;
}

/// Runs NCCL's search for one graph on `sys`: `inter` when the node talks to other nodes
/// through its NETs; `pattern` ring or balanced tree; channels between `min_channels` and
/// `max_channels` (NCCL uses 1..32 for the ring, then the ring's count for the tree).
/// Deterministic; bounded by NCCL's step budgets (2^19 steps in all for the first pass).
/// When nothing fits, returns NCCL's fallback: one channel in GPU index order, 0.1 GB/s, SYS.
pub fn compute(
    sys: &System,
    inter: bool,
    id: u32,
    pattern: Pattern,
    min_channels: usize,
    max_channels: usize,
    params: SearchParams,
) -> Graph {
    let ngpus = sys.count(NodeType::Gpu);
    let mut graph = Graph::new(
        id,
        pattern,
        ngpus,
        min_channels,
        max_channels.min(MAX_CHANNELS),
    );
    if ngpus == 0 {
        return graph;
    }
    let nnets = sys.count(NodeType::Net);
    let cross_nic = if nnets > 1
        && matches!(
            pattern,
            Pattern::Ring | Pattern::BalancedTree | Pattern::SplitTree
        ) {
        params.cross_nic
    } else {
        0
    };
    graph.cross_nic = u8::from(cross_nic == 1);
    let (mut min_intra, mut max_intra) = (PathType::Loc, PathType::Sys);
    let (mut min_inter, mut max_inter) = (PathType::Pix, PathType::Sys);
    if ngpus > 1 {
        (min_intra, max_intra) = gpu_path_range(sys, NodeType::Gpu);
    }
    if inter {
        (min_inter, max_inter) = gpu_path_range(sys, NodeType::Net);
        max_intra = max_inter;
    }
    graph.type_intra = min_intra;
    graph.type_inter = min_inter;
    let try_same = pattern != Pattern::Nvls;
    graph.same_channels = try_same;
    let (arch, vendor, _) = sys.cpu_type();
    let cc_min = sys.comp_cap().map_or(0, |c| c.0);
    if ngpus == 1 && graph.pattern != Pattern::Ring {
        graph.pattern = Pattern::Tree;
    }
    if graph.pattern == Pattern::Ring
        && split_nvlink(sys)
        && graph.max_channels >= 2
        && graph.min_channels == 1
    {
        graph.min_channels = 2;
    }
    let mut st = State::new(sys, inter, params);
    let mut tmp = graph.clone();
    let speed = speeds(inter, cc_min);
    let n = speed.len();
    let (max_bw, sys_total_bw) = sys.search_bw(inter);
    let mut total_bw = sys_total_bw;
    if ngpus > 1 && graph.pattern != Pattern::Ring {
        total_bw = (f64::from(total_bw) * (ngpus as f64 / (ngpus - 1) as f64)) as f32;
    }
    let mut si = 0;
    while (speed[si] > max_bw || speed[si] * graph.min_channels as f32 > total_bw) && si < n - 1 {
        si += 1;
    }
    tmp.bw_intra = speed[si];
    tmp.bw_inter = speed[si];
    let mut global = GLOBAL_TIMEOUT;
    let mut pass = 1;
    loop {
        let mut time = if tmp.same_channels {
            TIMEOUT_SAME_CHANNELS
        } else if tmp.pattern == Pattern::Tree {
            TIMEOUT_TREE
        } else {
            TIMEOUT
        };
        tmp.n_channels = 0;
        global -= time;
        st.search_rec(&mut tmp, &mut graph, &mut time);
        let done = time == -1 || graph.n_channels as f32 * graph.bw_inter >= sys_total_bw;
        if !done && pass == 1 {
            if tmp.same_channels
                && !(arch == CpuArch::X86
                    && vendor == CpuVendor::Amd
                    && tmp.type_intra == PathType::Sys)
            {
                tmp.same_channels = false;
                continue;
            }
            tmp.same_channels = try_same;
            if time != -1 {
                global += time;
            } else {
                global = GLOBAL_TIMEOUT;
            }
            if !(global < 0 && graph.n_channels > 0) {
                if cc_min >= 90 && tmp.pattern == Pattern::BalancedTree {
                    tmp.pattern = Pattern::Tree;
                    continue;
                }
                tmp.pattern = graph.pattern;
                let max_i = if inter { tmp.type_inter } else { max_intra };
                if tmp.type_intra < max_i
                    && (graph.n_channels == 0 || tmp.type_intra < graph.type_intra)
                {
                    tmp.type_intra = tmp.type_intra.next();
                    if tmp.type_intra < PathType::Dis {
                        continue;
                    }
                }
                tmp.type_intra = min_intra;
                if inter
                    && tmp.type_inter < max_inter
                    && (graph.n_channels == 0
                        || tmp.type_inter < graph.type_inter
                        || tmp.type_inter < PathType::Pxn)
                {
                    tmp.type_inter = tmp.type_inter.next();
                    if tmp.type_inter < PathType::Dis {
                        continue;
                    }
                }
                tmp.type_inter = min_inter;
                if cross_nic == 2
                    && tmp.cross_nic == 0
                    && matches!(graph.pattern, Pattern::Ring | Pattern::BalancedTree)
                {
                    tmp.cross_nic = 2;
                    continue;
                }
                tmp.cross_nic = u8::from(cross_nic == 1);
                if si < n - 1
                    && (graph.n_channels == 0 || f64::from(speed[si + 1] / graph.bw_inter) > 0.49)
                {
                    si += 1;
                    tmp.bw_intra = speed[si];
                    tmp.bw_inter = speed[si];
                    continue;
                }
                si = 0;
                while speed[si] > max_bw && si < n - 1 {
                    si += 1;
                }
                tmp.bw_intra = speed[si];
                tmp.bw_inter = speed[si];
            }
        }
        if pass == 1 {
            time = -1;
            dup_channels(&mut graph, cc_min);
            tmp.clone_from(&graph);
            si = 0;
            while speed[si] > graph.bw_inter && si < n - 1 {
                si += 1;
            }
            tmp.bw_intra = speed[si];
            tmp.bw_inter = speed[si];
            tmp.min_channels = graph.n_channels;
            pass = 2;
        }
        if time != 0 && si > 0 {
            if graph.pattern == Pattern::Ring {
                si -= 1;
                tmp.bw_intra = speed[si];
                tmp.bw_inter = speed[si];
                continue;
            } else if tmp.bw_intra == graph.bw_intra && tmp.bw_intra < tmp.bw_inter * 2.0 {
                si -= 1;
                tmp.bw_intra = speed[si];
                continue;
            }
        }
        break;
    }
    if graph.n_channels == 0 && graph.pattern != Pattern::Nvls {
        for (i, node) in sys.nodes(NodeType::Gpu).iter().enumerate() {
            graph.intra[i] = node.gpu().map_or(i, |g| g.rank);
        }
        graph.inter[0] = 0;
        graph.inter[1] = 0;
        graph.bw_intra = 0.1;
        graph.bw_inter = 0.1;
        graph.type_intra = PathType::Sys;
        graph.type_inter = PathType::Sys;
        graph.n_channels = 1;
    }
    graph
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_tables_by_compute_capability() {
        assert_eq!(speeds(false, 90)[0], 60.0);
        assert_eq!(speeds(true, 100)[0], 96.0);
        assert_eq!(speeds(false, 80).len(), 13);
    }

    #[test]
    fn dup_doubles_fast_channels_and_halves_their_bandwidth() {
        let mut g = Graph::new(0, Pattern::Ring, 2, 1, 32);
        g.n_channels = 6;
        g.bw_intra = 60.0;
        g.bw_inter = 60.0;
        g.intra[..4].copy_from_slice(&[0, 1, 1, 0]);
        dup_channels(&mut g, 90);
        assert_eq!((g.n_channels, g.bw_intra), (12, 30.0));
        assert_eq!(g.channel(6), &[0, 1]);
        assert_eq!(g.channel(7), &[1, 0]);
        let mut slow = Graph::new(0, Pattern::Ring, 2, 1, 32);
        slow.n_channels = 8;
        slow.bw_intra = 40.0;
        dup_channels(&mut slow, 90);
        assert_eq!(
            slow.n_channels, 8,
            "sm90 keeps more than 4 channels under 50 GB/s"
        );
    }
}
