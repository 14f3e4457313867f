//! A host model of the registered kernel's agreement (`kernels/registered.cuh`
//! `reg_exchange`, and the record a plain direct kernel writes in `direct_run`): the kernel's
//! number read from the state, the records written into the peers' direct areas (addresses,
//! then the word 2k, or 2k + 1 from a rank whose buffers are not registered), the waits for
//! every peer's record with abort and timeout (the failure reported, naming the peer), and the
//! verdict posted into the state with the peers' addresses. The kernels themselves are modelled
//! elsewhere ([`super::sym`]); here a kernel's end is the last block advancing the count.

use std::sync::atomic::Ordering;

use super::ll::decode;
use super::sync::{Waiting, report, wait_at_least, word};
use crate::device::cuda::abi::{
    DevConn, KEY_WORD, LL_AREA_BYTES, LL_MAX_RANKS, REG_PEERS_WORD, REG_REC_OFF, VERDICT_WORD,
};
use crate::error::Result;

/// What every block of a registered kernel runs, as block 0 decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The direct kernel: some rank's buffers are not registered.
    Direct,
    /// The symmetric kernel on every rank's input and output as mapped here (this rank's own
    /// at its index).
    Symmetric { srcs: Vec<u64>, dsts: Vec<u64> },
    /// A peer's record never came (reported); no block works.
    Failed,
}

/// The registration record in the direct area that follows the LL area at `ll_area`.
fn record(ll_area: u64) -> u64 {
    ll_area + (LL_AREA_BYTES + REG_REC_OFF) as u64
}

/// The state word `w` of a kernel whose state is at `state`.
///
/// # Safety
/// The state is live ([`word`]'s contract).
unsafe fn state<'a>(state: u64, w: usize) -> &'a std::sync::atomic::AtomicU64 {
    // SAFETY: caller's contract.
    unsafe { word(state + 8 * w as u64) }
}

/// Block 0 of a plain direct kernel of `args`: tells every peer this rank's buffers are not
/// registered for it (2k + 1).
///
/// # Safety
/// As [`exchange`].
///
/// Errors: [`crate::Error::Internal`] when the block does not decode.
pub(crate) unsafe fn plain(args: &[u8]) -> Result<()> {
    let (h, a) = decode(args)?;
    let (n, me) = (a.nranks, h.rank);
    // SAFETY: caller's contract.
    let key = unsafe { state(a.state, KEY_WORD) }.load(Ordering::Relaxed) + 1;
    for j in 1..n {
        let r = ((me + j) % n) as usize;
        // SAFETY: caller's contract (the peer's area).
        unsafe { word(record(a.out[r]) + 16) }.store(2 * key + 1, Ordering::Relaxed);
    }
    Ok(())
}

/// The registered kernel of `args` (this rank's buffers as each peer maps them in `peer_src`
/// and `peer_dst`): block 0 writes its records and collects the peers', and every block reads
/// the verdict it posted.
///
/// # Safety
/// Every address in `args` is a host pointer to live memory while this runs: the direct areas
/// (after [`LL_AREA_BYTES`], touched by others only atomically), the state, the connection
/// ends' counters and the control block.
///
/// Errors: [`crate::Error::Internal`] when the block does not decode.
pub(crate) unsafe fn exchange(args: &[u8]) -> Result<Verdict> {
    let (h, a) = decode(args)?;
    let (n, me) = (a.nranks, h.rank);
    // SAFETY: caller's contract, for every state word and area below.
    unsafe {
        let key = state(a.state, KEY_WORD).load(Ordering::Relaxed) + 1;
        for j in 1..n {
            let r = ((me + j) % n) as usize;
            word(record(a.out[r])).store(a.peer_src[r], Ordering::Relaxed);
            word(record(a.out[r]) + 8).store(a.peer_dst[r], Ordering::Relaxed);
        }
        for j in 1..n {
            let r = ((me + j) % n) as usize;
            word(record(a.out[r]) + 16).store(2 * key, Ordering::Release);
        }
        let mut verdict = 2;
        for j in 1..n {
            let r = (me + j) % n;
            let rec = record(a.inp[r as usize]);
            let mark = word(a.counts[3][r as usize] + 16);
            if let Err(code) = wait_at_least(word(rec + 16), 2 * key, &h, mark) {
                let peer = DevConn {
                    peer: r,
                    ..DevConn::default()
                };
                report(&h, code, 0, &peer, 2 * key, Waiting::Data);
                verdict = 3;
                break;
            }
            if word(rec + 16).load(Ordering::Acquire) & 1 == 1 {
                verdict = 1;
            } else {
                let at = REG_PEERS_WORD + r as usize;
                state(a.state, at).store(word(rec).load(Ordering::Relaxed), Ordering::Relaxed);
                state(a.state, at + LL_MAX_RANKS)
                    .store(word(rec + 8).load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        state(a.state, VERDICT_WORD).store(4 * key + verdict, Ordering::Release);
        // Every block: the verdict, and the addresses for the symmetric kernel.
        Ok(
            match state(a.state, VERDICT_WORD).load(Ordering::Acquire) - 4 * key {
                1 => Verdict::Direct,
                2 => {
                    let peer = |w: usize, own: u64| -> Vec<u64> {
                        (0..n as usize)
                            .map(|r| match r == me as usize {
                                true => own,
                                false => state(a.state, w + r).load(Ordering::Relaxed),
                            })
                            .collect()
                    };
                    Verdict::Symmetric {
                        srcs: peer(REG_PEERS_WORD, a.src),
                        dsts: peer(REG_PEERS_WORD + LL_MAX_RANKS, a.dst),
                    }
                }
                _ => Verdict::Failed,
            },
        )
    }
}

/// The last block of a direct kernel of `args` (any mode) as it ends: numbers the
/// communicator's next direct kernel.
///
/// # Safety
/// The state in `args` is live.
///
/// Errors: [`crate::Error::Internal`] when the block does not decode.
pub(crate) unsafe fn end(args: &[u8]) -> Result<()> {
    let (_, a) = decode(args)?;
    // SAFETY: caller's contract.
    let key = unsafe { state(a.state, KEY_WORD) };
    key.store(key.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    Ok(())
}
