//! Predicted time of one collective call and NCCL's choice of algorithm, protocol, channels and
//! threads (NCCL 2.28 src/graph/tuning.cc `ncclTopoGetAlgoTime`, src/enqueue.cc
//! `updateCollCostTable`, `topoGetAlgoInfo`; internals §4.5). rnccl models no CollNet and no
//! NVLS, so those never win.

use serde::Serialize;

use super::constants::{MAX_NTHREADS, TREE_CORRECTION, WARP_SIZE};
use super::{COLLNET_CHAIN, COLLNET_DIRECT, Model, NVLS, NVLS_TREE, PAT, RING, SIMPLE, TREE};
use crate::func::Func;

/// NCCL's pick for one call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Choice {
    /// Algorithm index (see [`crate::config::syntax::ALGORITHMS`]).
    pub algo: usize,
    /// Protocol index (see [`crate::config::syntax::PROTOCOLS`]).
    pub proto: usize,
    /// Predicted time, µs.
    pub time_us: f32,
    /// Channels the call uses.
    pub nchannels: usize,
    /// Threads per CTA.
    pub nthreads: u32,
}

fn log2i(n: u64) -> i32 {
    if n == 0 {
        -1
    } else {
        (u64::BITS - 1 - n.leading_zeros()) as i32
    }
}

impl Model {
    /// Predicted time in µs of `f` on `nbytes` (the larger of the send and receive buffers, as
    /// nccl-tests' size column) with algorithm `a` and protocol `p`; `None` when that combination
    /// is not usable (bandwidth 0) or `f` is not one of the functions NCCL tunes.
    pub fn time(&self, f: Func, a: usize, p: usize, nbytes: u64) -> Option<f32> {
        let fi = f.tuned_index()?;
        let mut bw = self.bandwidth[fi][a][p];
        let mut lat = self.latency[fi][a][p];
        if bw == 0.0 {
            return None;
        }
        let log = log2i(nbytes >> 6);
        if self.gpu_corrections && a == TREE && f == Func::AllReduce && (0..23).contains(&log) {
            bw *= TREE_CORRECTION[p][log as usize];
        }
        if self.gpu_corrections
            && a == RING
            && p == SIMPLE
            && self.nnodes > 1
            && f == Func::AllReduce
            && nbytes / (self.nchannels * self.nranks).max(1) as u64 >= 64
        {
            lat *= if self.cc_min < 80 { 1.9 } else { 1.4 };
        }
        Some(lat + nbytes as f32 / (1000.0 * bw))
    }

    /// NCCL's choice for `f` on `nbytes`: the fastest usable combination (first in algorithm
    /// then protocol order on ties), then the channels and threads it runs with. `None` when no
    /// combination is usable (NCCL: "no algorithm/protocol available") or `f` is not one of the
    /// functions NCCL tunes.
    pub fn choose(&self, f: Func, nbytes: u64) -> Option<Choice> {
        f.tuned_index()?;
        if self.nranks <= 1 {
            return Some(Choice {
                algo: RING,
                proto: SIMPLE,
                time_us: 0.0,
                nchannels: 1,
                nthreads: 3 * WARP_SIZE,
            });
        }
        let mut best: Option<(usize, usize, f32)> = None;
        for a in 0..7 {
            if matches!(a, COLLNET_DIRECT | COLLNET_CHAIN | NVLS | NVLS_TREE) {
                continue;
            }
            for p in 0..3 {
                if let Some(t) = self.time(f, a, p, nbytes)
                    && t >= 0.0
                    && best.is_none_or(|b| t < b.2)
                {
                    best = Some((a, p, t));
                }
            }
        }
        let (a, p, t) = best?;
        let mut nc = self.nchannels.max(1) as u64;
        let mut nt = u64::from(self.max_threads[a][p]);
        let thr = self.thread_thresholds[a][p];
        while nbytes < nc * nt * thr && nc >= 2 {
            nc -= 1;
        }
        while nbytes < nc * nt * thr && nt % 128 == 0 && nt > 0 {
            nt /= 2;
        }
        if p == SIMPLE {
            if a == RING {
                nt += u64::from(WARP_SIZE);
            }
            if a == TREE {
                nt += 4 * u64::from(WARP_SIZE);
            }
        }
        if nt / u64::from(WARP_SIZE) < 3 {
            nt = 3 * u64::from(WARP_SIZE);
        }
        if a == TREE || a == PAT {
            nt = u64::from(MAX_NTHREADS);
        }
        Some(Choice {
            algo: a,
            proto: p,
            time_us: t,
            nchannels: nc as usize,
            nthreads: nt as u32,
        })
    }
}
