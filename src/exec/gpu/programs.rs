//! A communicator's device programs in pinned host memory, read by the kernels through unified
//! addressing (as NCCL's work FIFO), kept by content: an operation repeated on the same buffers
//! — every training step, every benchmark iteration — launches the program already there with
//! no copy at all. A program launched while its stream was being captured into a CUDA graph is
//! kept for the communicator's life, since the graph may replay it at any time; others are
//! dropped once their last launch has completed and the cache is over its capacity.

use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};
use rustc_hash::FxHashMap;

use crate::device::cuda::{PinnedHost, check, cuda_error};
use crate::error::Result;

/// Programs kept before idle ones are dropped.
const CAPACITY: usize = 256;

struct Entry {
    mem: PinnedHost,
    /// Recorded after the entry's last launch outside a capture.
    done: sys::CUevent,
    /// Launched inside a stream capture: a graph may replay it, so it is never dropped.
    captured: bool,
}

/// Device programs by content.
pub(crate) struct Programs {
    ctx: Arc<CudaContext>,
    entries: FxHashMap<Vec<u8>, Entry>,
}

// SAFETY: events and pinned memory are driver objects usable from any thread once the owning
// context is bound (every method binds it); one thread uses the cache at a time (&mut self).
unsafe impl Send for Programs {}

/// Whether `stream` is being captured into a CUDA graph.
///
/// Errors: [`crate::Error::Cuda`] when the driver cannot tell (an invalid stream).
pub(crate) fn capturing(stream: sys::CUstream) -> Result<bool> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: writes one status for a stream the caller vouches for.
    check(
        unsafe { sys::cuStreamIsCapturing(stream, &mut status) },
        || "cuStreamIsCapturing".into(),
    )?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

impl Programs {
    /// An empty cache for programs of `ctx`'s device.
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Programs {
        Programs {
            ctx: ctx.clone(),
            entries: FxHashMap::default(),
        }
    }

    /// The device address of `program`'s bytes, copying them into pinned memory the first
    /// time; `launch` then launches it on `stream` (which must be the stream `launch` uses).
    ///
    /// Errors: [`crate::Error::Cuda`] when memory cannot be pinned, an event cannot be created
    /// or recorded, or `launch` fails.
    pub(crate) fn run(
        &mut self,
        program: Vec<u8>,
        stream: sys::CUstream,
        launch: impl FnOnce(u64) -> Result<()>,
    ) -> Result<()> {
        let gpu = self.ctx.ordinal();
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
        let captured = capturing(stream)?;
        if !self.entries.contains_key(&program) {
            self.evict_idle();
            let mem = PinnedHost::zeroed(&self.ctx, program.len())?;
            // SAFETY: `mem` holds program.len() bytes and nothing else refers to it yet.
            unsafe { std::ptr::copy_nonoverlapping(program.as_ptr(), mem.ptr(), program.len()) };
            let mut done = std::ptr::null_mut();
            let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            // SAFETY: the context is current; the driver writes one event handle.
            check(unsafe { sys::cuEventCreate(&mut done, flags) }, || {
                format!("creating an event on GPU {gpu}")
            })?;
            let e = Entry {
                mem,
                done,
                captured: false,
            };
            self.entries.insert(program.clone(), e);
        }
        let Some(e) = self.entries.get_mut(&program) else {
            return Err(crate::Error::Internal("a device program vanished".into()));
        };
        launch(e.mem.ptr() as u64)?;
        if captured {
            e.captured = true;
        } else {
            // SAFETY: the event and the stream live in the current context.
            check(unsafe { sys::cuEventRecord(e.done, stream) }, || {
                format!("recording a program's completion on GPU {gpu}")
            })?;
        }
        Ok(())
    }

    /// Drops programs no graph holds whose last launch has completed, once over capacity.
    fn evict_idle(&mut self) {
        if self.entries.len() < CAPACITY {
            return;
        }
        self.entries.retain(|_, e| {
            // SAFETY: the event is live; querying has no side effects.
            let idle =
                !e.captured && unsafe { sys::cuEventQuery(e.done) } == sys::CUresult::CUDA_SUCCESS;
            if idle {
                // SAFETY: the event's work completed; it is destroyed once, with its entry.
                let _ = unsafe { sys::cuEventDestroy_v2(e.done) };
            }
            !idle
        });
    }
}

impl Drop for Programs {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        // Kernels may still read programs: wait for the device before freeing them.
        // SAFETY: the context is current.
        let _ = unsafe { sys::cuCtxSynchronize() };
        for e in self.entries.values() {
            // SAFETY: each event is destroyed once; the device is idle.
            let _ = unsafe { sys::cuEventDestroy_v2(e.done) };
        }
    }
}
