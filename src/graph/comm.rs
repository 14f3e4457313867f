//! What a communicator takes from the model: the channels NCCL would build for ranks spread over
//! identical nodes — the search on one node, then the connection across nodes.

use serde::Serialize;

use super::connect::{Connected, TreeLinks, connect};
use super::file::GraphFile;
use super::search::{SearchParams, compute};
use super::types::{Graph, Pattern};
use crate::config::{Config, ConfigError};
use crate::conn::MAX_CHANNELS;
use crate::topo::{NodeType, System, TopoError, TopoNote};

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

/// The bounds the channel knobs put on a channel count: at most `max`, then grown to `min`
/// by copying channels (NCCL src/graph/connect.cc `ncclMinNchannels`/`ncclMaxNchannels`,
/// src/init.cc; internals §1.3, §3.3). The one clamp every channel count goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChannelBounds {
    /// Lower bound (`NCCL_MIN_NCHANNELS`, `NCCL_MIN_CTAS`); 0 = none.
    pub min: usize,
    /// Upper bound (`NCCL_MAX_NCHANNELS`, `NCCL_MAX_CTAS`), 1..=[`MAX_CHANNELS`].
    pub max: usize,
}

impl Default for ChannelBounds {
    fn default() -> Self {
        ChannelBounds {
            min: 0,
            max: MAX_CHANNELS,
        }
    }
}

impl ChannelBounds {
    /// Reads `NCCL_MIN_NCHANNELS`, `NCCL_MAX_NCHANNELS`, `NCCL_MIN_CTAS` and `NCCL_MAX_CTAS`
    /// (unset or auto: no bound).
    ///
    /// Errors: [`ConfigError::BadValue`] for a value that is not an integer in range.
    pub fn from_config(cfg: &Config) -> Result<ChannelBounds, Box<ConfigError>> {
        let set = |name: &str| -> Result<Option<i64>, Box<ConfigError>> {
            let v = cfg.int(name).map_err(Box::new)?;
            Ok((v >= 0).then_some(v))
        };
        let cap = MAX_CHANNELS as i64;
        let mut min = set("NCCL_MIN_NCHANNELS")?.unwrap_or(0).clamp(0, cap);
        let mut max = set("NCCL_MAX_NCHANNELS")?.unwrap_or(cap).clamp(1, cap);
        if let Some(v) = set("NCCL_MIN_CTAS")?.filter(|&v| v > 0) {
            min = min.max(v.min(cap));
        }
        if let Some(v) = set("NCCL_MAX_CTAS")?.filter(|&v| v > 0) {
            max = max.min(v);
        }
        Ok(ChannelBounds {
            min: min as usize,
            max: max as usize,
        })
    }

    /// `base` channels clamped to the bounds: at most `max`, then at least `min` (the minimum
    /// wins, as in NCCL), and always at least one.
    pub fn apply(&self, base: usize) -> usize {
        base.min(self.max.clamp(1, MAX_CHANNELS))
            .max(self.min.min(MAX_CHANNELS))
            .max(1)
    }
}

/// Knobs of channel planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct PlanParams {
    /// Search knobs.
    pub search: SearchParams,
    /// Channel count bounds.
    pub bounds: ChannelBounds,
}

impl PlanParams {
    /// Reads `NCCL_CROSS_NIC`, `NCCL_MNNVL_SCATTER_NETS_ENABLE`, `NCCL_MNNVL_RAIL_PER_HOST`
    /// and the channel bounds ([`ChannelBounds::from_config`]).
    ///
    /// Errors: [`ConfigError::BadValue`] for a value that is not an integer in range.
    pub fn from_config(cfg: &Config) -> Result<PlanParams, Box<ConfigError>> {
        let cross = cfg.int("NCCL_CROSS_NIC").map_err(Box::new)?.clamp(0, 2) as u8;
        Ok(PlanParams {
            search: SearchParams {
                cross_nic: cross,
                scatter_nets: cfg
                    .flag("NCCL_MNNVL_SCATTER_NETS_ENABLE")
                    .map_err(Box::new)?,
                rail_per_host: cfg.flag("NCCL_MNNVL_RAIL_PER_HOST").map_err(Box::new)?,
            },
            bounds: ChannelBounds::from_config(cfg)?,
        })
    }
}

/// The searched graphs and their connection across nodes.
#[derive(Debug, Clone, Serialize)]
pub struct Channels {
    /// Whether the nodes talk over the network (more than one node).
    pub inter: bool,
    /// The ids of the graphs read from `NCCL_GRAPH_FILE` instead of searched (0 ring, 1 tree).
    pub from_file: Vec<u32>,
    /// What reading the graph file noticed.
    pub notes: Vec<TopoNote>,
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
        ChannelPlan {
            nchannels: self.connected.nchannels,
            rings: self.rings(),
            trees: self.connected.trees.clone(),
        }
    }

    /// Every channel's global ring order, starting at the lowest rank.
    pub fn rings(&self) -> Vec<Vec<usize>> {
        let c = &self.connected;
        let start = c.node_ranks.iter().flatten().copied().min().unwrap_or(0);
        (0..c.nchannels).map(|ch| c.ring_from(ch, start)).collect()
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
    search_or_load(system, ranks_by_node, params, None)
        .ok()
        .flatten()
}

/// As [`search_and_connect`], with the graphs `graphs` (an `NCCL_GRAPH_FILE`) holds used
/// instead of searching them, as NCCL's `ncclTopoCompute` does: the ring (graph 0) and the
/// tree (graph 1) each come from the file when it has that graph with channels, else from the
/// search (the tree bounded by the ring's channel count).
///
/// Errors: [`TopoError::Xml`] naming the line when the file's graph fails NCCL's checks (see
/// [`GraphFile::graph`]).
pub fn search_or_load(
    system: &System,
    ranks_by_node: &[Vec<usize>],
    params: &PlanParams,
    graphs: Option<&GraphFile>,
) -> Result<Option<Channels>, TopoError> {
    let ngpus = system.count(NodeType::Gpu);
    if ngpus == 0 || ranks_by_node.is_empty() || ranks_by_node.iter().any(|n| n.len() != ngpus) {
        return Ok(None);
    }
    let inter = ranks_by_node.len() > 1;
    let cross = params.search.cross_nic;
    let mut from_file = Vec::new();
    let mut notes = graphs.map_or_else(Vec::new, |f| f.notes.clone());
    let mut load = |id: u32| -> Result<Option<Graph>, TopoError> {
        let Some(f) = graphs else { return Ok(None) };
        Ok(f.graph(system, id, cross, inter)?.map(|l| {
            from_file.push(id);
            notes.extend(l.notes);
            l.graph
        }))
    };
    let ring = match load(0)? {
        Some(g) => g,
        None => compute(
            system,
            inter,
            0,
            Pattern::Ring,
            1,
            MAX_CHANNELS / 2,
            params.search,
        ),
    };
    let tree = match load(1)? {
        Some(g) => g,
        None => compute(
            system,
            inter,
            1,
            Pattern::BalancedTree,
            ring.n_channels,
            ring.n_channels,
            params.search,
        ),
    };
    let cc_min = system.comp_cap().map_or(0, |c| c.0);
    let Some(connected) = connect(&ring, &tree, ranks_by_node, cc_min, params.bounds) else {
        return Ok(None);
    };
    Ok(Some(Channels {
        inter,
        from_file,
        notes,
        ring,
        tree,
        connected,
    }))
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
        bounds: ChannelBounds {
            min: min_channels,
            max: max_channels,
        },
    };
    search_and_connect(system, ranks_by_node, &params).map(|c| c.plan())
}
