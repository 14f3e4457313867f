//! Memory the CUDA backend owns: device allocations (FIFOs, step counters) and pinned host
//! memory mapped into every device's address space (device programs, the abort flag, error
//! reports, live counters). Both are freed on drop with their context bound.

use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

use super::driver::{check, cuda_error};
use crate::error::Result;

/// `bytes` bytes of device memory on one GPU, zeroed at allocation.
#[derive(Debug)]
pub(crate) struct DeviceAlloc {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DeviceAlloc {
    /// Allocates and zeroes `bytes` bytes (at least one) on `ctx`'s device (`cuMemAlloc`, so
    /// 256-byte aligned).
    ///
    /// Errors: [`crate::error::Error::Cuda`] when the device is out of memory or the context failed.
    pub(crate) fn zeroed(ctx: &Arc<CudaContext>, bytes: usize) -> Result<DeviceAlloc> {
        let what = || format!("allocating {bytes} bytes on GPU {}", ctx.ordinal());
        ctx.bind_to_thread().map_err(|e| cuda_error(e, what()))?;
        let mut ptr = 0;
        // SAFETY: the context is current; the driver writes one pointer.
        check(unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(1)) }, what)?;
        let a = DeviceAlloc {
            ctx: ctx.clone(),
            ptr,
            bytes,
        };
        // SAFETY: the range was just allocated with this length.
        check(unsafe { sys::cuMemsetD8_v2(ptr, 0, bytes.max(1)) }, what)?;
        Ok(a)
    }

    /// The device address of the first byte.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by cuMemAlloc in this context and freed once; kernels that used
            // it were synchronised by the owner before dropping (see the owners' Drop).
            let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
        }
    }
}

/// `bytes` bytes of page-locked host memory, zeroed, mapped into the address space of every
/// device (`CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP`): with unified addressing the host pointer is
/// also the device pointer.
#[derive(Debug)]
pub(crate) struct PinnedHost {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
}

// SAFETY: the allocation is plain memory owned by this value; it is freed once in Drop, and
// whoever reads or writes it through `ptr()` synchronises as the device protocol requires.
unsafe impl Send for PinnedHost {}
// SAFETY: as above; shared references only hand out the raw pointer.
unsafe impl Sync for PinnedHost {}

impl PinnedHost {
    /// Allocates and zeroes `bytes` bytes (at least one).
    ///
    /// Errors: [`crate::error::Error::Cuda`] when the host cannot pin that much memory.
    pub(crate) fn zeroed(ctx: &Arc<CudaContext>, bytes: usize) -> Result<PinnedHost> {
        let what = || {
            format!(
                "pinning {bytes} bytes of host memory for GPU {}",
                ctx.ordinal()
            )
        };
        ctx.bind_to_thread().map_err(|e| cuda_error(e, what()))?;
        let mut p = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: the context is current; the driver writes one pointer.
        let r = unsafe { sys::cuMemHostAlloc(&mut p, bytes.max(1), flags) };
        check(r, what)?;
        let h = PinnedHost {
            ctx: ctx.clone(),
            ptr: p.cast(),
        };
        // SAFETY: the driver returned bytes.max(1) writable bytes.
        unsafe { std::ptr::write_bytes(h.ptr, 0, bytes.max(1)) };
        let mut dev = 0;
        // SAFETY: `p` is a DEVICEMAP allocation of this context.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, p, 0) };
        check(r, what)?;
        if dev != p as u64 {
            return Err(crate::error::Error::Cuda(format!(
                "GPU {}: mapped host memory has a different device address; rnccl needs unified \
                 addressing (a 64-bit Linux host with a current driver)",
                ctx.ordinal()
            )));
        }
        Ok(h)
    }

    /// The first byte, valid on the host and (same address) on every device.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc and freed once; no kernel uses it any more
            // (owners synchronise before dropping).
            let _ = unsafe { sys::cuMemFreeHost(self.ptr.cast()) };
        }
    }
}
