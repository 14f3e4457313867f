//! The recursive channel search (NCCL 2.28 src/graph/search.cc `ncclTopoSearchRec`,
//! `ncclTopoSearchRecGpu`, `ncclTopoSearchRecNet`, `ncclTopoSearchTryGpu`,
//! `ncclTopoSearchNextGpuSort`, `ncclTopoSelectNets`, `ncclTopoCompareGraphs`): depth first over
//! GPU orders, one channel after the other, each hop taking its bandwidth off the links, under a
//! step budget (`time`).

use super::state::State;
use crate::conn::MAX_CHANNELS;
use crate::graph::types::{Graph, Pattern};
use crate::topo::params::NetDevsPolicy;
use crate::topo::paths::{local_net, locals};
use crate::topo::system::NodeRef;
use crate::topo::{LinkType, NodeType, PathType};

/// How the next GPU is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Sorted by NCCL's score.
    Search,
    /// PCI (index) order.
    Pci,
    /// The order of the previous channel.
    Replay,
}

fn gpu(i: usize) -> NodeRef {
    NodeRef::new(NodeType::Gpu, i)
}

fn net(i: usize) -> NodeRef {
    NodeRef::new(NodeType::Net, i)
}

/// NCCL `ncclTopoCompareGraphs`: whether `g` beats `best`.
fn better(g: &Graph, best: &Graph) -> bool {
    if g.n_channels < g.min_channels {
        return false;
    }
    let a = g.n_channels as f32 * g.bw_intra;
    let b = best.n_channels as f32 * best.bw_intra;
    if a != b {
        return a > b;
    }
    g.pattern == best.pattern && g.cross_nic == best.cross_nic && g.n_hops < best.n_hops
}

/// (backToNet, backToFirstRank) for a pattern (NCCL `ncclTopoSearchParams`); -1 = never.
fn search_params(st: &State, pattern: Pattern) -> (i64, i64) {
    let ngpus = st.sys.count(NodeType::Gpu) as i64;
    if st.inter {
        let back = match pattern {
            Pattern::Ring => ngpus - 1,
            Pattern::SplitTree => 1,
            _ => 0,
        };
        (back, -1)
    } else {
        (
            -1,
            if pattern == Pattern::Ring {
                ngpus - 1
            } else {
                -1
            },
        )
    }
}

impl State<'_> {
    /// Searches for one more channel (NCCL `ncclTopoSearchRec`).
    pub(crate) fn search_rec(&mut self, g: &mut Graph, best: &mut Graph, time: &mut i64) {
        let (btn, btf) = search_params(self, g.pattern);
        if self.inter {
            self.rec_net(g, best, btn, btf, time);
            return;
        }
        if g.n_channels == 0 {
            self.try_gpu(g, best, 0, btn, btf, Order::Pci, time, None, 0);
        } else {
            let first = self.replay_gpu(g, -1);
            self.try_gpu(g, best, 0, btn, btf, Order::Replay, time, None, first);
        }
        if !g.same_channels || g.n_channels == 0 {
            for i in 0..self.sys.count(NodeType::Gpu) {
                self.try_gpu(g, best, 0, btn, btf, Order::Search, time, None, i);
            }
        }
    }

    /// The GPU after `step` in the previous channel (NCCL `ncclTopoReplayGetGpu`).
    fn replay_gpu(&self, g: &Graph, step: i64) -> usize {
        let ngpus = g.ngpus;
        let rank = g.intra[(g.n_channels - 1) * ngpus + (step + 1) as usize];
        self.gpu_of_rank(rank)
    }

    #[allow(clippy::too_many_arguments)]
    fn try_gpu(
        &mut self,
        g: &mut Graph,
        best: &mut Graph,
        step: usize,
        btn: i64,
        btf: i64,
        order: Order,
        time: &mut i64,
        from: Option<NodeRef>,
        to: usize,
    ) {
        let flag = 1u64 << g.n_channels;
        if self.follow_path(g, from, gpu(to), 1.0).is_some() {
            self.used[to] ^= flag;
            self.rec_gpu(g, best, Some(to), step, btn, btf, order, time);
            self.used[to] ^= flag;
            self.follow_path(g, from, gpu(to), -1.0);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rec_gpu(
        &mut self,
        g: &mut Graph,
        best: &mut Graph,
        at: Option<usize>,
        step: usize,
        btn: i64,
        btf: i64,
        order: Order,
        time: &mut i64,
    ) {
        if *time <= 0 {
            return;
        }
        *time -= 1;
        let ngpus = g.ngpus;
        if step == ngpus {
            g.n_channels += 1;
            if better(g, best) {
                best.clone_from(g);
                if g.n_channels == g.max_channels {
                    *time = -1;
                }
            }
            if g.n_channels < g.max_channels {
                self.search_rec(g, best, time);
            }
            g.n_channels -= 1;
            return;
        }
        let Some(cur) = at else { return };
        g.intra[g.n_channels * ngpus + step] = self.rank(cur);
        if step as i64 == btn {
            if !self.inter {
                return;
            }
            let start = self.net_index(g.inter[g.n_channels * 2]);
            for n in self.select_nets(g.type_inter, Some(cur)) {
                if !self.check_net(g, start, n, step) {
                    continue;
                }
                let mut next_btn = -1;
                let save = g.bw_inter;
                if g.pattern == Pattern::BalancedTree {
                    if step == 0 {
                        next_btn = 1;
                    }
                    g.bw_inter /= 2.0;
                }
                let got = self.follow_path(g, Some(gpu(cur)), net(n), 1.0);
                g.bw_inter = save;
                if got.is_some() {
                    g.inter[g.n_channels * 2 + 1] = self.sys.nodes(NodeType::Net)[n].id;
                    self.rec_gpu(g, best, Some(cur), step, next_btn, btf, order, time);
                    if g.pattern == Pattern::BalancedTree {
                        g.bw_inter /= 2.0;
                    }
                    self.follow_path(g, Some(gpu(cur)), net(n), -1.0);
                    g.bw_inter = save;
                }
            }
        } else if step + 1 < ngpus {
            let next = match order {
                Order::Pci => vec![step + 1],
                Order::Replay => vec![self.replay_gpu(g, step as i64)],
                Order::Search => {
                    let sort_net = if btn == -1 {
                        0
                    } else if btn == step as i64 + 1 {
                        1
                    } else {
                        -1
                    };
                    self.next_gpus(g, cur, sort_net)
                }
            };
            for n in next {
                self.try_gpu(g, best, step + 1, btn, btf, order, time, Some(gpu(cur)), n);
            }
        } else if step as i64 == btf {
            let first = self.gpu_of_rank(g.intra[g.n_channels * ngpus]);
            if self
                .follow_path(g, Some(gpu(cur)), gpu(first), 1.0)
                .is_some()
            {
                self.rec_gpu(g, best, Some(first), step + 1, btn, -1, order, time);
                self.follow_path(g, Some(gpu(cur)), gpu(first), -1.0);
            }
        } else {
            self.rec_gpu(g, best, Some(cur), ngpus, -1, -1, order, time);
        }
    }

    fn rec_net(&mut self, g: &mut Graph, best: &mut Graph, btn: i64, btf: i64, time: &mut i64) {
        let bw = g.bw_inter.trunc();
        let nets = self.select_nets(g.type_inter, None);
        let sys = self.sys;
        let all = sys.nodes(NodeType::Net);
        for i in 0..nets.len() {
            let n = nets[(g.n_channels + i) % nets.len()];
            let node = &all[n];
            let Some(x) = node.net() else { continue };
            if self.net_bw[n] < bw {
                continue;
            }
            if g.pattern == Pattern::Ring
                && g.cross_nic == 2
                && g.n_channels & 1 == 1
                && node.id != g.inter[(g.n_channels - 1) * 2 + 1]
            {
                continue;
            }
            g.inter[g.n_channels * 2] = node.id;
            g.latency_inter = x.latency;
            let same_port: Vec<usize> = (0..all.len())
                .filter(|&k| {
                    all[k]
                        .net()
                        .is_some_and(|y| y.asic == x.asic && y.port == x.port)
                })
                .collect();
            for &k in &same_port {
                self.net_bw[k] -= bw;
            }
            if g.n_channels > 0 && g.same_channels {
                let first = self.replay_gpu(g, -1);
                self.try_gpu(
                    g,
                    best,
                    0,
                    btn,
                    btf,
                    Order::Replay,
                    time,
                    Some(net(n)),
                    first,
                );
            } else {
                if g.n_channels == 0 && sys.count(NodeType::Nvs) == 0 {
                    let mut t = 1i64 << 10;
                    self.try_gpu(g, best, 0, btn, btf, Order::Pci, &mut t, Some(net(n)), 0);
                    if t == -1 {
                        *time = -1;
                    }
                }
                let local = x.local_gpu;
                if let Some(lg) = local {
                    self.try_gpu(g, best, 0, btn, btf, Order::Search, time, Some(net(n)), lg);
                }
                let (gpus, ty) = locals(&sys.nodes, net(n), NodeType::Gpu);
                if ty.is_none_or(|t| t == PathType::Dis) {
                    continue;
                }
                for lg in gpus {
                    if Some(lg) != local {
                        self.try_gpu(g, best, 0, btn, btf, Order::Search, time, Some(net(n)), lg);
                    }
                }
            }
            for &k in &same_port {
                self.net_bw[k] += bw;
            }
        }
    }

    /// NCCL `ncclTopoSearchCheckNet`: whether the channel may leave through NET `n` (with
    /// `NCCL_CROSS_NIC=0` only the NIC it came in by: same ASIC and port, or on another host of
    /// an MNNVL system with `NCCL_MNNVL_RAIL_PER_HOST=1`, same PCI id and port).
    fn check_net(&self, g: &Graph, start: usize, n: usize, step: usize) -> bool {
        let nets = self.sys.nodes(NodeType::Net);
        let (a, b) = (&nets[n], &nets[start]);
        if g.pattern == Pattern::Tree && a.id != b.id {
            return false;
        }
        if g.pattern == Pattern::Ring && g.cross_nic == 2 {
            if g.n_channels & 1 == 1 && a.id != g.inter[(g.n_channels - 1) * 2] {
                return false;
            }
        } else if g.cross_nic == 0 {
            let (x, y) = (a.net(), b.net());
            let rail = if self.params.rail_per_host && a.host() != b.host() {
                |v: &crate::topo::system::NetNode| (v.pci_id, v.port)
            } else {
                |v: &crate::topo::system::NetNode| (v.asic, v.port)
            };
            if x.map(rail) != y.map(rail) {
                return false;
            }
        }
        !(g.pattern == Pattern::BalancedTree && step != 0 && a.id != g.inter[g.n_channels * 2 + 1])
    }

    /// The NETs GPU `gi` uses, channel by channel, until the list wraps (NCCL
    /// `ncclTopoGetLocalNet` over channels).
    fn preferred_nets(&self, gi: usize) -> Vec<usize> {
        let nodes = &self.sys.nodes;
        let policy = self.sys.params.netdevs;
        let mut mine: Vec<usize> = Vec::new();
        for c in 0..MAX_CHANNELS {
            let Some(n) = local_net(nodes, gi, c, policy) else {
                break;
            };
            if !mine.is_empty() && n == mine[0] {
                break;
            }
            mine.push(n);
        }
        mine
    }

    /// NCCL `ncclTopoSelectNets`: the NETs to try for GPU `only` (all GPUs when `None`): first
    /// the GPUs' preferred NETs — GPU by GPU for each channel on multi-host (MNNVL) systems
    /// with `NCCL_MNNVL_SCATTER_NETS_ENABLE` (`ncclTopoPrefNetsGpuFirst`), else channel by
    /// channel for each GPU (`ncclTopoPrefNetsChannelFirst`) — then every other NET within
    /// `type_inter`, nearest path types first; with `NCCL_NETDEVS_POLICY=MAX:n` at most `n`
    /// NETs per GPU in all.
    fn select_nets(&self, type_inter: PathType, only: Option<usize>) -> Vec<usize> {
        let ngpus = self.sys.count(NodeType::Gpu);
        let gpus: Vec<usize> = (0..ngpus)
            .filter(|&i| only.is_none_or(|o| o == i))
            .collect();
        let mut out: Vec<usize> = Vec::new();
        let push = |out: &mut Vec<usize>, n: usize| {
            if !out.contains(&n) {
                out.push(n);
            }
        };
        if self.sys.hosts.len() > 1 && self.params.scatter_nets {
            let lists: Vec<Vec<usize>> = gpus.iter().map(|&g| self.preferred_nets(g)).collect();
            let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
            for c in 0..longest {
                for l in &lists {
                    if let Some(&n) = l.get(c) {
                        push(&mut out, n);
                    }
                }
            }
        } else {
            for &g in &gpus {
                for n in self.preferred_nets(g) {
                    push(&mut out, n);
                }
            }
        }
        let max = match self.sys.params.netdevs {
            NetDevsPolicy::Max(n) => n * gpus.len(),
            _ => usize::MAX,
        };
        if out.len() >= max {
            return out;
        }
        for t in PathType::ALL.into_iter().filter(|&t| t <= type_inter) {
            for &gi in &gpus {
                for n in 0..self.sys.count(NodeType::Net).min(MAX_CHANNELS) {
                    if self.path(gpu(gi), net(n)).ty == t {
                        push(&mut out, n);
                        if out.len() >= max {
                            return out;
                        }
                    }
                }
            }
        }
        out
    }

    /// NCCL `gpuPciBw`: the GPU's PCIe link bandwidth (both directions' minimum), truncated.
    fn gpu_pci_bw(&self, gi: usize) -> i64 {
        let n = &self.sys.nodes(NodeType::Gpu)[gi];
        for l in n.links.iter().filter(|l| l.ty == LinkType::Pci) {
            if let Some(back) = self.sys.node(l.rem).links.iter().find(|b| b.rem == gpu(gi)) {
                return l.bw.min(back.bw) as i64;
            }
        }
        -1
    }

    /// NCCL `ncclTopoSearchNextGpuSort`: the GPUs to try after `cur`, best first; on NVSwitch
    /// systems only the ring neighbours.
    fn next_gpus(&self, g: &Graph, cur: usize, sort_net: i32) -> Vec<usize> {
        let flag = 1u64 << g.n_channels;
        let ngpus = g.ngpus;
        let net_from = (sort_net != 0).then(|| net(self.net_index(g.inter[g.n_channels * 2])));
        // (interBw, interPciBw, interNhops, intraBw, intraNhops, startIndex, g)
        let mut scores: Vec<(i64, i64, i64, i64, i64, usize, usize)> = Vec::new();
        for i in 1..ngpus {
            let o = (cur + i) % ngpus;
            let p = self.path(gpu(cur), gpu(o));
            if p.hops() == 0 || self.used[o] & flag != 0 {
                continue;
            }
            let (ib, ipb, ih) = match net_from {
                Some(nf) => {
                    let np = self.path(nf, gpu(o));
                    (np.bw as i64, self.gpu_pci_bw(o), np.hops() as i64)
                }
                None => (0, 0, 0),
            };
            scores.push((ib, ipb, ih, p.bw as i64, p.hops() as i64, i, o));
        }
        scores.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.1.cmp(&a.1))
                .then(a.2.cmp(&b.2))
                .then(b.3.cmp(&a.3))
                .then(a.4.cmp(&b.4))
                .then(a.5.cmp(&b.5))
        });
        let same_intra = scores
            .windows(2)
            .all(|w| w[0].3 == w[1].3 && w[0].4 == w[1].4);
        let mut next: Vec<usize> = scores.iter().map(|s| s.6).collect();
        if sort_net == -1 && same_intra {
            next.reverse();
        }
        if self.sys.count(NodeType::Nvs) > 0 {
            let prev_gpu = (cur + ngpus - 1) % ngpus;
            let next_gpu = (cur + 1) % ngpus;
            let mut first = match g.pattern {
                Pattern::Ring => vec![next_gpu, prev_gpu],
                Pattern::SplitTree | Pattern::BalancedTree => vec![prev_gpu, next_gpu],
                _ => vec![next_gpu],
            };
            if next_gpu == prev_gpu && first.len() == 2 {
                first.truncate(1);
            }
            let mut real = 0;
            for f in first {
                if let Some(i) = next.iter().position(|&x| x == f) {
                    next.remove(i);
                    next.insert(0, f);
                    real += 1;
                }
            }
            next.truncate(real);
        }
        next
    }
}
