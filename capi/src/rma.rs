//! One-sided operations (nccl.h 2.30): `ncclPutSignal`, `ncclSignal`, `ncclWaitSignal`, over
//! windows of a GPU communicator whose ranks share a host (`rnccl::Communicator::put_signal`).
//! Every call checks its arguments at once, as NCCL's `rmaTaskAppend` does (context, signal
//! index and flags must be 0; a peer in range; a window of this communicator), then runs at once
//! or, inside a group, at `ncclGroupEnd` in call order with the group's other operations.

use std::ffi::{c_int, c_uint, c_void};

use rnccl::{Communicator, SignalWait};

use crate::comm::{handle, ncclComm_t};
use crate::errors::{Failure, check_ptr, guard};
use crate::group::{Queued, Work, note_failure, submit};
use crate::register::{Registration, owned};
use crate::types::*;

/// A one-sided operation, checked, waiting to run.
pub enum OneSided {
    /// `ncclPutSignal`: `bytes` bytes from `src` to byte `offset` of `peer`'s range of `win`.
    Put {
        /// Source, a device address.
        src: u64,
        /// Bytes to store.
        bytes: usize,
        /// The rank stored into and signalled.
        peer: usize,
        /// The window (a live handle of the communicator's).
        win: *const Registration,
        /// Byte offset in the peer's range.
        offset: usize,
    },
    /// `ncclSignal` to `peer`.
    Signal {
        /// The rank signalled.
        peer: usize,
    },
    /// `ncclWaitSignal`.
    Wait(Vec<SignalWait>),
}

impl OneSided {
    /// Enqueues the operation on `stream` of `c` (`func` names the nccl.h call for errors).
    ///
    /// Errors: the window's failure ([`Registration::device_window`]); rnccl's errors.
    ///
    /// # Safety
    /// The buffers, window and stream the nccl.h call was given are still valid.
    pub unsafe fn run(
        &self,
        c: &Communicator,
        stream: cudaStream_t,
        func: &str,
    ) -> Result<(), Failure> {
        let s = stream.cast();
        // SAFETY: the caller's contract for the buffers and the stream; the window handle was
        // checked live and of this communicator when the operation was queued.
        let r = unsafe {
            match self {
                &OneSided::Put {
                    src,
                    bytes,
                    peer,
                    win,
                    offset,
                } => {
                    let w = (*win).device_window(func)?;
                    c.put_signal(src, bytes, peer, w, offset, s)
                }
                &OneSided::Signal { peer } => c.signal(peer, s),
                OneSided::Wait(waits) => c.wait_signal(waits, s),
            }
        };
        r.map_err(|e| Failure::from_error(func, &e))
    }
}

/// The checks every one-sided call shares: the communicator, `ctx`, `sigIdx` and `flags` (all
/// 0 in NCCL 2.30), and a peer in range.
///
/// # Safety
/// `comm` as [`handle`].
unsafe fn common<'a>(
    func: &str,
    comm: ncclComm_t,
    peer: c_int,
    sig_idx: c_int,
    ctx: c_int,
    flags: c_uint,
) -> Result<(&'a crate::comm::ncclComm, usize), Failure> {
    // SAFETY: forwarded from the caller.
    let h = unsafe { handle(comm, func) }?;
    for (what, v) in [
        ("ctx", ctx as i64),
        ("sigIdx", sig_idx as i64),
        ("flags", flags as i64),
    ] {
        if v != 0 {
            return Err(Failure::arg(
                func,
                format!("{what} {v} is invalid: NCCL 2.30 defines only 0"),
            ));
        }
    }
    let peer = usize::try_from(peer)
        .ok()
        .filter(|&p| p < h.nranks)
        .ok_or_else(|| {
            Failure::arg(
                func,
                format!(
                    "peer {peer} is not a rank of this communicator (ranks are 0..{})",
                    h.nranks - 1
                ),
            )
        })?;
    Ok((h, peer))
}

/// Runs `body`'s checks and queues or runs its operation, recording a failure for the group.
fn call(func: &'static str, body: impl FnOnce() -> Result<Queued, Failure>) -> ncclResult_t {
    guard(func, || {
        let r = body().and_then(|q| submit(q, func));
        if let Err(f) = &r {
            note_failure(f);
        }
        r
    })
}

/// `ncclPutSignal`: stores `count` elements of `datatype` from `localbuff` (this rank's GPU
/// memory) at byte `peerWinOffset` of `peer`'s range of window `peerWin`, then signals `peer`
/// (whose `ncclWaitSignal` for it returns once the bytes are in place), on `stream`.
///
/// Errors: `ncclInvalidArgument` for a nonzero `sigIdx`, `ctx` or `flags`, a peer out of range,
/// a NULL window or one of another communicator, a NULL `localbuff` with a nonzero count, an
/// invalid data type, or bytes past the end of the peer's range; `ncclInvalidUsage` when the
/// communicator cannot run one-sided operations (ranks on several hosts, no P2P, no GPU) or the
/// window's ranges are not all mapped (the message says why).
///
/// # Safety
/// `comm` a live communicator; `localbuff` `count` elements of device memory valid until the
/// stream has run the put; `peerWin` NULL or a live window of `comm`; `stream` a stream of the
/// communicator's GPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclPutSignal(
    localbuff: *const c_void,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
    peerWin: ncclWindow_t,
    peerWinOffset: usize,
    sigIdx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    const F: &str = "ncclPutSignal";
    call(F, || {
        // SAFETY: forwarded from the caller.
        let (h, peer) = unsafe { common(F, comm, peer, sigIdx, ctx, flags) }?;
        let dt = data_type(datatype).map_err(|m| Failure::arg(F, m))?;
        // SAFETY: forwarded from the caller.
        let win = unsafe { owned(F, comm, peerWin.cast(), true) }?;
        let bytes = count.checked_mul(dt.size()).ok_or_else(|| {
            Failure::arg(F, format!("{count} elements of {dt} overflow a byte count"))
        })?;
        if localbuff.is_null() && bytes > 0 {
            return Err(Failure::arg(F, "localbuff is NULL"));
        }
        let op = OneSided::Put {
            src: localbuff as u64,
            bytes,
            peer,
            win,
            offset: peerWinOffset,
        };
        Ok(queued(h, op, stream))
    })
}

/// `ncclSignal`: adds one to `peer`'s count of this rank's signals on `stream`, after what the
/// stream ran before.
///
/// Errors: as [`ncclPutSignal`], less those of the window and buffer.
///
/// # Safety
/// `comm` a live communicator; `stream` a stream of its GPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclSignal(
    peer: c_int,
    sigIdx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    const F: &str = "ncclSignal";
    call(F, || {
        // SAFETY: forwarded from the caller.
        let (h, peer) = unsafe { common(F, comm, peer, sigIdx, ctx, flags) }?;
        Ok(queued(h, OneSided::Signal { peer }, stream))
    })
}

/// `ncclWaitSignal`: holds `stream` until, for each of the `nDesc` descriptors, rank `peer` has
/// signalled `opCnt` more times than earlier waits consumed, then consumes those signals. A wait
/// longer than the communicator's timeout fails through `ncclCommGetAsyncError`, naming the rank.
///
/// Errors: `ncclInvalidArgument` for a NULL `signalDescs`, `nDesc` below 1, or a descriptor
/// with `opCnt` below 1, a peer out of range or a nonzero `sigIdx` or `ctx`; as [`ncclSignal`].
///
/// # Safety
/// `comm` a live communicator; `signalDescs` NULL or `nDesc` readable descriptors; `stream` a
/// stream of the communicator's GPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclWaitSignal(
    nDesc: c_int,
    signalDescs: *mut ncclWaitSignalDesc_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    const F: &str = "ncclWaitSignal";
    call(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(signalDescs, F, "signalDescs")?;
        let n = usize::try_from(nDesc)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| Failure::arg(F, format!("nDesc {nDesc}: at least one descriptor")))?;
        // SAFETY: checked non-null; the caller promises nDesc readable descriptors.
        let descs = unsafe { std::slice::from_raw_parts(signalDescs, n) };
        let mut waits = Vec::with_capacity(n);
        for (i, d) in descs.iter().enumerate() {
            let at = format!("{F} (descriptor {i})");
            // SAFETY: forwarded from the caller.
            let (_, peer) = unsafe { common(&at, comm, d.peer, d.sigIdx, d.ctx, 0) }?;
            let count = u64::try_from(d.opCnt)
                .ok()
                .filter(|&c| c > 0)
                .ok_or_else(|| Failure::arg(&at, format!("opCnt {} (at least 1)", d.opCnt)))?;
            waits.push(SignalWait { peer, count });
        }
        Ok(queued(h, OneSided::Wait(waits), stream))
    })
}

/// The queue entry of `op` on `h`.
fn queued(h: &crate::comm::ncclComm, op: OneSided, stream: cudaStream_t) -> Queued {
    Queued {
        comm: h,
        work: Work::OneSided(op),
        stream,
    }
}
