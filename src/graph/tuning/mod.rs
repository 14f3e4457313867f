//! NCCL's tuning model (NCCL 2.28 src/graph/tuning.cc `ncclTopoTuneModel`; internals §4): per
//! collective, algorithm and protocol a latency (µs) and a bandwidth (GB/s, algorithm bandwidth,
//! i.e. bytes / time) derived from the searched graphs, then NCCL's enable rules and the user's
//! `NCCL_ALGO`/`NCCL_PROTO`. [`select`] turns them into a predicted time and NCCL's choice.

pub mod constants;
pub mod cpu;
pub mod select;
pub mod table;

use serde::Serialize;

use self::constants::*;
use crate::config::syntax::{ALGORITHMS, AlgoProtoList, PROTOCOLS};
use crate::config::{Config, ConfigError};
use crate::func::Func;
use crate::graph::Channels;
use crate::graph::types::{Graph, Pattern};
use crate::topo::system::{CpuArch, CpuVendor};
use crate::topo::{NodeType, PathType, System, bw::PCI_BW};

/// Algorithm indices in NCCL's order (`NCCL_ALGO_*`).
pub const TREE: usize = 0;
/// Ring.
pub const RING: usize = 1;
/// CollNet direct.
pub const COLLNET_DIRECT: usize = 2;
/// CollNet chain.
pub const COLLNET_CHAIN: usize = 3;
/// NVLink SHARP.
pub const NVLS: usize = 4;
/// NVLS with a tree across nodes.
pub const NVLS_TREE: usize = 5;
/// Parallel aggregated trees.
pub const PAT: usize = 6;
/// Protocol indices (`NCCL_PROTO_*`).
pub const LL: usize = 0;
/// LL128.
pub const LL128: usize = 1;
/// Simple.
pub const SIMPLE: usize = 2;

/// Knobs of the tuning model.
#[derive(Debug, Clone, Default)]
pub struct TuneParams {
    /// `NCCL_NTHREADS` (values <= 0: auto).
    pub nthreads: i64,
    /// `NCCL_LL128_NTHREADS` (values <= 0: auto).
    pub ll128_nthreads: i64,
    /// `NCCL_PAT_ENABLE`: 0, 1, or 2 (auto).
    pub pat_enable: i64,
    /// `NCCL_ALGO`, parsed.
    pub algo: Option<AlgoProtoList>,
    /// `NCCL_PROTO`, parsed.
    pub proto: Option<AlgoProtoList>,
}

impl TuneParams {
    /// NCCL's defaults (no knob set).
    pub fn defaults() -> TuneParams {
        TuneParams {
            nthreads: -2,
            ll128_nthreads: -2,
            pat_enable: 2,
            algo: None,
            proto: None,
        }
    }

    /// Reads `NCCL_NTHREADS`, `NCCL_LL128_NTHREADS`, `NCCL_PAT_ENABLE`, `NCCL_ALGO`, `NCCL_PROTO`.
    ///
    /// Errors: [`ConfigError::BadValue`] naming the knob for a value NCCL rejects.
    pub fn from_config(cfg: &Config) -> Result<TuneParams, Box<ConfigError>> {
        let list =
            |name: &str, names: &[&str]| -> Result<Option<AlgoProtoList>, Box<ConfigError>> {
                let Some(v) = cfg.text(name).map_err(Box::new)? else {
                    return Ok(None);
                };
                AlgoProtoList::parse(v, names).map(Some).map_err(|hint| {
                    Box::new(cfg.refuse(name, "not an algorithm/protocol list".into(), hint))
                })
            };
        let int = |name: &str| cfg.int(name).map_err(Box::new);
        Ok(TuneParams {
            nthreads: int("NCCL_NTHREADS")?,
            ll128_nthreads: int("NCCL_LL128_NTHREADS")?,
            pat_enable: int("NCCL_PAT_ENABLE")?,
            algo: list("NCCL_ALGO", &ALGORITHMS)?,
            proto: list("NCCL_PROTO", &PROTOCOLS)?,
        })
    }
}

/// What the model needs to know about the communicator.
#[derive(Debug, Clone, Copy)]
pub struct TuneInput<'a> {
    /// The ring graph.
    pub ring: &'a Graph,
    /// The tree graph (also used by PAT).
    pub tree: &'a Graph,
    /// Ranks in the communicator.
    pub nranks: usize,
    /// Nodes.
    pub nnodes: usize,
    /// Channels after connection (NCCL `comm->nChannels`).
    pub nchannels: usize,
    /// Lowest and highest compute capability.
    pub cc: (u32, u32),
    /// CPU architecture and vendor.
    pub cpu: (CpuArch, CpuVendor),
    /// NVSwitch nodes in the topology.
    pub nvs_count: usize,
}

impl<'a> TuneInput<'a> {
    /// What the model needs for `channels`, searched and connected on `system` (every node
    /// identical to it), as NCCL's `ncclTopoTuneModel` gathers it: ranks and nodes from the
    /// connection, channels after doubling, the lowest and highest compute capability (0.0 without
    /// GPUs), the first CPU's architecture and vendor, and the NVSwitch count.
    pub fn new(system: &System, channels: &'a Channels) -> TuneInput<'a> {
        let (arch, vendor, _) = system.cpu_type();
        TuneInput {
            ring: &channels.ring,
            tree: &channels.tree,
            nranks: channels.connected.nranks,
            nnodes: channels.connected.node_ranks.len(),
            nchannels: channels.connected.nchannels,
            cc: system.comp_cap().unwrap_or((0, 0)),
            cpu: (arch, vendor),
            nvs_count: system.count(NodeType::Nvs),
        }
    }
}

/// The model: `latency[f][a][p]` µs and `bandwidth[f][a][p]` GB/s (0 = not usable), NCCL's
/// `maxThreads[a][p]` and `threadThresholds[a][p]`.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    /// Latency per collective, algorithm, protocol, µs.
    pub latency: [[[f32; 3]; 7]; 5],
    /// Algorithm bandwidth per collective, algorithm, protocol, GB/s; 0 when disabled.
    pub bandwidth: [[[f32; 3]; 7]; 5],
    /// Most threads per CTA per algorithm and protocol.
    pub max_threads: [[u32; 3]; 7],
    /// Bytes per thread before more channels or threads are used.
    pub thread_thresholds: [[u64; 3]; 7],
    /// Ranks.
    pub nranks: usize,
    /// Nodes.
    pub nnodes: usize,
    /// Channels after connection.
    pub nchannels: usize,
    /// Lowest compute capability.
    pub cc_min: u32,
    /// Whether [`Model::time`] applies NCCL's corrections for its GPU kernels (the tree
    /// correction factors, the multi-node ring Simple latency); false for the CPU model.
    pub gpu_corrections: bool,
}

fn nthreads(env: i64, min: u32, max: u32, default: u32) -> u32 {
    if env <= 0 {
        return default;
    }
    let nt = env as u32;
    if !nt.is_multiple_of(WARP_SIZE) || nt > max {
        max
    } else {
        nt.max(min)
    }
}

fn log2i(n: usize) -> i32 {
    if n == 0 {
        -1
    } else {
        (usize::BITS - 1 - n.leading_zeros()) as i32
    }
}

impl Model {
    /// Builds NCCL's table for `input` with knobs `params`.
    pub fn new(input: &TuneInput, params: &TuneParams) -> Model {
        let zero = Graph::new(0, Pattern::Tree, input.ring.ngpus, 0, 0);
        let nvls = Graph::new(3, Pattern::Nvls, input.ring.ngpus, 0, 0);
        let graphs: [&Graph; 7] = [
            input.tree, input.ring, &zero, &zero, &nvls, &nvls, input.tree,
        ];
        let mut m = Model {
            latency: [[[0.0; 3]; 7]; 5],
            bandwidth: [[[0.0; 3]; 7]; 5],
            max_threads: [[0; 3]; 7],
            thread_thresholds: [[0; 3]; 7],
            nranks: input.nranks,
            nnodes: input.nnodes,
            nchannels: input.nchannels,
            cc_min: input.cc.0,
            gpu_corrections: true,
        };
        let ring_total = input.ring.bw_intra * input.ring.n_channels as f32;
        let simple_default = if ring_total <= PCI_BW {
            256
        } else {
            SIMPLE_MAX_NTHREADS
        };
        m.max_threads[RING][SIMPLE] = nthreads(
            params.nthreads,
            2 * WARP_SIZE,
            SIMPLE_MAX_NTHREADS,
            simple_default,
        );
        m.max_threads[TREE][SIMPLE] = nthreads(
            params.nthreads,
            2 * WARP_SIZE,
            SIMPLE_MAX_NTHREADS,
            SIMPLE_MAX_NTHREADS,
        );
        for a in [COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE] {
            m.max_threads[a][SIMPLE] = MAX_NTHREADS;
        }
        let ll = nthreads(
            params.nthreads,
            2 * WARP_SIZE,
            LL_MAX_NTHREADS,
            LL_MAX_NTHREADS,
        );
        let ll128 = nthreads(
            params.ll128_nthreads,
            LL128_MAX_NTHREADS / 4,
            LL128_MAX_NTHREADS,
            LL128_MAX_NTHREADS,
        );
        for a in [RING, TREE] {
            m.max_threads[a][LL] = ll;
            m.max_threads[a][LL128] = ll128;
        }
        for a in 0..7 {
            m.thread_thresholds[a] = THREAD_THRESHOLDS;
        }
        m.thread_thresholds[RING][LL] *= input.nranks as u64;
        m.thread_thresholds[COLLNET_DIRECT][SIMPLE] = 512;
        m.thread_thresholds[COLLNET_CHAIN][SIMPLE] = 512;
        if input.nranks <= 1 {
            return m;
        }
        m.fill(input, params, &graphs);
        m.apply_enables(input, params, &graphs);
        m
    }

    fn fill(&mut self, input: &TuneInput, params: &TuneParams, graphs: &[&Graph; 7]) {
        let (nranks, nnodes) = (input.nranks, input.nnodes);
        let cc = input.cc.0;
        let cc_idx = match cc {
            100.. => 3,
            90.. => 2,
            80.. => 1,
            _ => 0,
        };
        let idx2 = if nnodes <= 2 { nnodes - 1 } else { 2 };
        let idx1 = if nnodes == 1 {
            cc_idx
        } else if input.cpu.1 == CpuVendor::Amd {
            1
        } else {
            0
        };
        let ll_max = LL_MAX_BW[idx1][idx2];
        let tree_max = PER_CH_TREE[cc_idx][idx2];
        let ring_ll128_max = PER_CH_RING_LL128[cc_idx][idx2];
        let tree_ll128_max = PER_CH_TREE_LL128[cc_idx][idx2];
        let nvls_tree_max = PER_CH_NVLS_TREE[cc_idx][idx2];
        let mut hw_lat = HW_LAT;
        if input.cpu.0 == CpuArch::Power {
            hw_lat[1][TREE][SIMPLE] = hw_lat[1][RING][SIMPLE];
        }
        let ppn = nranks as f32 / nnodes as f32;
        let intra_hw: Vec<usize> = graphs
            .iter()
            .map(|g| if g.type_intra == PathType::Nvl { 0 } else { 1 })
            .collect();
        let hw: Vec<usize> = intra_hw
            .iter()
            .map(|&h| if nnodes == 1 { h } else { 2 })
            .collect();
        let pat_enabled =
            cc >= 60 && (params.pat_enable == 1 || (params.pat_enable == 2 && nnodes == nranks));
        for (fi, f) in Func::TUNED.into_iter().enumerate() {
            let ag_rs = matches!(f, Func::AllGather | Func::ReduceScatter);
            let nsteps = match f {
                Func::AllReduce => 2 * (nranks - 1),
                Func::AllGather | Func::ReduceScatter => nranks - 1,
                _ => nranks,
            };
            for a in 0..7 {
                if matches!(f, Func::Broadcast | Func::Reduce) && a != RING {
                    continue;
                }
                if ag_rs && ![PAT, RING, NVLS, COLLNET_DIRECT].contains(&a) {
                    continue;
                }
                if f == Func::AllReduce && a == PAT {
                    continue;
                }
                let g = graphs[a];
                for p in 0..3 {
                    if (a == NVLS || a == NVLS_TREE) && p != SIMPLE {
                        continue;
                    }
                    if ag_rs && a == PAT && (p != SIMPLE || !pat_enabled) {
                        continue;
                    }
                    let collnet = a == COLLNET_DIRECT || a == COLLNET_CHAIN;
                    let mut bw = if nnodes <= 2 || collnet {
                        g.bw_intra
                    } else {
                        g.bw_inter
                    };
                    if a == NVLS || a == NVLS_TREE {
                        if g.n_channels < 2 {
                            continue;
                        }
                        let nch = g.n_channels as f32;
                        let mut intra = g.bw_intra * NVLS_EFFICIENCY[cc_idx] * (nch - 1.0) / nch;
                        intra *= if f == Func::AllReduce {
                            2.0
                        } else {
                            (ppn - 1.0) / ppn
                        };
                        let inter = g.bw_inter
                            * if nnodes <= 2 && a == NVLS_TREE {
                                2.0
                            } else {
                                1.0
                            };
                        bw = intra.min(inter);
                        if a == NVLS_TREE {
                            bw = bw.min(nvls_tree_max as f32);
                        }
                    }
                    let nch = g.n_channels as f64;
                    let mut bus = (g.n_channels as f32 * bw) as f64;
                    if a == RING && p == LL {
                        bus = ll_max.min(bus * 0.5);
                    }
                    if a == RING && p == LL128 {
                        bus = (bus * 0.92).min(nch * ring_ll128_max);
                    }
                    if a == TREE && f == Func::AllReduce {
                        bus = (bus * 0.92).min(nch * tree_max);
                    }
                    if a == TREE && p == LL {
                        bus = (bus / 3.8).min(ll_max);
                    }
                    if a == TREE && p == LL128 {
                        bus = (bus
                            * if nnodes == 1 {
                                7.0 / 9.0
                            } else {
                                120.0 / 128.0
                            })
                        .min(nch * tree_ll128_max);
                    }
                    let mut bus = bus as f32;
                    if a == TREE && input.tree.pattern == Pattern::Tree {
                        bus *= 0.85;
                    }
                    if a == PAT {
                        bus *= 0.75;
                    }
                    if collnet && p != SIMPLE {
                        bus = 0.0;
                    }
                    if (a == NVLS || a == COLLNET_DIRECT) && ag_rs && nnodes > 1 {
                        bus = 0.0;
                    }
                    if !(a != RING && ag_rs) {
                        let ratio = if [RING, NVLS, NVLS_TREE].contains(&a) {
                            (nranks as f64 / nsteps as f64) as f32
                        } else {
                            0.5
                        };
                        bus *= ratio;
                    }
                    self.bandwidth[fi][a][p] = bus;
                    let mut lat = BASE_LAT[a][p];
                    let mut intra_lat = hw_lat[intra_hw[a]][a][p];
                    let mut inter_lat = if ppn == 1.0 {
                        hw_lat[2][TREE][p]
                    } else {
                        hw_lat[2][a][p]
                    };
                    inter_lat += g.latency_inter;
                    if p == SIMPLE {
                        inter_lat += g.latency_inter;
                    }
                    let local = (nranks / nnodes) as f32 - 1.0;
                    let l2 = log2i(nnodes) as f32;
                    match a {
                        RING => {
                            let mut hop = hw_lat[hw[a]][a][p];
                            if matches!(f, Func::Reduce | Func::Broadcast) {
                                if g.same_channels {
                                    lat += hop;
                                } else {
                                    if p == SIMPLE {
                                        hop = hw_lat[hw[a]][TREE][p];
                                    }
                                    lat += nsteps as f32 * hop;
                                }
                            } else {
                                let mut overhead = 0.0f32;
                                if nnodes > 1 {
                                    overhead = if input.cpu == (CpuArch::X86, CpuVendor::Amd) {
                                        2.0
                                    } else {
                                        1.0
                                    };
                                    if p == SIMPLE {
                                        overhead *= 3.0;
                                    }
                                }
                                intra_lat = intra_lat.max(overhead);
                                let n_inter = match (nnodes, f) {
                                    (1, _) => 0,
                                    (_, Func::AllReduce) => 2 * (nnodes - 1),
                                    _ => nnodes - 1,
                                };
                                lat += (nsteps - n_inter) as f32 * intra_lat
                                    + n_inter as f32 * inter_lat;
                            }
                        }
                        TREE if f == Func::AllReduce => {
                            lat += 2.0 * (local * intra_lat + l2 * inter_lat)
                        }
                        COLLNET_DIRECT => {
                            lat += 2.0 * (local.min(1.0) * intra_lat + local * 0.4) + inter_lat
                        }
                        COLLNET_CHAIN => lat += 2.0 * local * intra_lat + inter_lat,
                        NVLS => lat = intra_lat + if nnodes > 1 { inter_lat } else { 0.0 },
                        NVLS_TREE => lat += intra_lat + 2.0 * l2 * inter_lat,
                        PAT if ag_rs => lat += l2 * (inter_lat / 3.5) + nranks as f32 * 2.8,
                        _ => {}
                    }
                    self.latency[fi][a][p] = lat;
                }
            }
        }
    }

    /// NCCL's enable rules: LL128 only where 128-byte stores are safe, no NVLS tree on one node,
    /// no CollNet (rnccl has no CollNet plugin), CollNet direct only with NVSwitches, and the
    /// user's `NCCL_ALGO`/`NCCL_PROTO`; disabled combinations get bandwidth 0.
    fn apply_enables(&mut self, input: &TuneInput, params: &TuneParams, graphs: &[&Graph; 7]) {
        let (cc_min, cc_max) = input.cc;
        for fi in 0..Func::TUNED.len() {
            for (a, g) in graphs.iter().enumerate() {
                let mut algo_on = params.algo.as_ref().is_none_or(|l| l.enabled[fi][a]);
                if input.nnodes == 1 && a == NVLS_TREE {
                    algo_on = false;
                }
                if a == COLLNET_DIRECT || a == COLLNET_CHAIN || (a == NVLS && input.nnodes > 1) {
                    algo_on = false;
                }
                if input.nvs_count == 0 && a == COLLNET_DIRECT {
                    algo_on = false;
                }
                for p in 0..3 {
                    let mut proto_on = params.proto.as_ref().is_none_or(|l| l.enabled[fi][p]);
                    if p == LL128 && params.proto.is_none() {
                        let inter_ok = if cc_min >= 90 {
                            g.type_inter <= PathType::Pxn
                        } else {
                            g.type_inter <= PathType::Pxb
                        };
                        proto_on = inter_ok
                            && g.type_intra <= PathType::Nvb
                            && cc_min == cc_max
                            && cc_min >= 70;
                    }
                    if !proto_on || !algo_on {
                        self.bandwidth[fi][a][p] = 0.0;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_and_names_follow_nccl() {
        assert_eq!(nthreads(-2, 64, 512, 256), 256);
        assert_eq!(nthreads(100, 64, 512, 512), 512, "not a multiple of 32");
        assert_eq!(nthreads(1024, 64, 512, 512), 512);
        assert_eq!(nthreads(32, 64, 512, 512), 64);
        assert_eq!((log2i(1), log2i(1024), log2i(1025)), (0, 10, 10));
    }
}
