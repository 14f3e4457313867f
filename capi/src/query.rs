//! Questions C asks a communicator: `ncclCommCount`, `ncclCommUserRank`, `ncclCommCuDevice`,
//! `ncclCommGetAsyncError`.

use std::ffi::c_int;

use crate::comm::*;
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// Writes `v` to `*out` after the usual checks, for the query functions.
///
/// # Safety
/// `out` NULL or writable.
pub(crate) unsafe fn put(out: *mut c_int, func: &str, what: &str, v: usize) -> Result<(), Failure> {
    check_ptr(out, func, what)?;
    // SAFETY: checked non-null and aligned; the caller passes a writable int.
    unsafe { out.write(v as c_int) };
    Ok(())
}

/// `ncclCommCount`: the number of ranks, to `*count`.
///
/// # Safety
/// `comm` as [`handle`]; `count` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(comm: ncclComm_t, count: *mut c_int) -> ncclResult_t {
    const F: &str = "ncclCommCount";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        // SAFETY: forwarded from the caller.
        unsafe { put(count, F, "count", h.nranks) }
    })
}

/// `ncclCommUserRank`: this rank, to `*rank`.
///
/// # Safety
/// `comm` as [`handle`]; `rank` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(comm: ncclComm_t, rank: *mut c_int) -> ncclResult_t {
    const F: &str = "ncclCommUserRank";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        // SAFETY: forwarded from the caller.
        unsafe { put(rank, F, "rank", h.rank) }
    })
}

/// `ncclCommCuDevice`: the rank's CUDA device ordinal, to `*device`.
///
/// # Safety
/// `comm` as [`handle`]; `device` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCuDevice(comm: ncclComm_t, device: *mut c_int) -> ncclResult_t {
    const F: &str = "ncclCommCuDevice";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        let d = h
            .device
            .ok_or_else(|| Failure::usage(F, "the communicator runs on no GPU"))?;
        // SAFETY: forwarded from the caller.
        unsafe { put(device, F, "device", d) }
    })
}

/// `ncclCommGetAsyncError`: `ncclSuccess` while nothing failed after enqueueing,
/// `ncclInProgress` while a grouped initialisation waits for `ncclGroupEnd`, otherwise the
/// failure's code (its message goes to `ncclGetLastError`). When another thread is inside a
/// call on the communicator right now, only the abort flag is consulted (the error, if any,
/// shows on the next poll).
///
/// # Safety
/// `comm` as [`handle`]; `asyncError` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetAsyncError(
    comm: ncclComm_t,
    asyncError: *mut ncclResult_t,
) -> ncclResult_t {
    const F: &str = "ncclCommGetAsyncError";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(asyncError, F, "asyncError")?;
        let found = match h.state.try_lock() {
            Ok(st) => match &*st {
                State::Ready(c) => c.async_error().err().map(|e| Failure::from_error(F, &e)),
                State::Initializing => Some(Failure::new(ncclInProgress, F, "initialising")),
                State::Finalized => None,
                State::Failed(f) => Some(f.clone()),
            },
            Err(_) => None,
        };
        let code = match found {
            Some(f) if f.code != ncclInProgress => {
                crate::errors::record(&f);
                f.code
            }
            Some(f) => f.code,
            None => ncclSuccess,
        };
        // SAFETY: checked non-null and aligned; the caller passes a writable result.
        unsafe { asyncError.write(code) };
        Ok(())
    })
}
