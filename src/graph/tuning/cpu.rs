//! The tuning model for CPU ranks: the same [`Model`] tables and the same choice
//! ([`Model::choose`]) as NCCL's GPU model, filled from the costs of rnccl's host algorithms
//! instead of NCCL's GPU constants. Ring is NCCL's ring (AllReduce in `2(n-1)` steps, the others
//! in `n-1`); Tree is rnccl's latency algorithm for host buffers (recursive doubling for
//! AllReduce, a binomial tree for Broadcast and Reduce), whose every round moves the whole
//! buffer. Only the Simple protocol exists on host buffers; `NCCL_ALGO` restricts the choice as
//! for GPUs.
//!
//! The constants were measured with `rnccl bench` on the 2-vCPU reference VM, 2 ranks, one per
//! core (the shapes and sizes below), by fitting `time = latency + bytes / bandwidth` to each
//! algorithm over the sizes where the choice between them is made:
//! - shared memory, AllReduce: recursive doubling 0.75 µs + bytes / 7.8 GB/s (8 B to 512 KiB);
//!   ring 2.0 µs + bytes / 9.0 GB/s (32 KiB to 512 KiB; 8 B takes 0.95 µs but the ring's cost
//!   grows with its slot hand-offs well before it reaches the bandwidth term). They cross at
//!   about 64 KiB, where `NCCL_ALGO`-forced runs cross too (Tree 4.96 / Ring 5.46 µs at 32 KiB,
//!   17.3 / 15.9 µs at 128 KiB).
//! - TCP between two network namespaces: recursive doubling 6 µs + bytes / 0.82 GB/s, ring
//!   9.4 µs + bytes / 0.92 GB/s (best of noisy runs; iperf3 gives 1.24 GB/s per direction).
//!
//! Latencies are split NCCL's way into a base per call and a cost per hop (per round for
//! Tree), so they scale with the communicator: a ring takes `nsteps` hops, recursive doubling
//! `log2(p)` rounds plus two when `nranks` is not a power of two `p`, a binomial tree
//! `ceil(log2(nranks))` rounds.

use super::{LL, LL128, Model, RING, SIMPLE, TREE, TuneParams};
use crate::func::Func;

/// Base latency per call (µs): Tree, Ring.
const BASE_LAT: [f32; 2] = [0.45, 0.4];
/// Latency per hop or round (µs): shared memory, TCP; Tree, Ring.
const HOP_LAT: [[f32; 2]; 2] = [[0.3, 0.8], [5.5, 4.5]];
/// Bus bandwidth (GB/s) of the host's links as each algorithm uses them, independent of the
/// channel count (the 2-core reference host is memory bound): shared memory, TCP; Tree, Ring.
const BUS_BW: [[f32; 2]; 2] = [[7.8, 9.0], [0.82, 0.92]];

/// What the CPU model needs to know about a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTuneInput {
    /// Ranks.
    pub nranks: usize,
    /// Hosts (ranks on different hosts talk over TCP).
    pub nnodes: usize,
    /// Channels of the layout.
    pub nchannels: usize,
    /// Bytes of a ring chunk: a transfer uses one more channel per chunk it fills.
    pub chunk_bytes: usize,
}

/// Rounds of recursive doubling on `n` ranks.
fn doubling_rounds(n: usize) -> usize {
    let p = 1usize << (usize::BITS - 1 - n.max(1).leading_zeros());
    p.trailing_zeros() as usize + if p == n { 0 } else { 2 }
}

/// Rounds of a binomial tree on `n` ranks.
fn binomial_rounds(n: usize) -> usize {
    n.max(1).next_power_of_two().trailing_zeros() as usize
}

impl Model {
    /// The model for CPU ranks of a communicator shaped as `input`, with `params`' `NCCL_ALGO`
    /// (its protocol restrictions do not apply: host buffers only have Simple).
    pub fn cpu(input: &CpuTuneInput, params: &TuneParams) -> Model {
        let (n, nnodes) = (input.nranks.max(1), input.nnodes.max(1));
        let mut m = Model {
            latency: [[[0.0; 3]; 7]; 5],
            bandwidth: [[[0.0; 3]; 7]; 5],
            max_threads: [[0; 3]; 7],
            thread_thresholds: [[0; 3]; 7],
            nranks: n,
            nnodes,
            nchannels: input.nchannels.max(1),
            cc_min: 0,
            gpu_corrections: false,
        };
        // One "thread" per channel: `choose` then uses one channel per chunk of data.
        for a in [TREE, RING] {
            m.max_threads[a][SIMPLE] = 1;
            m.thread_thresholds[a][SIMPLE] = input.chunk_bytes.max(1) as u64;
        }
        let link = usize::from(nnodes > 1);
        for (fi, f) in Func::TUNED.into_iter().enumerate() {
            let enabled = |a: usize| params.algo.as_ref().is_none_or(|l| l.enabled[fi][a]);
            // Ring: NCCL's step counts; AllReduce crosses node boundaries 2(nnodes-1) times.
            let nsteps = match f {
                Func::AllReduce => 2 * (n - 1),
                _ => n - 1,
            };
            let inter = match f {
                Func::AllReduce => 2 * (nnodes - 1),
                _ => nnodes - 1,
            }
            .min(nsteps);
            if enabled(RING) {
                let hops = (nsteps - inter) as f32 * HOP_LAT[0][1] + inter as f32 * HOP_LAT[1][1];
                m.latency[fi][RING][SIMPLE] = BASE_LAT[1] + hops;
                let ratio = match f {
                    Func::AllReduce | Func::AllGather | Func::ReduceScatter if n > 1 => {
                        n as f32 / nsteps as f32
                    }
                    _ => 1.0,
                };
                m.bandwidth[fi][RING][SIMPLE] = BUS_BW[link][1] * ratio;
            }
            let rounds = match f {
                Func::AllReduce => Some(doubling_rounds(n)),
                Func::Broadcast | Func::Reduce => Some(binomial_rounds(n)),
                Func::AllGather | Func::ReduceScatter => None,
                _ => None,
            };
            if let Some(r) = rounds.filter(|_| enabled(TREE)) {
                let r = r.max(1) as f32;
                m.latency[fi][TREE][SIMPLE] = BASE_LAT[0] + r * HOP_LAT[link][0];
                m.bandwidth[fi][TREE][SIMPLE] = BUS_BW[link][0] / r;
            }
            for p in [LL, LL128] {
                for a in [TREE, RING] {
                    m.bandwidth[fi][a][p] = 0.0;
                }
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::syntax::{ALGORITHMS, AlgoProtoList};

    fn model(n: usize, nnodes: usize, algo: Option<&str>) -> Model {
        let params = TuneParams {
            algo: algo.map(|a| AlgoProtoList::parse(a, &ALGORITHMS).unwrap()),
            ..TuneParams::defaults()
        };
        let input = CpuTuneInput {
            nranks: n,
            nnodes,
            nchannels: 2,
            chunk_bytes: 256 << 10,
        };
        Model::cpu(&input, &params)
    }

    #[test]
    fn rounds() {
        assert_eq!(
            (1..=9).map(doubling_rounds).collect::<Vec<_>>(),
            [0, 1, 3, 2, 4, 4, 4, 3, 5]
        );
        assert_eq!(
            (1..=9).map(binomial_rounds).collect::<Vec<_>>(),
            [0, 1, 2, 2, 3, 3, 3, 3, 4]
        );
    }

    #[test]
    fn latency_algorithms_for_small_rings_for_large() {
        let m = model(2, 1, None);
        let pick = |f, b| {
            let c = m.choose(f, b).unwrap();
            (c.algo, c.nchannels)
        };
        // Two ranks on one host: the crossover measured near 64 KiB.
        assert_eq!(pick(Func::AllReduce, 8), (TREE, 1));
        assert_eq!(pick(Func::AllReduce, 32 << 10), (TREE, 1));
        assert_eq!(pick(Func::AllReduce, 128 << 10), (RING, 1));
        assert_eq!(pick(Func::AllReduce, 1 << 20), (RING, 2));
        assert_eq!(pick(Func::AllGather, 8).0, RING, "no tree for AllGather");
        assert!(
            m.choose(Func::AllToAll, 8).is_none(),
            "not a tuned function"
        );
        // More ranks: the ring's latency grows with n, recursive doubling's with log n.
        let m8 = model(8, 1, None);
        assert_eq!(m8.choose(Func::AllReduce, 16 << 10).unwrap().algo, TREE);
        assert_eq!(m8.choose(Func::AllReduce, 1 << 20).unwrap().algo, RING);
        // Across hosts, TCP's latency keeps the latency algorithm longer.
        let net = model(2, 2, None);
        assert_eq!(net.choose(Func::AllReduce, 16 << 10).unwrap().algo, TREE);
    }

    #[test]
    fn nccl_algo_restricts_the_choice() {
        let ring = model(4, 1, Some("Ring"));
        assert_eq!(ring.choose(Func::AllReduce, 8).unwrap().algo, RING);
        let tree = model(4, 1, Some("Tree"));
        assert_eq!(tree.choose(Func::AllReduce, 1 << 30).unwrap().algo, TREE);
        assert!(
            tree.choose(Func::AllGather, 8).is_none(),
            "AllGather has no tree"
        );
        let nvls = model(4, 1, Some("NVLS"));
        assert!(nvls.choose(Func::AllReduce, 8).is_none());
        let per_func = model(4, 1, Some("Ring;AllReduce:Tree"));
        assert_eq!(
            per_func.choose(Func::AllReduce, 1 << 30).unwrap().algo,
            TREE
        );
        assert_eq!(per_func.choose(Func::Broadcast, 8).unwrap().algo, RING);
    }
}
