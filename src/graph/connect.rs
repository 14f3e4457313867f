//! Connecting one node's channels into channels across nodes, as NCCL's `ncclTopoPreset` and
//! `ncclTopoPostset` do (NCCL 2.28 src/graph/connect.cc, src/init.cc; internals §3.3): every
//! node's ring piece is stitched to the next node's, trees are chained inside a node and joined
//! across nodes by the double binary tree, channels are doubled, and the `NCCL_MIN/MAX_NCHANNELS`
//! bounds applied.

use serde::Serialize;

use super::btree::dtree;
use super::comm::ChannelBounds;
use super::types::{Graph, Pattern};
use crate::conn::MAX_CHANNELS;

/// One rank's links in one channel's tree: the rank it sends up to and up to three it receives
/// from (NCCL `struct ncclTree`, `NCCL_MAX_TREE_ARITY` = 3), in NCCL's slot order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TreeLinks {
    /// Parent rank, `None` at the root.
    pub up: Option<usize>,
    /// Child ranks (at most 3).
    pub down: Vec<usize>,
}

/// One NCCL `Tree %d : up -> rank -> d0/d1/d2` line, printed by the ranks that connect their
/// node to other nodes, for channel `channel` and its copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreeEvent {
    /// The channel number printed (c or c + search channels).
    pub channel: usize,
    /// The rank printing.
    pub rank: usize,
    /// Its links in that channel at that point.
    pub links: TreeLinks,
}

/// Channels across all nodes.
#[derive(Debug, Clone, Serialize)]
pub struct Connected {
    /// Global ranks of each node, in NCCL's node order (by lowest rank).
    pub node_ranks: Vec<Vec<usize>>,
    /// Number of ranks.
    pub nranks: usize,
    /// Channels of the search graphs used (NCCL's `comm->nChannels` before doubling).
    pub search_channels: usize,
    /// Channels in use after doubling and the channel bounds.
    pub nchannels: usize,
    /// `ring_next[c][r]`: the rank after `r` on channel `c`.
    pub ring_next: Vec<Vec<usize>>,
    /// `ring_prev[c][r]`: the rank before `r` on channel `c`.
    pub ring_prev: Vec<Vec<usize>>,
    /// `trees[c][r]`: rank `r`'s tree links on channel `c`.
    pub trees: Vec<Vec<TreeLinks>>,
    /// The `Tree` lines NCCL prints while connecting trees, in print order.
    pub tree_events: Vec<TreeEvent>,
}

impl Connected {
    /// The ring of channel `c` as rank `start` walks it (NCCL `ncclBuildRings`): `start` first.
    pub fn ring_from(&self, c: usize, start: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.nranks);
        let mut r = start;
        for _ in 0..self.nranks {
            out.push(r);
            r = self.ring_next[c][r];
        }
        out
    }
}

fn set_down(t: &mut TreeLinks, rank: Option<usize>) {
    if let Some(r) = rank
        && t.down.len() < 3
    {
        t.down.push(r);
    }
}

/// Connects `ring` and `tree` (searched on one node, channels holding local ranks `0..ngpus`)
/// over the nodes `node_ranks` (`node_ranks[n][i]`: global rank of local rank `i` on node `n`;
/// renumbered in NCCL's order, by lowest rank). `cc_min`: lowest compute capability (sm 90+ with
/// several nodes and a ring above 45 GB/s doubles channels again). `min_channels`/`max_channels`:
/// `NCCL_MIN_NCHANNELS`/`NCCL_MAX_NCHANNELS` (0 and 64 mean unset).
///
/// Returns `None` unless every node has `ngpus` ranks and the ranks are exactly `0..nranks`.
pub fn connect(
    ring: &Graph,
    tree: &Graph,
    node_ranks: &[Vec<usize>],
    cc_min: u32,
    bounds: ChannelBounds,
) -> Option<Connected> {
    let mut nodes: Vec<Vec<usize>> = node_ranks.to_vec();
    nodes.sort_by_key(|v| v.iter().copied().min().unwrap_or(usize::MAX));
    let nnodes = nodes.len();
    let nranks: usize = nodes.iter().map(Vec::len).sum();
    let mut seen = vec![false; nranks];
    for &r in nodes.iter().flatten() {
        if r >= nranks || std::mem::replace(&mut seen[r], true) {
            return None;
        }
    }
    if nnodes == 0
        || nodes
            .iter()
            .any(|n| n.len() != ring.ngpus || n.len() != tree.ngpus)
    {
        return None;
    }
    let nch = ring.n_channels.min(tree.n_channels);
    let global = |n: usize, local: usize| nodes[n][local];
    let mut recv = vec![vec![0; nnodes]; nch];
    let mut send = vec![vec![0; nnodes]; nch];
    let mut prev = vec![vec![usize::MAX; nranks]; nch];
    let mut next = vec![vec![usize::MAX; nranks]; nch];
    let mut to_parent = vec![vec![0; nnodes]; nch];
    let mut to_child0 = vec![vec![0; nnodes]; nch];
    let mut to_child1 = vec![vec![0; nnodes]; nch];
    let mut trees = vec![vec![TreeLinks::default(); nranks]; 2 * nch];
    let c0 = if tree.pattern == Pattern::Tree { 0 } else { 1 };
    let c1 = if tree.pattern == Pattern::SplitTree {
        1
    } else {
        0
    };
    for n in 0..nnodes {
        for c in 0..nch {
            let r: Vec<usize> = ring.channel(c).iter().map(|&l| global(n, l)).collect();
            let t: Vec<usize> = tree.channel(c).iter().map(|&l| global(n, l)).collect();
            recv[c][n] = r[0];
            send[c][n] = r[r.len() - 1];
            for i in 0..r.len() {
                if i > 0 {
                    prev[c][r[i]] = r[i - 1];
                }
                if i + 1 < r.len() {
                    next[c][r[i]] = r[i + 1];
                }
            }
            to_parent[c][n] = t[0];
            to_child0[c][n] = t[c0.min(t.len() - 1)];
            to_child1[c][n] = t[c1.min(t.len() - 1)];
            for i in 0..t.len() {
                let links = TreeLinks {
                    up: (i > 0).then(|| t[i - 1]),
                    down: if i + 1 < t.len() {
                        vec![t[i + 1]]
                    } else {
                        Vec::new()
                    },
                };
                trees[c][t[i]] = links.clone();
                trees[c + nch][t[i]] = links;
            }
        }
    }
    if ring.cross_nic == 2 && nch.is_multiple_of(2) {
        for n in (1..nnodes).step_by(2) {
            for c in (0..nch).step_by(2) {
                recv.swap_pair(c, n);
                send.swap_pair(c, n);
                for &r in &nodes[n] {
                    prev.swap_pair(c, r);
                    next.swap_pair(c, r);
                }
            }
        }
    }
    for c in 0..nch {
        for n in 0..nnodes {
            prev[c][recv[c][n]] = send[c][(n + nnodes - 1) % nnodes];
            next[c][send[c][n]] = recv[c][(n + 1) % nnodes];
        }
    }
    let mut events = Vec::new();
    for (n, ranks) in nodes.iter().enumerate() {
        let (t0, t1) = dtree(nnodes, n);
        for &rank in ranks {
            for c in 0..nch {
                let (ttp, ttc0, ttc1) = (&to_parent[c], &to_child0[c], &to_child1[c]);
                if rank == ttp[n] {
                    let pick = |ct: u8| if ct == 0 { ttc0 } else { ttc1 };
                    if let Some(u) = t0.up {
                        trees[c][rank].up = Some(pick(t0.child_type)[u]);
                    }
                    if let Some(u) = t1.up {
                        trees[c + nch][rank].up = Some(pick(t1.child_type)[u]);
                    }
                }
                if rank == ttc0[n] {
                    set_down(&mut trees[c][rank], t0.down0.map(|d| ttp[d]));
                    set_down(&mut trees[c + nch][rank], t1.down0.map(|d| ttp[d]));
                }
                if rank == ttc1[n] {
                    set_down(&mut trees[c][rank], t0.down1.map(|d| ttp[d]));
                    set_down(&mut trees[c + nch][rank], t1.down1.map(|d| ttp[d]));
                }
                if rank == ttp[n] || rank == ttc0[n] || rank == ttc1[n] {
                    for ch in [c, c + nch] {
                        events.push(TreeEvent {
                            channel: ch,
                            rank,
                            links: trees[ch][rank].clone(),
                        });
                    }
                }
            }
        }
    }
    let mut ring_prev = prev.clone();
    ring_prev.extend(prev);
    let mut ring_next = next.clone();
    ring_next.extend(next);
    let mut nchannels = (2 * nch).min(MAX_CHANNELS);
    ring_prev.truncate(nchannels);
    ring_next.truncate(nchannels);
    trees.truncate(nchannels);
    let mut ch = Channels {
        prev: ring_prev,
        next: ring_next,
        trees,
    };
    if cc_min >= 90 && nnodes > 1 && ring.bw_intra > 45.0 && nchannels < 16 {
        nchannels = ch.grow(nchannels, 2 * nchannels);
    }
    let target = bounds.apply(nchannels);
    nchannels = nchannels.min(target);
    ch.truncate(nchannels);
    nchannels = ch.grow(nchannels, target);
    let Channels {
        prev: ring_prev,
        next: ring_next,
        trees,
    } = ch;
    Some(Connected {
        node_ranks: nodes,
        nranks,
        search_channels: nch,
        nchannels,
        ring_next,
        ring_prev,
        trees,
        tree_events: events,
    })
}

/// Per-channel ring and tree data, grown by copying channels as NCCL's `copyChannels` does.
struct Channels {
    prev: Vec<Vec<usize>>,
    next: Vec<Vec<usize>>,
    trees: Vec<Vec<TreeLinks>>,
}

impl Channels {
    fn truncate(&mut self, n: usize) {
        self.prev.truncate(n);
        self.next.truncate(n);
        self.trees.truncate(n);
    }

    /// Copies channels `c - start` to `c` for `c` in `start..end` (capped at MAX_CHANNELS);
    /// returns the new count.
    fn grow(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(MAX_CHANNELS);
        for c in start..end {
            self.prev.push(self.prev[c - start].clone());
            self.next.push(self.next[c - start].clone());
            self.trees.push(self.trees[c - start].clone());
        }
        start.max(end)
    }
}

trait SwapPair {
    fn swap_pair(&mut self, c: usize, i: usize);
}

impl SwapPair for Vec<Vec<usize>> {
    /// Swaps entry `i` of channels `c` and `c ^ 1`.
    fn swap_pair(&mut self, c: usize, i: usize) {
        let (a, b) = (self[c][i], self[c ^ 1][i]);
        self[c][i] = b;
        self[c ^ 1][i] = a;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_gpu_graph(id: u32, pattern: Pattern, nch: usize) -> Graph {
        let mut g = Graph::new(id, pattern, 1, nch, nch);
        g.n_channels = nch;
        g
    }

    #[test]
    fn four_single_gpu_nodes_make_one_ring_and_two_trees() {
        let ring = one_gpu_graph(0, Pattern::Ring, 1);
        let tree = one_gpu_graph(1, Pattern::Tree, 1);
        let nodes: Vec<Vec<usize>> = (0..4).map(|n| vec![n]).collect();
        let c = connect(&ring, &tree, &nodes, 90, ChannelBounds::default()).unwrap();
        assert_eq!(c.nchannels, 2);
        assert_eq!(c.ring_from(0, 0), vec![0, 1, 2, 3]);
        assert_eq!(c.ring_prev[1][0], 3);
        // Tree 0 is the binary tree 0 -> 2 -> (1, 3); tree 1 its mirror 3 -> 1 -> (0, 2).
        assert_eq!(
            (c.trees[0][0].up, c.trees[0][0].down.clone()),
            (None, vec![2])
        );
        assert_eq!(c.trees[0][2].down, vec![1, 3]);
        assert_eq!(
            (c.trees[1][3].up, c.trees[1][3].down.clone()),
            (None, vec![1])
        );
        assert_eq!(c.trees[1][1].down, vec![2, 0]);
    }

    #[test]
    fn nodes_are_numbered_by_lowest_rank() {
        let ring = one_gpu_graph(0, Pattern::Ring, 1);
        let tree = one_gpu_graph(1, Pattern::Tree, 1);
        let c = connect(
            &ring,
            &tree,
            &[vec![2], vec![0], vec![1]],
            80,
            ChannelBounds::default(),
        )
        .unwrap();
        assert_eq!(c.node_ranks, vec![vec![0], vec![1], vec![2]]);
        assert_eq!(c.ring_from(0, 1), vec![1, 2, 0]);
        assert!(
            connect(
                &ring,
                &tree,
                &[vec![5], vec![1]],
                80,
                ChannelBounds::default()
            )
            .is_none(),
            "ranks must be 0..n"
        );
        assert!(
            connect(
                &ring,
                &tree,
                &[vec![0], vec![0]],
                80,
                ChannelBounds::default()
            )
            .is_none(),
            "no rank twice"
        );
        assert!(
            connect(&ring, &tree, &[vec![0, 1]], 80, ChannelBounds::default()).is_none(),
            "ranks per node = GPUs"
        );
    }
}
