//! What a communicator takes from the model: the channels NCCL would build for ranks spread over
//! identical nodes — the search on one node, then the connection across nodes.

use serde::Serialize;

use super::connect::{Connected, TreeLinks, connect};
use super::search::{SearchParams, compute};
use super::types::{Graph, MAXCHANNELS, Pattern};
use crate::config::{Config, ConfigError};
use crate::topo::{NodeType, System};

/// The channels of a communicator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelPlan {
    /// Number of channels (after NCCL's doubling and the channel bounds).
    pub nchannels: usize,
    /// `rings[c]`: the global ring order of all ranks on channel `c`, starting at the lowest rank
    /// (the order NCCL's `Channel cc/nn :` lines show).
    pub rings: Vec<Vec<usize>>,
    /// `trees[c][r]`: rank `r`'s up and down ranks on channel `c` (double binary tree across nodes,
    /// a chain inside each node).
    pub trees: Vec<Vec<TreeLinks>>,
}

/// Knobs of channel planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlanParams {
    /// Search knobs.
    pub search: SearchParams,
    /// Lower bound on channels (`NCCL_MIN_NCHANNELS`, `NCCL_MIN_CTAS`); 0 = none.
    pub min_channels: usize,
    /// Upper bound on channels (`NCCL_MAX_NCHANNELS`, `NCCL_MAX_CTAS`); 64 = none.
    pub max_channels: usize,
}

impl Default for PlanParams {
    fn default() -> Self {
        PlanParams {
            search: SearchParams::default(),
            min_channels: 0,
            max_channels: MAXCHANNELS,
        }
    }
}

impl PlanParams {
    /// Reads `NCCL_CROSS_NIC`, `NCCL_MIN_NCHANNELS`, `NCCL_MAX_NCHANNELS`, `NCCL_MIN_CTAS` and
    /// `NCCL_MAX_CTAS` (NCCL src/graph/connect.cc `ncclMinNchannels`/`ncclMaxNchannels`, src/init.cc).
    ///
    /// Errors: [`ConfigError::BadValue`] for a value that is not an integer.
    pub fn from_config(cfg: &Config) -> Result<PlanParams, Box<ConfigError>> {
        let set = |name: &str| -> Result<Option<i64>, Box<ConfigError>> {
            let v = cfg
                .string(name)
                .map(|_| cfg.int(name).map_err(Box::new))
                .transpose()?;
            Ok(v.filter(|&v| v != -2))
        };
        let mut min = set("NCCL_MIN_NCHANNELS")?
            .unwrap_or(0)
            .clamp(0, MAXCHANNELS as i64);
        let mut max = set("NCCL_MAX_NCHANNELS")?
            .unwrap_or(MAXCHANNELS as i64)
            .clamp(1, MAXCHANNELS as i64);
        if let Some(v) = set("NCCL_MIN_CTAS")?.filter(|&v| v > 0) {
            min = min.max(v.min(MAXCHANNELS as i64));
        }
        if let Some(v) = set("NCCL_MAX_CTAS")?.filter(|&v| v > 0) {
            max = max.min(v);
        }
        let cross = cfg.int("NCCL_CROSS_NIC").map_err(Box::new)?.clamp(0, 2) as u8;
        Ok(PlanParams {
            search: SearchParams { cross_nic: cross },
            min_channels: min as usize,
            max_channels: max as usize,
        })
    }
}

/// The searched graphs and their connection across nodes.
#[derive(Debug, Clone, Serialize)]
pub struct Channels {
    /// Whether the nodes talk over the network (more than one node).
    pub inter: bool,
    /// The ring graph (NCCL graph 0).
    pub ring: Graph,
    /// The tree graph (NCCL graph 1).
    pub tree: Graph,
    /// Rings and trees across all ranks.
    pub connected: Connected,
}

impl Channels {
    /// The communicator's view: channel count, rings from the lowest rank, trees.
    pub fn plan(&self) -> ChannelPlan {
        let c = &self.connected;
        let start = c.node_ranks.iter().flatten().copied().min().unwrap_or(0);
        ChannelPlan {
            nchannels: c.nchannels,
            rings: (0..c.nchannels).map(|ch| c.ring_from(ch, start)).collect(),
            trees: c.trees.clone(),
        }
    }
}

/// Searches the ring (1..32 channels) and tree (the ring's count) graphs on `system` and
/// connects them over `ranks_by_node` (node `n` holds global ranks `ranks_by_node[n]`, local
/// index `i` being the GPU of local rank `i`; nodes identical). `None` when a node's rank count
/// differs from the system's GPU count, there are no nodes, or the ranks are not `0..nranks`
/// each once.
pub fn search_and_connect(
    system: &System,
    ranks_by_node: &[Vec<usize>],
    params: &PlanParams,
) -> Option<Channels> {
    let ngpus = system.count(NodeType::Gpu);
    if ngpus == 0 || ranks_by_node.is_empty() || ranks_by_node.iter().any(|n| n.len() != ngpus) {
        return None;
    }
    let inter = ranks_by_node.len() > 1;
    let ring = compute(
        system,
        inter,
        0,
        Pattern::Ring,
        1,
        MAXCHANNELS / 2,
        params.search,
    );
    let tree = compute(
        system,
        inter,
        1,
        Pattern::BalancedTree,
        ring.n_channels,
        ring.n_channels,
        params.search,
    );
    let cc_min = system.comp_cap().map_or(0, |c| c.0);
    let connected = connect(
        &ring,
        &tree,
        ranks_by_node,
        cc_min,
        params.min_channels,
        params.max_channels,
    )?;
    Some(Channels {
        inter,
        ring,
        tree,
        connected,
    })
}

/// The channels NCCL would build on `system` for the ranks of `ranks_by_node` (node `n` runs
/// global ranks `ranks_by_node[n]`; local index `i` is the GPU of local rank `i`, the `i`-th in
/// the system's rank order; all nodes identical to `system`): channel count and ring order after
/// NCCL's doubling, clamped to `max_channels` (1..=64) and grown to `min_channels` by copying
/// channels, as `NCCL_MAX_NCHANNELS`/`NCCL_MIN_NCHANNELS` do; trees as NCCL's double binary tree.
/// Uses NCCL's default search knobs (`NCCL_CROSS_NIC=2`). Returns `None` when the system's GPU
/// count differs from the ranks per node, or the ranks are not `0..nranks` each once.
pub fn plan_channels(
    system: &System,
    ranks_by_node: &[Vec<usize>],
    min_channels: usize,
    max_channels: usize,
) -> Option<ChannelPlan> {
    let params = PlanParams {
        search: SearchParams::default(),
        min_channels,
        max_channels,
    };
    search_and_connect(system, ranks_by_node, &params).map(|c| c.plan())
}
