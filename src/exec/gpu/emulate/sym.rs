//! A host model of the symmetric kernels (`kernels/symmetric.cuh` `sym_run`): the argument
//! block decoded as the kernel reads it, each block's entry and exit barrier on the peers'
//! flags (waits with abort and timeout, the failure reported naming the peer), the piece of
//! the rank's shard each block takes, the reduction in rank order from every rank's input
//! into every rank's output, and the block's operation count. The grid collapses into one
//! thread per rank that runs its blocks in order: a block's barriers pair only with the same
//! block of the peers, which their threads reach in the same order.

use std::sync::atomic::Ordering;

use super::decode::Header;
use super::ll::{Args, decode, finish};
use super::ptr;
use super::sync::{Waiting, report, wait_at_least, word};
use crate::device::Transforms;
use crate::device::cpu::reduce::{copy, reduce};
use crate::device::cuda::abi::{DevConn, DirectMode, LL_AREA_BYTES, SYM_COUNT_WORD, SYM_FLAGS_OFF};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::Combine;

/// Block `b`'s symmetric flag in the direct area after the LL area at `ll_area`.
fn flag(ll_area: u64, b: u32) -> u64 {
    ll_area + (LL_AREA_BYTES + SYM_FLAGS_OFF) as u64 + 8 * u64::from(b)
}

/// `sym_barrier`: raises this rank's flag for block `b` to `value` in every peer's area, then
/// waits for every peer's flag for block `b` in this rank's areas to reach it.
///
/// # Safety
/// The areas' flags are live `u64`s touched only atomically; the header's abort flag, claim
/// and report are live.
pub(super) unsafe fn barrier(
    h: &Header,
    a: &Args,
    b: u32,
    value: u64,
) -> std::result::Result<(), ()> {
    let (n, me) = (a.nranks, h.rank);
    for j in 1..n {
        // SAFETY: caller's contract.
        unsafe { word(flag(a.out[((me + j) % n) as usize], b)) }.store(value, Ordering::Release);
    }
    for j in 1..n {
        let r = (me + j) % n;
        // SAFETY: caller's contract (the flag, and the receive end's live word 2 as the mark).
        let st = unsafe {
            wait_at_least(
                word(flag(a.inp[r as usize], b)),
                value,
                h,
                word(a.counts[3][r as usize] + 16),
            )
        };
        if let Err(code) = st {
            let peer = DevConn {
                peer: r,
                ..DevConn::default()
            };
            // SAFETY: caller's contract.
            unsafe { report(h, code, b, &peer, value, Waiting::Data) };
            return Err(());
        }
    }
    Ok(())
}

/// Runs the symmetric kernel of `args` (its argument block) on `blocks` blocks as
/// `rnccl_direct_<dtype>_<combine>` would, returning when it finished or stopped (what went
/// wrong is in the header's report).
///
/// # Safety
/// Every address in `args` is a host pointer to live memory while this runs: every rank's
/// input and output (`peer_src`, `peer_dst`, this rank's own among them) for the operation's
/// bytes, the direct areas' flags (after [`LL_AREA_BYTES`], touched by others only
/// atomically), the state ([`crate::device::cuda::abi::LL_STATE_BYTES`]), the connection ends'
/// counters and the control block.
///
/// Errors: [`Error::Internal`] when the block does not decode or is not a symmetric mode.
pub(crate) unsafe fn run(
    args: &[u8],
    blocks: u32,
    dtype: DataType,
    combine: Combine,
) -> Result<()> {
    let (h, a) = decode(args)?;
    let mode = [
        DirectMode::SymAllReduce,
        DirectMode::SymReduceScatter,
        DirectMode::SymAllGather,
    ]
    .into_iter()
    .find(|m| *m as u32 == a.mode)
    .ok_or_else(|| Error::Internal(format!("mode {} is not a symmetric kernel", a.mode)))?;
    let spec = h.spec(dtype, combine);
    let es = dtype.size() as u64;
    let (n, me) = (u64::from(a.nranks), u64::from(h.rank));
    let (ar, ag) = (
        mode == DirectMode::SymAllReduce,
        mode == DirectMode::SymAllGather,
    );
    let shard = if ar {
        a.bytes.div_ceil(n).next_multiple_of(16)
    } else {
        a.bytes
    };
    let total = if ar { a.bytes } else { a.bytes * n };
    // SAFETY: the state and the control block are live (caller's contract).
    let guard = unsafe { word(a.state + 8) }.load(Ordering::Relaxed);
    // SAFETY: as above.
    unsafe { word(h.ops) }.store(a.seq, Ordering::Relaxed);
    for b in 0..blocks {
        // SAFETY: the state holds the counts (caller's contract).
        let counted = unsafe { word(a.state + 8 * (SYM_COUNT_WORD as u64 + u64::from(b))) };
        let count = counted.load(Ordering::Relaxed);
        // SAFETY: caller's contract (flags, control block).
        let entered = unsafe { barrier(&h, &a, b, 2 * count + 1) }.is_ok();
        let start = me * shard + shard.min(u64::from(b) * a.unit);
        let end = (me * shard + shard).min(start + a.unit).min(total);
        if entered && end > start {
            let len = (end - start) as usize;
            let srcs: Vec<u64> = if ag {
                vec![a.src + (start - me * shard)]
            } else {
                (0..n as usize).map(|r| a.peer_src[r] + start).collect()
            };
            // Every input is read before any output is written, as each kernel thread loads
            // its packs before storing them (an in-place buffer is its own source).
            let mut acc = vec![0u8; len];
            for (k, &src) in srcs.iter().enumerate() {
                // SAFETY: every rank's input holds this piece (caller's contract).
                let x = unsafe { std::slice::from_raw_parts(ptr(src), len) };
                let t = Transforms {
                    pre: true,
                    post: k + 1 == srcs.len(),
                };
                let count = len / es as usize;
                // SAFETY: `acc` and `x` hold `count` elements; `acc` is source and destination.
                unsafe {
                    if ag {
                        acc.copy_from_slice(x);
                    } else if k == 0 {
                        copy(&spec, t, acc.as_mut_ptr(), None, x.as_ptr(), count);
                    } else {
                        let p = acc.as_mut_ptr();
                        reduce(&spec, t, p, None, p, x.as_ptr(), count);
                    }
                }
            }
            let own = if ar || ag {
                a.dst + start
            } else {
                a.dst + (start - me * shard)
            };
            let mut dsts = vec![own];
            if ar || ag {
                dsts.extend((1..n).map(|j| a.peer_dst[((me + j) % n) as usize] + start));
            }
            for d in dsts {
                // SAFETY: every rank's output holds this piece (caller's contract); no other
                // rank writes it (only this rank touches its shard).
                unsafe { std::ptr::copy(acc.as_ptr(), ptr(d), len) };
            }
        }
        if entered {
            // SAFETY: caller's contract.
            let _ = unsafe { barrier(&h, &a, b, 2 * count + 2) };
        }
        counted.store(count + 1, Ordering::Relaxed);
    }
    let mine = shard.min(total - total.min(me * shard));
    // SAFETY: caller's contract (counters, state, control block).
    unsafe {
        finish(&h, &a, guard, |r, way| {
            let theirs = shard.min(total - total.min(r as u64 * shard));
            if ar {
                mine + theirs
            } else if (way == 0) == ag {
                mine
            } else {
                theirs
            }
        })
    };
    // The last block numbers the communicator's next direct kernel (RNCCL_KEY_WORD).
    // SAFETY: the state is live (caller's contract).
    unsafe { super::registered::end(args) }
}
