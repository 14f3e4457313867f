//! A communicator's plan cache: an operation repeated with the same shape (the common case in
//! training loops and benchmarks) reuses its plan instead of choosing the algorithm and building
//! the steps again.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::Core;
use super::gpu::ll::LL_AUTO_MAX_BYTES;
use super::gpu::spread::spread_p2p;
use crate::bootstrap::BootstrapNet;
use crate::coll::Geometry;
use crate::coll::{self, Algo, CollArgs, Func, Plan};
use crate::config::syntax::AlgoProtoList;
use crate::config::syntax::{ALGORITHMS, PROTOCOLS};
use crate::dtype::DataType;
use crate::error::Error;
use crate::error::Result;
use crate::graph::tuning::cpu::CpuTuneInput;
use crate::graph::tuning::{Model, TuneParams};
use crate::redop::{RedOp, Scalar};

/// Plans kept before the cache starts over.
const CAPACITY: usize = 512;

/// What a plan depends on (besides the communicator, which owns the cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PlanKey {
    func: Func,
    count: usize,
    dtype: DataType,
    op: (u8, u8, u64),
    root: usize,
    in_place: bool,
}

fn op_key(op: RedOp) -> (u8, u8, u64) {
    let scalar = |s: Scalar| match s {
        Scalar::Int(v) => (0, v as u64),
        Scalar::Uint(v) => (1, v),
        Scalar::Float(v) => (2, v.to_bits()),
        Scalar::Device(at) => (3, at),
    };
    match op {
        RedOp::Sum => (0, 0, 0),
        RedOp::Prod => (1, 0, 0),
        RedOp::Max => (2, 0, 0),
        RedOp::Min => (3, 0, 0),
        RedOp::Avg => (4, 0, 0),
        RedOp::PreMulSum(s) => {
            let (k, bits) = scalar(s);
            (5, k, bits)
        }
    }
}

/// Cached plans of one communicator.
#[derive(Default)]
pub(crate) struct PlanCache {
    plans: FxHashMap<PlanKey, Arc<Plan>>,
}

impl PlanCache {
    /// The plan for `args` on this rank, built on first use with the algorithm and channel
    /// count the communicator's tuning model chooses (restricted by `NCCL_ALGO`).
    ///
    /// Errors: as [`coll::plan`]; [`Error::InvalidUsage`] when `NCCL_ALGO` leaves no algorithm
    /// rnccl runs for the function.
    pub(crate) fn get(&mut self, core: &Core, args: &CollArgs) -> Result<Arc<Plan>> {
        let key = PlanKey {
            func: args.func,
            count: args.count,
            dtype: args.dtype,
            op: op_key(args.op),
            root: args.root,
            in_place: args.in_place,
        };
        if let Some(p) = self.plans.get(&key) {
            return Ok(p.clone());
        }
        let n = core.nranks;
        let bytes = args.input_bytes(n).max(args.output_bytes(n));
        let (algo, nch) = choose(core, args.func, bytes)?;
        let plan = coll::plan(args, core.rank, n, &core.rings, core.geo, algo, nch)?;
        // GPU ranks cut large point-to-point steps over several connections per peer.
        let plan = Arc::new(match core.watch.gpu() {
            Some(g) => spread_p2p(&plan, g.conns.p2p_channels()),
            None => plan,
        });
        if self.plans.len() >= CAPACITY {
            self.plans.clear();
        }
        self.plans.insert(key, plan.clone());
        Ok(plan)
    }
}

/// The algorithm and channel count for `func` moving `bytes` (the larger of its buffers):
/// point-to-point functions run directly, the tuned collectives as the model chooses.
///
/// Errors: [`Error::InvalidUsage`] when `NCCL_ALGO` leaves no algorithm rnccl runs.
fn choose(core: &Core, func: Func, bytes: usize) -> Result<(Algo, usize)> {
    if func.tuned_index().is_none() {
        return Ok((Algo::Direct, 1));
    }
    let no_algo = || {
        let has_tree = matches!(func, Func::AllReduce | Func::Broadcast | Func::Reduce);
        Error::invalid_usage(format!(
            "NCCL_ALGO={:?} allows no algorithm rnccl runs for {} (rnccl implements Ring{}); \
             unset it or include one of those",
            core.algo_knob.as_deref().unwrap_or(""),
            func.nccl_name(),
            if has_tree { " and Tree" } else { "" }
        ))
    };
    let c = core.tuning.choose(func, bytes as u64).ok_or_else(no_algo)?;
    if core.watch.gpu().is_some() {
        return gpu_choice(core, func, bytes, &c);
    }
    let algo = Algo::from_model(c.algo).ok_or_else(|| {
        Error::Internal(format!(
            "the CPU tuning model chose algorithm {} for {func}",
            c.algo
        ))
    })?;
    Ok((algo, c.nchannels))
}

/// Bytes each channel of a GPU collective gets at least: fewer channels below
/// `nchannels × GPU_CHANNEL_MIN_BYTES`, so a small operation is not spread over blocks that
/// each move a few lines (NCCL trims channels the same way for small sizes,
/// `src/enqueue.cc:getNChannels`, with 512 threads × its per-thread threshold).
const GPU_CHANNEL_MIN_BYTES: usize = 128 << 10;

/// The algorithm and channel count of a GPU collective: the step interpreter runs rings, on as
/// many channels as the size fills, except for a two-rank all-reduce [`gpu_exchange`] takes.
/// (On more ranks the tree plans exchange with non-neighbours, connections a GPU communicator
/// does not open.)
///
/// Errors: [`Error::InvalidUsage`] when `NCCL_ALGO` excludes Ring.
fn gpu_choice(
    core: &Core,
    func: Func,
    bytes: usize,
    c: &crate::graph::tuning::select::Choice,
) -> Result<(Algo, usize)> {
    use crate::graph::tuning::{RING, SIMPLE};
    if gpu_exchange(
        core.algo_knob.as_deref(),
        func,
        bytes,
        core.nranks,
        core.geo.slot_bytes,
    ) {
        return Ok((Algo::Tree, 1));
    }
    if let Some(knob) = &core.algo_knob {
        let ring_on = core.tuning.time(func, RING, SIMPLE, bytes as u64).is_some();
        if c.algo != RING && !ring_on {
            return Err(Error::invalid_usage(format!(
                "NCCL_ALGO={knob:?} excludes Ring, the algorithm rnccl runs {} with on GPUs \
                 (Tree only for a two-rank all-reduce of up to 64 KiB); unset it or \
                 include Ring",
                func.nccl_name()
            )));
        }
    }
    Ok((
        Algo::Ring,
        ring_channels(func, bytes, core.nranks, core.rings.nchannels()),
    ))
}

/// Largest all-reduce a two-rank GPU communicator runs as one exchange ([`gpu_exchange`]):
/// the exchange is one lane, so one thread block copies the buffer into the slot and reduces
/// what arrives, where the ring spreads a larger buffer over more channels. Two ranks on one
/// H200 (`rnccl bench -t 2 -g 1`, `NCCL_PROTO=Simple`, 2026-11-29): 8 B to 4 KB in 7.9-8.1 µs
/// where the ring took 9.1-10.3, 32 KB in 9.3 against 10.9, 256 KB in 24.9 against 14.9.
const GPU_EXCHANGE_MAX_BYTES: usize = 64 << 10;

/// Whether a GPU all-reduce of `bytes` bytes per rank over `nranks` ranks, with FIFO slots of
/// `slot_bytes` bytes, runs as one exchange with the peer (the two-rank case of
/// `coll::tree`'s recursive doubling: each rank sends its buffer, and both reduce the two in
/// rank order) rather than the ring: on two ranks, up to one slot and
/// [`GPU_EXCHANGE_MAX_BYTES`], unless `NCCL_ALGO` (`algo`, as set) excludes Tree. The ring's
/// two ranks take two dependent hops (the reduce-scatter step, then the all-gather step), the
/// exchange one, with the same bytes on the wire. That matters most between hosts, where a
/// hop is a crossing of both proxies and the sockets: two processes sharing one H200 as two
/// hosts over loopback (`perf/gpu_net.sh`, where every hop also waits for the GPU's time
/// slice) took 2254 µs per all-reduce of 8 B to 256 KB, the ring 4506 (2026-11-29).
pub(crate) fn gpu_exchange(
    algo: Option<&str>,
    func: Func,
    bytes: usize,
    nranks: usize,
    slot_bytes: usize,
) -> bool {
    let tree = algo.is_none_or(|raw| {
        AlgoProtoList::parse(raw, &ALGORITHMS)
            .is_ok_and(|l| l.allows(func.nccl_name(), "Tree", &ALGORITHMS))
    });
    func == Func::AllReduce
        && nranks == 2
        && bytes <= slot_bytes.min(GPU_EXCHANGE_MAX_BYTES)
        && tree
}

/// Channels a GPU ring trims to at most when its shares are small (below, the size alone
/// decides: [`GPU_CHANNEL_MIN_BYTES`]).
const GPU_RING_TRIM_FLOOR: usize = 16;

/// Bytes of a ring channel's share below which a GPU ring of more than [`GPU_RING_TRIM_FLOOR`]
/// channels runs fewer: for all-reduce, all-gather and reduce-scatter the channel's part of
/// one rank's chunk (a FIFO slot, 512 KiB, per step), for the pipelined broadcast and reduce
/// the channel's part of the buffer (two slots, so each hop overlaps the next). On 4×H200
/// (`rnccl bench -g 4`, 2026-11-28) 64 MB took 188 µs on 32 channels against 201 on 64 for
/// all-gather and reduce-scatter, and 336 against 340 for all-reduce (NCCL: 188, 187, 323);
/// from 128 MB 64 channels were fastest (all-gather 342 µs against 367). A 16 MB broadcast
/// took 77 µs on 16 channels against 86 on 64 (NCCL 71), 32 MB 133 on 32 against 139.
fn ring_share_min(func: Func) -> usize {
    match func {
        Func::Broadcast | Func::Reduce => 1 << 20,
        _ => 512 << 10,
    }
}

/// The channels of a GPU ring for `func` whose largest buffer holds `bytes` bytes over
/// `nranks` ranks, with `max` rings built: one per [`GPU_CHANNEL_MIN_BYTES`] of the size, and
/// above [`GPU_RING_TRIM_FLOOR`] channels only as many as give each channel
/// [`ring_share_min`] of the data it forwards.
fn ring_channels(func: Func, bytes: usize, nranks: usize, max: usize) -> usize {
    let by_size = bytes.div_ceil(GPU_CHANNEL_MIN_BYTES).clamp(1, max.max(1));
    let share = match func {
        Func::AllReduce | Func::AllGather | Func::ReduceScatter => bytes / nranks.max(1),
        _ => bytes,
    };
    let by_share = share.div_ceil(ring_share_min(func));
    by_size.min(by_share.max(GPU_RING_TRIM_FLOOR))
}

/// Whether a GPU all-reduce of `bytes` bytes per rank runs the one-shot LL kernel
/// (`kernels/ll.cuh`) rather than the ring: see [`ll_allowed`].
pub(crate) fn gpu_ll(core: &Core, func: Func, bytes: usize) -> bool {
    ll_allowed(core.proto.as_ref(), func, bytes)
}

/// Whether an all-reduce of `bytes` bytes per rank runs the one-shot LL kernel under
/// `NCCL_PROTO` (`proto`, parsed): when it allows LL for AllReduce and the size is at most
/// [`LL_AUTO_MAX_BYTES`], or at any size when it leaves Simple out (rnccl's rings run Simple;
/// LL128 is not implemented and runs as Simple).
pub(crate) fn ll_allowed(proto: Option<&AlgoProtoList>, func: Func, bytes: usize) -> bool {
    if func != Func::AllReduce {
        return false;
    }
    let allows = |p: &str| proto.is_none_or(|l| l.allows("AllReduce", p, &PROTOCOLS));
    allows("LL") && (bytes <= LL_AUTO_MAX_BYTES || !allows("Simple"))
}

/// The sizes (largest buffer, bytes) at which each collective runs the direct kernel
/// (`kernels/direct.cuh`) rather than the ring (`None`: never), from measurements on 2×H200
/// and 4×H200 against NCCL 2.28.9 (perf/gpu_midsize.sh, busbw ÷ NCCL's, one process per GPU,
/// 128 blocks):
/// - all-reduce above the one-shot LL kernel's sizes: on 2 GPUs 1.46 / 1.29 / 1.26 / 1.21 /
///   1.26 at 2 / 4 / 8 / 16 / 32 MB, on 4 GPUs 1.70 / 1.29 / 1.10 / 1.04 / 1.04 (2026-11-27);
///   above, `rnccl bench -g N` against the ring in the same call (2026-11-28): on 2 GPUs 64 MB
///   to 1 GB in 209 / 400 / 777 / 1526 / 3009 µs where the ring took 248 / 455 / 864 / 1618 /
///   3144 (NCCL 249 / 468 / 895 / 1699 / 3256), on 4 GPUs 32 MB to 1 GB in 174 / 315 / 609 /
///   1195 / 2361 / 4691 µs, the ring 186 / 344 / 631 / 1234 / 2403 / 4650;
/// - reduce-scatter up to 32 MiB: on 2 GPUs 1.23 / 1.31 / 1.30 / 1.15 / 1.03, on 4 GPUs 1.74 /
///   1.64 / 1.26 / 1.11 / 0.98 (the ring 0.91 at 32 MB) (2026-11-27); from 64 MB the ring is
///   faster (4 GPUs: 186 against 218 µs at 64 MB, 648 against 730 at 256 MB, 2026-11-28);
/// - all-gather at every size: on 2 GPUs 1.71 / 1.67 / 1.59 / 1.50 / 1.32 up to 32 MB, on 4
///   GPUs 2.20 / 1.83 / 1.40 / 1.26 / 1.12 (2026-11-27); above (2026-11-28), on 2 GPUs 64 MB to
///   1 GB in 125 / 230 / 433 / 855 / 1676 µs where the ring took 151 / 260 / 483 / 857 / 1663
///   (NCCL 156 / 288 / 546 / 1044 / 1981), on 4 GPUs 64 MB to 1 GB in 175 / 331 / 624 / 1208 /
///   2366, the ring 191 / 342 / 655 / 1262 / 2407;
/// - all-gather, reduce-scatter, broadcast and all-to-all from the first byte: from 32 B to
///   512 KB 1.3-2.0× NCCL on 2 GPUs, 2.1-3.4× on 4 where the rings and point-to-point were
///   1.0-2.0 and 1.4-3.0 (2026-11-28);
/// - all-to-all on 2 GPUs up to 64 MiB: 1.33 / 1.24 / 1.26 / 1.39 / 1.40 / 1.12 at 1 / 2 / 4
///   / 8 / 16 / 32 MB where point-to-point was 0.62 / 0.62 / 0.75 / 0.85 / 0.91 / 0.94; above,
///   point-to-point is as fast or faster (128 MB to 1 GB in 239 / 441 / 856 / 1614 µs against
///   240 / 449 / 870 / 1735); on more GPUs at every size: 1.56 at 8 MB and 1.12 at 32 MB
///   (point-to-point 1.01 and 0.70), and on 4 GPUs 64 MB to 1 GB in 177 / 326 / 622 / 1200 /
///   2378 µs where point-to-point took 224 / 408 / 732 / 1532 / 2764 (NCCL 187 / - / 652 /
///   1272 / 2401) (2026-11-28);
/// - broadcast on 2 GPUs up to 64 MiB: 1.42 / 1.35 / 1.21 / 1.20 / 1.12 / 1.05 at 1 / 2 / 4 /
///   8 / 16 / 32 MB where the ring was 0.96 / 1.08 / 0.90 / 0.86 / 0.93 / 0.93; on more GPUs up
///   to 1 MiB only: the root stores every byte once per peer, so on 4 GPUs the direct kernel
///   fell to 1.31× at 2 MB and 0.57× at 8 MB where the ring ran 1.79× and 0.79×
///   (2026-11-28).
///
/// Once kernels read their programs from device memory (2026-11-29, `rnccl bench -g 2` with
/// and without `NCCL_ALGO=Ring` in one call, two rounds, µs) the rings lost about 4 µs per
/// kernel, and on 2 GPUs they win back two ranges:
/// - reduce-scatter outside 4-16 MiB: 1 KB to 1 MB in 9.1 / 9.1 / 9.2 / 10.2 / 11.9 / 12.3
///   where the direct kernel took 10.4 / 10.5 / 11.1 / 12.4 / 12.5 / 13.9 (1 / 4 / 16 / 64 /
///   256 / 1024 KB), 2 MB in 14.0 against 15.4, 32 MB in 75.6 against 87.5; the direct kernel
///   keeps 8 and 16 MB (27.1 against 28.8-29.3, 44.9-45.4 against 48.7), 4 MB is even (19.3);
/// - broadcast up to 16 KiB: 7.3-8.5 against 9.1-9.5.
fn direct_sizes(func: Func, nranks: usize) -> Option<std::ops::RangeInclusive<usize>> {
    match func {
        Func::AllReduce => Some(LL_AUTO_MAX_BYTES + 1..=usize::MAX),
        Func::AllGather => Some(1..=usize::MAX),
        Func::ReduceScatter if nranks <= 2 => Some((4 << 20) + 1..=16 << 20),
        Func::ReduceScatter => Some(1..=32 << 20),
        Func::AllToAll if nranks <= 2 => Some(1..=64 << 20),
        Func::AllToAll => Some(1..=usize::MAX),
        Func::Broadcast if nranks <= 2 => Some((16 << 10) + 1..=64 << 20),
        Func::Broadcast => Some(1..=1 << 20),
        _ => None,
    }
}

/// Whether `func` with `bytes` in its largest buffer over `nranks` ranks is in the direct
/// kernel's window ([`direct_sizes`]).
fn direct_window(func: Func, bytes: usize, nranks: usize) -> bool {
    direct_sizes(func, nranks).is_some_and(|r| r.contains(&bytes))
}

/// Whether a GPU collective of [`direct_window`]'s functions whose largest buffer holds `bytes`
/// bytes runs the direct kernel rather than the ring: inside [`direct_window`] (an all-reduce
/// the LL kernel takes runs that), when `NCCL_PROTO` allows Simple for the function and
/// `NCCL_ALGO` is unset (setting it, e.g. to Ring, runs the rings it names). The caller checks
/// that the communicator has the direct areas; every rank decides alike.
pub(crate) fn gpu_direct(core: &Core, func: Func, bytes: usize) -> bool {
    direct_allowed(
        core.algo_knob.as_deref(),
        core.proto.as_ref(),
        func,
        bytes,
        core.nranks,
    )
}

/// [`gpu_direct`] for the knobs `NCCL_ALGO` (`algo`, as set) and `NCCL_PROTO` (`proto`,
/// parsed).
pub(crate) fn direct_allowed(
    algo: Option<&str>,
    proto: Option<&AlgoProtoList>,
    func: Func,
    bytes: usize,
    nranks: usize,
) -> bool {
    let simple = proto.is_none_or(|l| l.allows(func.nccl_name(), "Simple", &PROTOCOLS));
    direct_window(func, bytes, nranks)
        && algo.is_none()
        && simple
        && !ll_allowed(proto, func, bytes)
}

/// Whether a GPU collective of `func` whose largest buffer holds `bytes` bytes runs a
/// symmetric kernel (`kernels/symmetric.cuh`) when its buffers lie in symmetric windows (the
/// caller checks that, and the kernel's existence and the peer access): when `NCCL_ALGO` is
/// unset, `NCCL_PROTO` allows Simple for the function and the one-shot LL kernel does not take
/// it. Unlike the direct kernel's ([`direct_sizes`]) this holds at every size: the symmetric
/// kernels move every byte once, from the caller's buffer into the caller's buffer, where the
/// direct kernel and the rings also store it into a peer's slot and copy it out again.
pub(crate) fn gpu_sym(core: &Core, func: Func, bytes: usize) -> bool {
    sym_allowed(core.algo_knob.as_deref(), core.proto.as_ref(), func, bytes)
}

/// [`gpu_sym`] for the knobs `NCCL_ALGO` (`algo`, as set) and `NCCL_PROTO` (`proto`, parsed).
pub(crate) fn sym_allowed(
    algo: Option<&str>,
    proto: Option<&AlgoProtoList>,
    func: Func,
    bytes: usize,
) -> bool {
    let simple = proto.is_none_or(|l| l.allows(func.nccl_name(), "Simple", &PROTOCOLS));
    algo.is_none() && simple && !ll_allowed(proto, func, bytes)
}

/// The CPU tuning model of the communicator whose rank `i` is bootstrap rank `net_rank[i]`.
pub(crate) fn cpu_model(
    net: &BootstrapNet,
    net_rank: &[usize],
    nchannels: usize,
    geo: Geometry,
    algo: Option<AlgoProtoList>,
) -> Model {
    let mut hosts: Vec<u64> = net_rank.iter().map(|&r| net.peers()[r].host_hash).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let input = CpuTuneInput {
        nranks: net_rank.len(),
        nnodes: hosts.len(),
        nchannels,
        chunk_bytes: geo.chunk_bytes(),
    };
    let params = TuneParams {
        algo,
        ..TuneParams::defaults()
    };
    Model::cpu(&input, &params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_direct_window_holds_the_mid_sizes_of_five_collectives() {
        let two = |f, bytes| direct_window(f, bytes, 2);
        assert!(!two(Func::AllReduce, LL_AUTO_MAX_BYTES), "LL's sizes");
        assert!(two(Func::AllReduce, LL_AUTO_MAX_BYTES + 1));
        for f in [
            Func::AllReduce,
            Func::AllGather,
            Func::ReduceScatter,
            Func::Broadcast,
            Func::AllToAll,
        ] {
            let max = *direct_sizes(f, 2).unwrap().end();
            assert!(two(f, 8 << 20), "{f}");
            assert!(two(f, max), "{f}");
            if max < usize::MAX {
                assert!(!two(f, max + 1), "{f}: the ring's sizes");
            }
            assert!(!two(f, 0), "{f}: nothing to move");
        }
        assert!(two(Func::AllToAll, 8), "all-to-all at every size");
        assert!(two(Func::AllReduce, 8 << 30) && two(Func::AllGather, 8 << 30));
        assert!(
            !two(Func::ReduceScatter, 64 << 20) && !two(Func::ReduceScatter, 32 << 20),
            "the ring's reduce-scatter from 32 MB on 2 GPUs"
        );
        assert!(
            !two(Func::ReduceScatter, 1 << 20) && !two(Func::ReduceScatter, 4 << 20),
            "and up to 4 MB"
        );
        assert!(direct_window(Func::ReduceScatter, 32 << 20, 4));
        assert!(direct_window(Func::ReduceScatter, 8, 4));
        assert!(!two(Func::Broadcast, 16 << 10) && two(Func::Broadcast, 64 << 10));
        assert!(!two(Func::AllToAll, 128 << 20), "point-to-point on 2 GPUs");
        assert!(
            direct_window(Func::AllToAll, 1 << 30, 4),
            "the direct kernel on more"
        );
        assert!(two(Func::Broadcast, 64 << 20));
        assert!(
            !direct_window(Func::Broadcast, 2 << 20, 4),
            "the root's stores multiply with its peers"
        );
        assert!(direct_window(Func::Broadcast, 1 << 20, 4));
        for f in [
            Func::Send,
            Func::Recv,
            Func::Reduce,
            Func::Gather,
            Func::Scatter,
        ] {
            assert!(!two(f, 8 << 20), "{f}");
        }
    }
    #[test]
    fn two_gpu_ranks_exchange_small_all_reduces() {
        let slot = 512 << 10;
        let ex = |algo, func, bytes, n| gpu_exchange(algo, func, bytes, n, slot);
        assert!(ex(None, Func::AllReduce, 8, 2));
        assert!(ex(None, Func::AllReduce, GPU_EXCHANGE_MAX_BYTES, 2));
        assert!(
            !ex(None, Func::AllReduce, GPU_EXCHANGE_MAX_BYTES + 1, 2),
            "the ring's channels"
        );
        assert!(
            !gpu_exchange(None, Func::AllReduce, 4096, 2, 2048),
            "more than a slot"
        );
        assert!(!ex(None, Func::AllReduce, 8, 3), "partners beyond the ring");
        assert!(!ex(None, Func::AllReduce, 8, 4));
        assert!(!ex(None, Func::AllGather, 8, 2));
        assert!(!ex(None, Func::Broadcast, 8, 2));
        assert!(!ex(Some("Ring"), Func::AllReduce, 8, 2));
        assert!(!ex(Some("^Tree"), Func::AllReduce, 8, 2));
        assert!(!ex(Some("allreduce:ring"), Func::AllReduce, 8, 2));
        assert!(ex(Some("Tree"), Func::AllReduce, 8, 2));
        assert!(ex(Some("allgather:ring"), Func::AllReduce, 8, 2));
    }

    #[test]
    fn large_rings_trim_channels_whose_shares_are_small() {
        let mb = |m: usize| m << 20;
        // 4 GPUs, 64 rings: 64 MB moves 512 KiB of each rank's chunk on 32 channels.
        assert_eq!(ring_channels(Func::AllGather, mb(64), 4, 64), 32);
        assert_eq!(ring_channels(Func::ReduceScatter, mb(64), 4, 64), 32);
        assert_eq!(ring_channels(Func::AllReduce, mb(64), 4, 64), 32);
        assert_eq!(ring_channels(Func::AllReduce, mb(128), 4, 64), 64);
        assert_eq!(ring_channels(Func::AllReduce, mb(1024), 4, 64), 64);
        assert_eq!(ring_channels(Func::Broadcast, mb(16), 4, 64), 16);
        assert_eq!(ring_channels(Func::Broadcast, mb(32), 4, 64), 32);
        assert_eq!(ring_channels(Func::Broadcast, mb(128), 4, 64), 64);
        // 2 GPUs from the rings' sizes up: as before.
        assert_eq!(ring_channels(Func::AllReduce, mb(64), 2, 32), 32);
        // Small sizes (a forced ring, or rings across hosts): the size alone, never below it.
        assert_eq!(ring_channels(Func::AllReduce, mb(1), 2, 32), 8);
        assert_eq!(ring_channels(Func::AllReduce, 8, 4, 64), 1);
        assert_eq!(ring_channels(Func::AllGather, mb(2), 4, 64), 16);
        assert_eq!(
            ring_channels(Func::AllReduce, mb(8), 8, 2),
            2,
            "the rings built bound it"
        );
    }
}
