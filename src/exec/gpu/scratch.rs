//! A GPU communicator's device scratch: plans' scratch and snapshots of inputs a group
//! overwrites before reading them whole.

use cudarc::driver::sys;

use crate::device::cuda::check;
use crate::error::Result;

/// Device scratch of a communicator: one allocation, replaced by a larger one when needed;
/// replaced ones are kept until the communicator goes, since kernels in flight may use them.
/// Allocated stream-ordered (`cuMemAllocAsync`): a plain allocation would serialise the GPU's
/// streams, making this rank's next kernel wait for a peer kernel that waits for it.
#[derive(Default)]
pub(crate) struct GpuScratch {
    allocs: Vec<(std::sync::Arc<cudarc::driver::CudaContext>, u64, usize)>,
}

impl GpuScratch {
    /// Bytes held (replaced allocations included).
    pub(crate) fn bytes(&self) -> usize {
        self.allocs.iter().map(|a| a.2).sum()
    }

    /// The address of at least `bytes` bytes of scratch on `ctx`'s GPU, valid for work on
    /// `stream` from now on.
    ///
    /// Errors: [`crate::error::Error::Cuda`] when the GPU is out of memory.
    pub(crate) fn get(
        &mut self,
        ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
        bytes: usize,
        stream: sys::CUstream,
    ) -> Result<u64> {
        if let Some(&(_, p, _)) = self.allocs.last().filter(|a| a.2 >= bytes) {
            return Ok(p);
        }
        let len = bytes.next_power_of_two();
        let mut p = 0;
        // A stream being captured into a graph gets a plain allocation: a stream-ordered one
        // would belong to the graph (mapped only while the graph runs) while later operations,
        // captured or not, reuse it. Nothing runs during a capture, so nothing is serialised.
        let r = if super::capturing(stream)? {
            // SAFETY: the context is current; the driver writes one pointer.
            crate::device::cuda::relaxed_capture(|| unsafe { sys::cuMemAlloc_v2(&mut p, len) })
        } else {
            // SAFETY: the context is current (bound by the launch); the driver writes one
            // pointer.
            unsafe { sys::cuMemAllocAsync(&mut p, len, stream) }
        };
        check(r, || {
            format!("allocating {len} bytes of scratch on GPU {}", ctx.ordinal())
        })?;
        self.allocs.push((ctx.clone(), p, len));
        Ok(p)
    }
}

impl Drop for GpuScratch {
    fn drop(&mut self) {
        for (ctx, p, _) in &self.allocs {
            if ctx.bind_to_thread().is_ok() {
                // SAFETY: allocated once by cuMemAllocAsync; the communicator's GpuComm
                // synchronised the device when it went (it drops after the state), and a
                // plain free waits for outstanding work on the memory anyway.
                let _ = unsafe { sys::cuMemFree_v2(*p) };
            }
        }
    }
}
