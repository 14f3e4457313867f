//! NCCL 2.29's suspension and memory statistics: `ncclCommSuspend`, `ncclCommResume`,
//! `ncclCommMemStats` (what memory dashboards read).

use std::ffi::c_int;

use crate::comm::*;
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// `ncclCommSuspend`: the communicator takes no operations until `ncclCommResume`; with
/// `NCCL_SUSPEND_MEM` its GPU scratch is freed now (`ncclStatGpuMemSuspend` bytes).
///
/// Errors: `ncclInvalidArgument` for unknown flags; `ncclInvalidUsage` when already suspended
/// or while an operation still runs on its GPU.
///
/// # Safety
/// `comm` as [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommSuspend(comm: ncclComm_t, flags: c_int) -> ncclResult_t {
    const F: &str = "ncclCommSuspend";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if flags & !NCCL_SUSPEND_MEM != 0 {
            return Err(Failure::arg(
                F,
                format!("suspend flags {flags:#x}: nccl.h defines NCCL_SUSPEND_MEM (0x1)"),
            ));
        }
        let release = flags & NCCL_SUSPEND_MEM != 0;
        h.with_ready(F, |c| {
            c.suspend(release).map_err(|e| Failure::from_error(F, &e))
        })
    })
}

/// `ncclCommResume`: the suspended communicator takes operations again.
///
/// Errors: `ncclInvalidUsage` when it is not suspended.
///
/// # Safety
/// `comm` as [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommResume(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommResume";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        h.with_ready(F, |c| c.resume().map_err(|e| Failure::from_error(F, &e)))
    })
}

/// `ncclCommMemStats`: one of the communicator's GPU memory figures: bytes that a suspension
/// frees, whether they are freed now (0/1), bytes held while it lives, and their total.
///
/// Errors: `ncclInvalidArgument` for a NULL `value` or an unknown statistic.
///
/// # Safety
/// `comm` as [`handle`]; `value` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommMemStats(
    comm: ncclComm_t,
    stat: ncclCommMemStat_t,
    value: *mut u64,
) -> ncclResult_t {
    const F: &str = "ncclCommMemStats";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(value, F, "value")?;
        let m = h.with_ready(F, |c| Ok(c.gpu_memory()))?;
        let v = match stat {
            ncclStatGpuMemSuspend => m.suspendable,
            ncclStatGpuMemSuspended => u64::from(m.suspended),
            ncclStatGpuMemPersist => m.persistent,
            ncclStatGpuMemTotal => m.total(),
            other => {
                return Err(Failure::arg(
                    F,
                    format!("statistic {other}: ncclCommMemStat_t has 0 to 3"),
                ));
            }
        };
        // SAFETY: checked non-null and aligned; the caller passes a writable u64.
        unsafe { value.write(v) };
        Ok(())
    })
}
