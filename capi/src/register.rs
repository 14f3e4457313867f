//! Buffer registration: `ncclCommRegister`/`Deregister`, and the window and device-communicator
//! calls rnccl does not implement yet.

use std::ffi::{c_int, c_void};

use crate::comm::*;
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// What `ncclCommRegister` hands out.
struct Registration {
    comm: usize,
    buff: usize,
    size: usize,
}

/// `ncclCommRegister`: records `buff` (`size` bytes of device memory) and returns an opaque
/// handle for [`ncclCommDeregister`]. NCCL documents registration as an optimisation only
/// (collectives on unregistered buffers behave the same), and rnccl does not yet use it: its
/// kernels move data through its own buffers either way, so results are identical and only
/// NCCL's zero-copy speed-up is missing. The handle checks that deregistration matches.
///
/// # Safety
/// `comm` as [`handle`]; `handle` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommRegister(
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    handle_out: *mut *mut c_void,
) -> ncclResult_t {
    const F: &str = "ncclCommRegister";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(handle_out, F, "handle")?;
        if buff.is_null() || size == 0 {
            return Err(Failure::arg(
                F,
                format!("buff {buff:p} / size {size} is not a buffer"),
            ));
        }
        let r = Box::new(Registration {
            comm: h as *const ncclComm as usize,
            buff: buff as usize,
            size,
        });
        // SAFETY: checked non-null and aligned; the caller passes a writable pointer.
        unsafe { handle_out.write(Box::into_raw(r).cast()) };
        Ok(())
    })
}

/// `ncclCommDeregister`: releases a handle from [`ncclCommRegister`] of the same communicator.
///
/// # Safety
/// `comm` as [`handle`]; `handle` must be NULL or a live registration handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDeregister(
    comm: ncclComm_t,
    handle_in: *mut c_void,
) -> ncclResult_t {
    const F: &str = "ncclCommDeregister";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        let reg = handle_in.cast::<Registration>();
        check_ptr(reg, F, "handle")?;
        // SAFETY: the caller passes a live handle from ncclCommRegister (made by Box::into_raw).
        let r = unsafe { &*reg };
        if r.comm != h as *const ncclComm as usize {
            return Err(Failure::arg(
                F,
                format!(
                    "the handle of buffer {:#x} ({} bytes) was registered with another communicator",
                    r.buff, r.size
                ),
            ));
        }
        // SAFETY: as above; ownership comes back here once.
        drop(unsafe { Box::from_raw(reg) });
        Ok(())
    })
}

/// `ncclCommWindowRegister`: not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommWindowRegister(
    _comm: ncclComm_t,
    _buff: *mut c_void,
    _size: usize,
    _win: *mut ncclWindow_t,
    _winFlags: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommWindowRegister";
    guard(F, || {
        Err(Failure::unimplemented(
            F,
            "window registration (symmetric memory kernels)",
        ))
    })
}

/// `ncclCommWindowDeregister`: not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommWindowDeregister(
    _comm: ncclComm_t,
    _win: ncclWindow_t,
) -> ncclResult_t {
    const F: &str = "ncclCommWindowDeregister";
    guard(F, || {
        Err(Failure::unimplemented(
            F,
            "window registration (symmetric memory kernels)",
        ))
    })
}

/// `ncclDevCommCreate` (nccl_device/core.h): not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclDevCommCreate(
    _comm: ncclComm_t,
    _reqs: *const ncclDevCommRequirements,
    _outDevComm: *mut ncclDevComm,
) -> ncclResult_t {
    const F: &str = "ncclDevCommCreate";
    guard(F, || {
        Err(Failure::unimplemented(F, "the device API (ncclDevComm)"))
    })
}

/// `ncclDevCommDestroy` (nccl_device/core.h): not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclDevCommDestroy(
    _comm: ncclComm_t,
    _devComm: *const ncclDevComm,
) -> ncclResult_t {
    const F: &str = "ncclDevCommDestroy";
    guard(F, || {
        Err(Failure::unimplemented(F, "the device API (ncclDevComm)"))
    })
}
