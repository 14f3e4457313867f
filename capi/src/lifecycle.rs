//! A communicator's end and its children: `ncclCommFinalize`, `ncclCommDestroy`,
//! `ncclCommAbort`, `ncclCommRevoke`, `ncclCommSplit`, `ncclCommShrink`. As in NCCL, the
//! four ending calls take NULL as "nothing to do" (PyTorch's abort path calls `ncclCommAbort`
//! again on a communicator it already aborted, with NULL).

use std::ffi::c_int;

use rnccl::ShrinkMode;

use crate::comm::*;
use crate::config::parse_config;
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// `ncclCommFinalize`: finishes the communicator's connections cleanly (rnccl's shutdown of a
/// communicator); afterwards only queries and `ncclCommDestroy` work. Completes before
/// returning. NULL does nothing; a revoked communicator cannot be finalized
/// (`ncclInvalidUsage`), as in NCCL.
///
/// # Safety
/// `comm` NULL or as [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommFinalize(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommFinalize";
    guard(F, || {
        if comm.is_null() {
            return Ok(());
        }
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        let mut st = h.state();
        if let State::Ready(c) = &*st
            && c.is_revoked()
        {
            return Err(Failure::usage(
                F,
                "the communicator was revoked: destroy, shrink or split it instead",
            ));
        }
        match std::mem::replace(&mut *st, State::Finalized) {
            State::Ready(c) => {
                drop(c);
                Ok(())
            }
            State::Finalized => Ok(()),
            other => {
                let f = not_ready(F, &other);
                *st = other;
                Err(f)
            }
        }
    })
}

/// Frees a handle after its communicator is gone.
///
/// # Safety
/// `comm` came from [`handle`] and nothing else uses it.
pub(crate) unsafe fn free_handle(comm: ncclComm_t) {
    // SAFETY: the caller gives up the handle; it was made by Box::into_raw.
    let mut b = unsafe { Box::from_raw(comm) };
    b.magic = 0;
    drop(b);
}

/// `ncclCommDestroy`: closes the communicator (finalizing it first if needed) and frees the
/// handle. NULL does nothing, as in NCCL.
///
/// # Safety
/// `comm` NULL or as [`handle`]; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommDestroy";
    guard(F, || {
        if comm.is_null() {
            return Ok(());
        }
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if matches!(&*h.state(), State::Initializing) {
            return Err(Failure::usage(
                F,
                "the communicator is still initialising (call ncclGroupEnd first)",
            ));
        }
        let old = std::mem::replace(&mut *h.state(), State::Finalized);
        drop(old);
        // SAFETY: the caller hands the handle back.
        unsafe { free_handle(comm) };
        Ok(())
    })
}

/// `ncclCommAbort`: raises the abort flag at once (an operation in flight on another thread
/// fails fast, and so do peers waiting on this rank), then drops the connections without a
/// clean shutdown and frees the handle. NULL does nothing, as in NCCL.
///
/// # Safety
/// `comm` NULL or as [`handle`]; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommAbort(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommAbort";
    guard(F, || {
        if comm.is_null() {
            return Ok(());
        }
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if let Some(a) = lock(&h.abort).as_ref() {
            a.abort();
        }
        let old = std::mem::replace(&mut *h.state(), State::Finalized);
        match old {
            State::Ready(c) => (*c).abort(),
            State::Initializing => {
                return Err(Failure::usage(
                    F,
                    "the communicator is still initialising (call ncclGroupEnd first)",
                ));
            }
            _ => {}
        }
        // SAFETY: the caller hands the handle back.
        unsafe { free_handle(comm) };
        Ok(())
    })
}

/// `ncclCommSplit`: ranks passing the same `color` form a new communicator ordered by `key`;
/// `NCCL_SPLIT_NOCOLOR` gives NULL. Every rank must call it; it blocks until they have (it is
/// not deferred by groups). The child keeps the parent's knobs; `config` is checked (NULL
/// inherits), and its knob fields are not applied to the child.
///
/// # Safety
/// `comm` as [`handle`]; `newcomm` writable; `config` as [`parse_config`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommSplit(
    comm: ncclComm_t,
    color: c_int,
    key: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const F: &str = "ncclCommSplit";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(newcomm, F, "newcomm")?;
        if color < 0 && color != NCCL_SPLIT_NOCOLOR {
            return Err(Failure::arg(F, format!("invalid color {color}")));
        }
        // SAFETY: forwarded from the caller.
        unsafe { parse_config(config, F) }?;
        let child = h.with_ready(F, |c| {
            c.split(color, key).map_err(|e| Failure::from_error(F, &e))
        })?;
        let raw = child.map_or(std::ptr::null_mut(), |c| {
            ncclComm::from_communicator(c).into_raw()
        });
        // SAFETY: checked writable.
        unsafe { newcomm.write(raw) };
        Ok(())
    })
}

/// `ncclCommRevoke`: stops the communicator's operations in flight (the abort flag is raised
/// before the communicator is locked, so a collective blocked on another thread ends at once)
/// and returns when none runs; the communicator then takes no new operations but can be shrunk,
/// split or destroyed. NULL does nothing. Completes before returning, also for non-blocking
/// communicators (whose `ncclCommGetAsyncError` then reports `ncclSuccess`).
///
/// Errors: `ncclInvalidArgument` for flags other than `NCCL_REVOKE_DEFAULT`, or a communicator
/// already revoked or finalized (as NCCL); `ncclInvalidUsage` while it initialises.
///
/// # Safety
/// `comm` NULL or as [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommRevoke(comm: ncclComm_t, revokeFlags: c_int) -> ncclResult_t {
    const F: &str = "ncclCommRevoke";
    guard(F, || {
        if comm.is_null() {
            return Ok(());
        }
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if revokeFlags != NCCL_REVOKE_DEFAULT {
            return Err(Failure::arg(
                F,
                format!("revoke flags {revokeFlags:#x}: only NCCL_REVOKE_DEFAULT (0) exists"),
            ));
        }
        if let Some(a) = lock(&h.abort).as_ref() {
            a.abort();
        }
        match &*h.state() {
            State::Ready(c) if c.is_revoked() => {
                Err(Failure::arg(F, "the communicator was already revoked"))
            }
            State::Ready(c) => c.revoke().map_err(|e| Failure::from_error(F, &e)),
            State::Finalized => Err(Failure::arg(
                F,
                "the communicator was finalized or aborted; there is nothing to revoke",
            )),
            other => Err(not_ready(F, other)),
        }
    })
}

/// `ncclCommShrink`: the ranks not in `excludeRanksList` form a new communicator, numbered in
/// the parent's order; excluded ranks do not call it. `NCCL_SHRINK_ABORT` first stops the
/// parent's operations in flight (after a peer died mid-collective); `NCCL_SHRINK_DEFAULT`
/// expects none. It works on a parent that failed, was revoked, or whose abort flag the
/// watchdog raised. The child keeps the parent's knobs; `config` is checked (NULL inherits).
/// Blocks until every rank that stays has called it.
///
/// Errors: `ncclInvalidArgument` for a NULL list with a positive count, a negative count, a
/// rank out of range or listed twice, this rank in the list, or unknown flags;
/// `ncclInvalidUsage` when ranks that stay pass different lists or (default mode) operations
/// still run; `ncclRemoteError` for a rank that stays but does not answer.
///
/// # Safety
/// `comm` as [`handle`]; `excludeRanksList` readable for `excludeRanksCount` ints; `newcomm`
/// writable; `config` as [`parse_config`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommShrink(
    comm: ncclComm_t,
    excludeRanksList: *mut c_int,
    excludeRanksCount: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
    shrinkFlags: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommShrink";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(newcomm, F, "newcomm")?;
        let mode = match shrinkFlags {
            NCCL_SHRINK_DEFAULT => ShrinkMode::Default,
            NCCL_SHRINK_ABORT => ShrinkMode::Abort,
            f => {
                return Err(Failure::arg(
                    F,
                    format!("shrink flags {f:#x}: use NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT"),
                ));
            }
        };
        let count = usize::try_from(excludeRanksCount).map_err(|_| {
            Failure::arg(
                F,
                format!("excludeRanksCount {excludeRanksCount} is negative"),
            )
        })?;
        let list: &[c_int] = if count == 0 {
            &[]
        } else {
            check_ptr(excludeRanksList, F, "excludeRanksList")?;
            // SAFETY: non-null and aligned; the caller promises `count` readable ints.
            unsafe { std::slice::from_raw_parts(excludeRanksList, count) }
        };
        let exclude = list
            .iter()
            .map(|&r| {
                usize::try_from(r).map_err(|_| {
                    Failure::arg(F, format!("rank {r} in excludeRanksList is negative"))
                })
            })
            .collect::<Result<Vec<usize>, Failure>>()?;
        // SAFETY: forwarded from the caller.
        unsafe { parse_config(config, F) }?;
        if mode == ShrinkMode::Abort
            && let Some(a) = lock(&h.abort).as_ref()
        {
            a.abort();
        }
        let child = match &*h.state() {
            State::Ready(c) => c
                .shrink(&exclude, mode)
                .map_err(|e| Failure::from_error(F, &e)),
            other => Err(not_ready(F, other)),
        }?;
        let raw = ncclComm::from_communicator(child).into_raw();
        // SAFETY: checked writable.
        unsafe { newcomm.write(raw) };
        Ok(())
    })
}
