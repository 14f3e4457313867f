//! A searched graph: NCCL's `ncclTopoGraph` (NCCL 2.28 src/include/graph.h; internals §3.1):
//! the pattern, channel count, per-channel bandwidths and path types, and per channel the GPU
//! order and the NETs entering and leaving the node.

use serde::Serialize;

use crate::topo::PathType;

use crate::conn::MAX_CHANNELS;

/// What a graph's channels look like (NCCL `NCCL_TOPO_PATTERN_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Pattern {
    /// Tree, NIC traffic spread: parent and child 0 on the first GPU, child 1 on the second (1).
    BalancedTree = 1,
    /// Tree, parent on the first GPU, both children on the second (2).
    SplitTree = 2,
    /// Tree, all NIC traffic on one GPU (3).
    Tree = 3,
    /// Ring (4).
    Ring = 4,
    /// NVLink SHARP (5).
    Nvls = 5,
    /// CollNet direct (6).
    CollnetDirect = 6,
}

impl Pattern {
    /// NCCL's number for the pattern.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// Whether the pattern is one of the three trees.
    pub fn is_tree(self) -> bool {
        matches!(
            self,
            Pattern::BalancedTree | Pattern::SplitTree | Pattern::Tree
        )
    }
}

/// One graph as NCCL's search leaves it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Graph {
    /// Graph id: 0 ring, 1 tree, 2 collnet chain, 3 NVLS, 4 collnet direct.
    pub id: u32,
    /// The pattern found (a tree search may settle on [`Pattern::Tree`]).
    pub pattern: Pattern,
    /// 0 same NIC in and out, 1 any NIC, 2 alternate NICs per channel pair.
    pub cross_nic: u8,
    /// Lower bound on channels the search had to reach.
    pub min_channels: usize,
    /// Upper bound on channels.
    pub max_channels: usize,
    /// Channels found.
    pub n_channels: usize,
    /// Per-channel bandwidth inside the node, GB/s.
    pub bw_intra: f32,
    /// Per-channel bandwidth to the network, GB/s.
    pub bw_inter: f32,
    /// Network latency in µs (the first NET's `latency`).
    pub latency_inter: f32,
    /// Worst path type used inside the node.
    pub type_intra: PathType,
    /// Worst path type used between GPU and NET.
    pub type_inter: PathType,
    /// Whether every channel has the same order.
    pub same_channels: bool,
    /// Total hops of all channels (tie breaker of the search).
    pub n_hops: i64,
    /// Number of GPUs (ranks per channel).
    pub ngpus: usize,
    /// Ranks per channel: `intra[c * ngpus + i]`, `MAX_CHANNELS * ngpus` long.
    pub intra: Vec<usize>,
    /// NET ids per channel: `inter[2c]` in, `inter[2c + 1]` out, `2 * MAX_CHANNELS` long.
    pub inter: Vec<u64>,
}

impl Graph {
    /// An empty graph of `ngpus` GPUs (no channels, zero bandwidth, types LOC), as NCCL's
    /// `memset` leaves it.
    pub fn new(
        id: u32,
        pattern: Pattern,
        ngpus: usize,
        min_channels: usize,
        max_channels: usize,
    ) -> Graph {
        Graph {
            id,
            pattern,
            cross_nic: 0,
            min_channels,
            max_channels,
            n_channels: 0,
            bw_intra: 0.0,
            bw_inter: 0.0,
            latency_inter: 0.0,
            type_intra: PathType::Loc,
            type_inter: PathType::Loc,
            same_channels: false,
            n_hops: 0,
            ngpus,
            intra: vec![0; MAX_CHANNELS * ngpus.max(1)],
            inter: vec![0; 2 * MAX_CHANNELS],
        }
    }

    /// The ranks of channel `c`, in order.
    pub fn channel(&self, c: usize) -> &[usize] {
        &self.intra[c * self.ngpus..(c + 1) * self.ngpus]
    }

    /// The NET ids entering and leaving the node on channel `c`.
    pub fn nets(&self, c: usize) -> (u64, u64) {
        (self.inter[2 * c], self.inter[2 * c + 1])
    }
}
