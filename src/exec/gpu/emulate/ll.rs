//! A host model of the one-shot LL all-reduce (`kernels/ll.cuh` `ll_allreduce`): the argument
//! block decoded as the kernel reads it, lines stored as two 8-byte words `{data, flag}`, the
//! epoch and its half per chunk, the poll with abort and timeout, the reduction in rank order
//! and the epoch's advance. The kernel's grid collapses into one thread per rank: it stores
//! all of a chunk's lines, then reads them all, as each kernel thread does for its own lines.

use super::decode::{self, Header};
use super::ptr;
use super::sync::{Waiting, poll, report, word, word32};
use crate::device::Transforms;
use crate::device::cpu::reduce::{copy, reduce};
use crate::device::cuda::abi::{
    DevConn, LL_ARGS_BYTES, LL_CHUNK_BYTES, LL_HALF_BYTES, LL_MAX_RANKS, LlArgs, PROGRAM_BYTES,
    Status,
};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::Combine;
use std::sync::atomic::{AtomicU64, Ordering};

/// `struct LlArgs` after the header (the LL kernel's fields, and the symmetric kernels').
pub(super) struct Args {
    pub(super) src: u64,
    pub(super) dst: u64,
    pub(super) bytes: u64,
    pub(super) state: u64,
    /// The operation's number.
    pub(super) seq: u64,
    /// The direct kernel's bytes per block (symmetric kernels: of the rank's shard).
    pub(super) unit: u64,
    pub(super) nranks: u32,
    /// The direct kernel's mode.
    pub(super) mode: u32,
    pub(super) out: [u64; LL_MAX_RANKS],
    pub(super) inp: [u64; LL_MAX_RANKS],
    /// Per rank: the send end's (step, live) counters, then the receive end's.
    pub(super) counts: [[u64; LL_MAX_RANKS]; 4],
    /// Per rank: its input and output as mapped here (symmetric kernels).
    pub(super) peer_src: [u64; LL_MAX_RANKS],
    pub(super) peer_dst: [u64; LL_MAX_RANKS],
    /// Per rank: the bytes this rank sends it, and receives from it (`SendRecv_ST`).
    pub(super) send_bytes: [u64; LL_MAX_RANKS],
    pub(super) recv_bytes: [u64; LL_MAX_RANKS],
}

fn le(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The header and arguments of an `LlArgs` block, read as the kernels read them.
///
/// Errors: [`Error::Internal`] for a block of another size, or a rank out of range.
pub(super) fn decode(bytes: &[u8]) -> Result<(Header, Args)> {
    if bytes.len() != LL_ARGS_BYTES {
        return Err(Error::Internal(format!(
            "an LL argument block of {} bytes (the kernel's is {LL_ARGS_BYTES})",
            bytes.len()
        )));
    }
    let h = decode::header(&bytes[..PROGRAM_BYTES])?;
    use std::mem::offset_of;
    let nranks = le(bytes, offset_of!(LlArgs, nranks)) as u32;
    if nranks as usize > LL_MAX_RANKS || h.rank >= nranks {
        return Err(Error::Internal(format!(
            "an LL all-reduce of rank {} among {nranks}",
            h.rank
        )));
    }
    let list = |off: usize| std::array::from_fn(|r| le(bytes, off + 8 * r));
    let a = Args {
        src: le(bytes, offset_of!(LlArgs, src)),
        dst: le(bytes, offset_of!(LlArgs, dst)),
        bytes: le(bytes, offset_of!(LlArgs, bytes)),
        state: le(bytes, offset_of!(LlArgs, state)),
        seq: le(bytes, offset_of!(LlArgs, seq)),
        unit: le(bytes, offset_of!(LlArgs, unit)),
        nranks,
        mode: le(bytes, offset_of!(LlArgs, mode)) as u32,
        out: list(offset_of!(LlArgs, out)),
        inp: list(offset_of!(LlArgs, inp)),
        counts: [
            offset_of!(LlArgs, out_step),
            offset_of!(LlArgs, out_live),
            offset_of!(LlArgs, in_step),
            offset_of!(LlArgs, in_live),
        ]
        .map(list),
        peer_src: list(offset_of!(LlArgs, peer_src)),
        peer_dst: list(offset_of!(LlArgs, peer_dst)),
        send_bytes: list(offset_of!(LlArgs, send_bytes)),
        recv_bytes: list(offset_of!(LlArgs, recv_bytes)),
    };
    Ok((h, a))
}

/// Runs the LL all-reduce of `args` (its argument block) as `rnccl_ll_allreduce_<dtype>_<combine>`
/// would, returning when it finished or stopped (what went wrong is in the header's report).
///
/// # Safety
/// Every address in `args` is a host pointer to live memory while this runs: the input and
/// output for `bytes` bytes, the LL areas ([`crate::device::cuda::abi::LL_AREA_BYTES`], 8-byte
/// aligned, touched by others only atomically), the state (`u32[2]` and a `u64`), the connection ends'
/// `u64[2]` counters and the control block (with its operation words).
///
/// Errors: [`Error::Internal`] when the block does not decode.
pub(crate) unsafe fn run(args: &[u8], dtype: DataType, combine: Combine) -> Result<()> {
    let (h, a) = decode(args)?;
    let spec = h.spec(dtype, combine);
    // SAFETY: the state is a live u32[2] and u64 (caller's contract).
    let (epoch, arrived, said) =
        unsafe { (word32(a.state), word32(a.state + 4), word(a.state + 8)) };
    let epoch0 = epoch.load(Ordering::Relaxed);
    let guard = said.load(Ordering::Relaxed);
    // SAFETY: the control block's ops words are live (caller's contract).
    unsafe { word(h.ops) }.store(a.seq, Ordering::Relaxed);
    let nchunks = a.bytes.div_ceil(LL_CHUNK_BYTES as u64);
    let me = h.rank as usize;
    let es = dtype.size();
    'chunks: for c in 0..nchunks {
        let flag = epoch0.wrapping_add(1 + c as u32);
        let half = u64::from(flag & 1) * LL_HALF_BYTES as u64;
        let at0 = c * LL_CHUNK_BYTES as u64;
        let n = (LL_CHUNK_BYTES as u64).min(a.bytes - at0) as usize;
        // SAFETY: the input holds `bytes` bytes (caller's contract); copied before any output
        // is written, as each kernel thread reads its unit before storing it.
        let mine = unsafe { std::slice::from_raw_parts(ptr(a.src + at0), n) }.to_vec();
        for (i, unit) in mine.chunks(8).enumerate() {
            let mut v = [0u8; 8];
            v[..unit.len()].copy_from_slice(unit);
            let v = u64::from_le_bytes(v);
            for r in (0..a.nranks as usize).filter(|&r| r != me) {
                // SAFETY: line i of the peer's area half (caller's contract: live, atomics).
                unsafe { st_line(a.out[r] + half + 16 * i as u64, v, flag) };
            }
        }
        let mut acc = vec![0u8; n];
        let mut line = vec![0u8; n.next_multiple_of(8)];
        for r in 0..a.nranks as usize {
            let x: &[u8] = if r == me {
                &mine
            } else {
                for i in 0..n.div_ceil(8) {
                    let addr = a.inp[r] + half + 16 * i as u64;
                    // SAFETY: the receive end's live counters are u64[3] (caller's contract).
                    let mark = unsafe { word(a.counts[3][r] + 16) };
                    // SAFETY: as above, this rank's own area.
                    match unsafe { ld_line(addr, flag, &h, mark) } {
                        Ok(v) => line[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes()),
                        Err(code) => {
                            let peer = DevConn {
                                peer: r as u32,
                                ..DevConn::default()
                            };
                            // SAFETY: the control block is live (caller's contract).
                            unsafe { report(&h, code, 0, &peer, u64::from(flag), Waiting::Data) };
                            break 'chunks;
                        }
                    }
                }
                &line[..n]
            };
            let t = Transforms {
                pre: true,
                post: r + 1 == a.nranks as usize,
            };
            let count = n / es;
            // SAFETY: `acc` and `x` hold `count` elements; `acc` is both source and destination.
            unsafe {
                if r == 0 {
                    copy(&spec, t, acc.as_mut_ptr(), None, x.as_ptr(), count);
                } else {
                    let p = acc.as_mut_ptr();
                    reduce(&spec, t, p, None, p, x.as_ptr(), count);
                }
            }
        }
        // SAFETY: the output holds `bytes` bytes (caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), ptr(a.dst + at0), n) };
    }
    arrived.fetch_add(1, Ordering::AcqRel);
    epoch.store(epoch0.wrapping_add(nchunks as u32), Ordering::Relaxed);
    arrived.store(0, Ordering::Relaxed);
    // SAFETY: caller's contract (counters, state, control block).
    unsafe { finish(&h, &a, guard, |_, _| a.bytes) };
    Ok(())
}

/// The end of an LL or direct kernel (`ll_finish`, once its last block is done): adds
/// `moved(r, way)` bytes to the counters of this rank's connection ends with every peer r (way
/// 0 the send end, 1 the receive end), clears the receive end's wait mark and, unless the
/// operation was reported already (a graph replay) or a failure claimed the report, says it
/// finished.
///
/// # Safety
/// The connection ends' counters (`u64[2]`, live `u64[3]`), the state's word 1 and the control
/// block's claim and operation words are live.
pub(super) unsafe fn finish(h: &Header, a: &Args, guard: u64, moved: impl Fn(usize, usize) -> u64) {
    let me = h.rank as usize;
    for r in (0..a.nranks as usize).filter(|&r| r != me) {
        for (way, (step, live)) in [
            (a.counts[0][r], a.counts[1][r]),
            (a.counts[2][r], a.counts[3][r]),
        ]
        .into_iter()
        .enumerate()
        {
            // SAFETY: live u64[2] counters of this rank's connection ends (caller's contract).
            unsafe {
                let b = word(step + 8).load(Ordering::Relaxed) + moved(r, way);
                word(step + 8).store(b, Ordering::Relaxed);
                word(live + 8).store(b, Ordering::Relaxed);
            }
        }
        // SAFETY: as above, the receive end's live word 2.
        unsafe { word(a.counts[3][r] + 16) }.store(0, Ordering::Relaxed);
    }
    // SAFETY: the claim and ops words of the control block and the state are live (caller's
    // contract).
    unsafe {
        if a.seq > guard && word32(h.claim).load(Ordering::Acquire) == 0 {
            word(a.state + 8).store(a.seq, Ordering::Relaxed);
            word(h.ops + 8).store(a.seq, Ordering::Release);
        }
    }
}

/// Stores line `{v low, flag, v high, flag}` at `addr` (`st_line`).
///
/// # Safety
/// `addr` is a live, 8-byte aligned line of an LL area accessed only atomically.
unsafe fn st_line(addr: u64, v: u64, flag: u32) {
    let f = u64::from(flag) << 32;
    // SAFETY: caller's contract.
    unsafe {
        word(addr).store((v & 0xffff_ffff) | f, Ordering::Relaxed);
        word(addr + 8).store((v >> 32) | f, Ordering::Relaxed);
    }
}

/// Waits for the line at `addr` to carry `flag` in both halves (`ld_line`): its 8 data bytes,
/// or why it stopped waiting; a wait past the first round of polls sets `mark`.
///
/// # Safety
/// As [`st_line`]; the header's abort flag is live.
unsafe fn ld_line(
    addr: u64,
    flag: u32,
    h: &Header,
    mark: &AtomicU64,
) -> std::result::Result<u64, Status> {
    // SAFETY: caller's contract.
    let (lo, hi) = unsafe { (word(addr), word(addr + 8)) };
    let ready = || {
        let (a, b) = (lo.load(Ordering::Relaxed), hi.load(Ordering::Relaxed));
        ((a >> 32) as u32 == flag && (b >> 32) as u32 == flag)
            .then_some((a & 0xffff_ffff) | (b << 32))
    };
    // SAFETY: caller's contract (the abort flag).
    unsafe { poll(h, ready, || mark.store(1, Ordering::Relaxed)) }
}
