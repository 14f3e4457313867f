//! Host memory two processes share and their GPUs reach: a POSIX shared-memory segment
//! ([`ShmSegment`]) registered with the driver (`cuMemHostRegister`, portable and mapped), as
//! NCCL's SHM transport places FIFOs between processes when P2P is off (internals §7.2,
//! gpu-backend.md §A.4 point 5). Unregistered, then unmapped, on drop.

use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

use super::driver::{check, cuda_error};
use crate::error::Result;
use crate::os::shm::Mapping;
use crate::os::shm::ShmSegment;

/// A shared-memory segment registered with the driver.
pub(crate) struct HostShared {
    ctx: Arc<CudaContext>,
    seg: ShmSegment,
    /// The segment's address for kernels.
    dev: u64,
}

impl HostShared {
    /// Creates a zero-filled segment of `len` bytes and registers it.
    ///
    /// Errors: [`crate::error::Error::System`] when `/dev/shm` refuses it; [`crate::error::Error::Cuda`]
    /// when the driver cannot register it.
    pub(crate) fn create(ctx: &Arc<CudaContext>, len: usize) -> Result<HostShared> {
        HostShared::register(ctx, ShmSegment::create(len)?)
    }

    /// Opens the segment another process created and registers it here.
    ///
    /// Errors: as [`HostShared::create`], and when the segment no longer exists.
    pub(crate) fn open(ctx: &Arc<CudaContext>, name: &str) -> Result<HostShared> {
        HostShared::register(ctx, ShmSegment::open(name)?)
    }

    fn register(ctx: &Arc<CudaContext>, seg: ShmSegment) -> Result<HostShared> {
        let gpu = ctx.ordinal();
        let what = || format!("registering shared memory {} for GPU {gpu}", seg.name());
        ctx.bind_to_thread().map_err(|e| cuda_error(e, what()))?;
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: the mapping is page aligned, `len` bytes long and stays mapped while `seg`
        // lives, which outlives the registration (Drop unregisters first).
        let r = unsafe { sys::cuMemHostRegister_v2(seg.base().cast(), seg.len(), flags) };
        check(r, what)?;
        let mut dev = 0;
        // SAFETY: the range was just registered with DEVICEMAP in the current context.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, seg.base().cast(), 0) };
        let h = HostShared {
            ctx: ctx.clone(),
            seg,
            dev,
        };
        check(r, || {
            format!("mapping shared memory {} into GPU {gpu}", h.seg.name())
        })?;
        Ok(h)
    }

    /// The segment's address as kernels use it.
    pub(crate) fn dev_ptr(&self) -> u64 {
        self.dev
    }

    /// The segment's name, for the peer to open.
    pub(crate) fn name(&self) -> &str {
        self.seg.name()
    }

    /// Removes the name from `/dev/shm` once the peer has mapped it (mappings stay valid).
    pub(crate) fn unlink(&mut self) {
        self.seg.unlink();
    }
}

impl Drop for HostShared {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: registered once in `register`; kernels using it finished (the owning
            // GpuComm synchronised its device before dropping its connections).
            let _ = unsafe { sys::cuMemHostUnregister(self.seg.base().cast()) };
        }
    }
}
