//! A communicator's end and its children: `ncclCommFinalize`, `ncclCommDestroy`,
//! `ncclCommAbort`, `ncclCommSplit`, `ncclCommShrink`.

use std::ffi::c_int;

use crate::comm::*;
use crate::config::parse_config;
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// `ncclCommFinalize`: finishes the communicator's connections cleanly (rnccl's shutdown of a
/// communicator); afterwards only queries and `ncclCommDestroy` work. Completes before
/// returning.
///
/// # Safety
/// `comm` as [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommFinalize(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommFinalize";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        let mut st = h.state();
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
/// handle. NULL is an error, as in NCCL.
///
/// # Safety
/// `comm` as [`handle`]; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommDestroy";
    guard(F, || {
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
/// clean shutdown and frees the handle.
///
/// # Safety
/// `comm` as [`handle`]; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommAbort(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommAbort";
    guard(F, || {
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

/// `ncclCommShrink`: not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommShrink(
    _comm: ncclComm_t,
    _excludeRanksList: *mut c_int,
    _excludeRanksCount: c_int,
    _newcomm: *mut ncclComm_t,
    _config: *mut ncclConfig_t,
    _shrinkFlags: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommShrink";
    guard(F, || {
        Err(Failure::unimplemented(F, "shrinking a communicator"))
    })
}
