//! A host model of the direct send/receive (`kernels/symmetric.cuh` `p2p_run`, `SendRecv_ST`):
//! the argument block decoded as the kernel reads it, each block's entry and exit barrier on
//! the symmetric flags of every peer (the symmetric kernels' own, [`super::sym::barrier`]),
//! piece b of every send of this rank stored straight into the receiving rank's buffer (its
//! own first, then from the next rank on), the
//! block's operation count and the traffic counters. The grid collapses into one thread per
//! rank that runs its blocks in order, as [`super::sym`] does.

use std::sync::atomic::Ordering;

use super::ll::{decode, finish};
use super::ptr;
use super::sync::word;
use crate::device::cuda::abi::{DirectMode, SYM_COUNT_WORD};
use crate::error::{Error, Result};
use crate::exec::gpu::ll::SYM_PIECE_ALIGN;

/// Bytes of each block's piece of a send of `bytes` bytes over `blocks` blocks (`p2p_unit`,
/// kernels/symmetric.cuh): an equal share, rounded up to [`SYM_PIECE_ALIGN`] where it is that
/// large, to 16 below.
fn p2p_unit(bytes: u64, blocks: u32) -> u64 {
    let even = bytes.div_ceil(u64::from(blocks.max(1)));
    let align = match even >= SYM_PIECE_ALIGN as u64 {
        true => SYM_PIECE_ALIGN as u64,
        false => 16,
    };
    even.next_multiple_of(align).max(16)
}

/// Runs the `SendRecv_ST` kernel of `args` (its argument block) on `blocks` blocks as
/// `rnccl_direct_u8_sum` would, returning when it finished or stopped (what went wrong is in
/// the header's report).
///
/// # Safety
/// Every address in `args` is a host pointer to live memory while this runs: for every rank r
/// with `send_bytes[r] > 0`, `peer_src[r]` and `peer_dst[r]` for that many bytes (the
/// destination written by no one else while this runs), the direct areas' flags (touched by
/// others only atomically), the state, the connection ends' counters and the control block.
///
/// Errors: [`Error::Internal`] when the block does not decode or is not `SendRecv_ST`'s.
pub(crate) unsafe fn run(args: &[u8], blocks: u32) -> Result<()> {
    let (h, a) = decode(args)?;
    if a.mode != DirectMode::SymSendRecv as u32 {
        return Err(Error::Internal(format!(
            "mode {} is not the direct send/receive",
            a.mode
        )));
    }
    // SAFETY: the state and the control block are live (caller's contract).
    let guard = unsafe { word(a.state + 8) }.load(Ordering::Relaxed);
    // SAFETY: as above.
    unsafe { word(h.ops) }.store(a.seq, Ordering::Relaxed);
    for b in 0..blocks {
        // SAFETY: the state holds the counts (caller's contract).
        let counted = unsafe { word(a.state + 8 * (SYM_COUNT_WORD as u64 + u64::from(b))) };
        let count = counted.load(Ordering::Relaxed);
        // SAFETY: caller's contract (flags, control block).
        let entered = unsafe { super::sym::barrier(&h, &a, b, 2 * count + 1) }.is_ok();
        let n = a.nranks as usize;
        for r in (0..n)
            .map(|j| (h.rank as usize + j) % n)
            .filter(|_| entered)
        {
            let bytes = a.send_bytes[r];
            let unit = p2p_unit(bytes, blocks);
            let start = bytes.min(u64::from(b) * unit);
            let end = bytes.min(start + unit);
            if end > start {
                // SAFETY: both buffers hold `bytes` bytes (caller's contract); the ranges
                // belong to different ranks' buffers, or are the same when a rank sends to
                // itself in place (`copy` allows the overlap).
                unsafe {
                    std::ptr::copy(
                        ptr(a.peer_src[r] + start),
                        ptr(a.peer_dst[r] + start),
                        (end - start) as usize,
                    )
                };
            }
        }
        if entered {
            // SAFETY: caller's contract.
            let _ = unsafe { super::sym::barrier(&h, &a, b, 2 * count + 2) };
        }
        counted.store(count + 1, Ordering::Relaxed);
    }
    // SAFETY: caller's contract (counters, state, control block).
    unsafe {
        finish(&h, &a, guard, |r, way| match way {
            0 => a.send_bytes[r],
            _ => a.recv_bytes[r],
        })
    };
    // The last block numbers the communicator's next direct kernel (RNCCL_KEY_WORD).
    // SAFETY: the state is live (caller's contract).
    unsafe { super::registered::end(args) }
}
