//! `ncclMemAlloc`/`ncclMemFree`: device memory from the CUDA driver (`cuMemAlloc`) on the
//! calling thread's current device.

use std::ffi::c_void;

use cudarc::driver::sys;

use crate::comm::{cuda_ok, current_device};
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// Makes sure a context is current on the calling thread: the current one, or the primary
/// context of device 0 (what the CUDA runtime does on first use).
///
/// Errors: `ncclSystemError` without a usable GPU; `ncclUnhandledCudaError` from the driver.
fn ensure_context(func: &str) -> Result<(), Failure> {
    current_device(func)?;
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is initialised (current_device succeeded); writes one handle.
    let r = unsafe { sys::cuCtxGetCurrent(&mut ctx) };
    cuda_ok(r, func, "cuCtxGetCurrent")?;
    if !ctx.is_null() {
        return Ok(());
    }
    // SAFETY: device 0 exists (the probe found at least one GPU); writes one handle.
    let r = unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, 0) };
    cuda_ok(r, func, "cuDevicePrimaryCtxRetain(0)")?;
    // SAFETY: `ctx` is the retained primary context.
    let r = unsafe { sys::cuCtxSetCurrent(ctx) };
    cuda_ok(r, func, "cuCtxSetCurrent")
}

/// `ncclMemAlloc`: `size` bytes of device memory on the current device, to `*ptr`.
///
/// Returns `ncclInvalidArgument` for NULL `ptr`, `ncclSystemError` on a host without a
/// usable GPU, `ncclUnhandledCudaError` when the driver cannot allocate.
///
/// # Safety
/// `ptr` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> ncclResult_t {
    const F: &str = "ncclMemAlloc";
    guard(F, || {
        check_ptr(ptr, F, "ptr")?;
        ensure_context(F)?;
        let mut d: sys::CUdeviceptr = 0;
        // SAFETY: a context is current; writes one device pointer.
        let r = unsafe { sys::cuMemAlloc_v2(&mut d, size.max(1)) };
        cuda_ok(r, F, &format!("cuMemAlloc({size} bytes)"))?;
        // SAFETY: checked non-null and aligned; the caller passes a writable pointer.
        unsafe { ptr.write(d as *mut c_void) };
        Ok(())
    })
}

/// `ncclMemFree`: frees memory from [`ncclMemAlloc`]. NULL is an error, as in NCCL.
///
/// # Safety
/// `ptr` must come from [`ncclMemAlloc`] and not be in use by pending operations.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclMemFree(ptr: *mut c_void) -> ncclResult_t {
    const F: &str = "ncclMemFree";
    guard(F, || {
        if ptr.is_null() {
            return Err(Failure::arg(F, "ptr argument is NULL"));
        }
        ensure_context(F)?;
        // SAFETY: the caller passes memory from cuMemAlloc.
        let r = unsafe { sys::cuMemFree_v2(ptr as sys::CUdeviceptr) };
        cuda_ok(r, F, "cuMemFree")
    })
}
