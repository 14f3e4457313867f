//! A communicator's device programs in pinned host memory ([`Arena`]), read by the kernels
//! through unified addressing (as NCCL's work FIFO), kept by content: an operation repeated on
//! the same buffers — every training step, every benchmark iteration — launches the program
//! already there with no copy at all. A program launched while its stream was being captured
//! into a CUDA graph is kept for the communicator's life, since the graph may replay it at any
//! time; others give their space back once their last launch has completed and the cache is
//! over capacity or the arena is full.

use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};
use rustc_hash::FxHashMap;

use super::arena::{Arena, Region};
use crate::device::cuda::{check, cuda_error};
use crate::error::Result;

/// Programs kept before idle ones are dropped.
const CAPACITY: usize = 256;

struct Entry {
    region: Region,
    /// Recorded after the entry's last launch outside a capture.
    done: sys::CUevent,
    /// Launched inside a stream capture: a graph may replay it, so it is never dropped.
    captured: bool,
    /// Launch number of the entry's last launch (oldest first when space must be freed).
    last: u64,
}

/// Device programs by content.
pub(crate) struct Programs {
    ctx: Arc<CudaContext>,
    arena: Arena,
    entries: FxHashMap<Vec<u8>, Entry>,
    launches: u64,
}

// SAFETY: events and pinned memory are driver objects usable from any thread once the owning
// context is bound (every method binds it); one thread uses the cache at a time (&mut self).
unsafe impl Send for Programs {}

/// Whether `stream` is being captured into a CUDA graph.
///
/// Errors: [`crate::error::Error::Cuda`] when the driver cannot tell (an invalid stream).
pub(crate) fn capturing(stream: sys::CUstream) -> Result<bool> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: writes one status for a stream the caller vouches for.
    let r = unsafe { sys::cuStreamIsCapturing(stream, &mut status) };
    check(r, || "cuStreamIsCapturing".into())?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

impl Programs {
    /// An empty cache for programs of `ctx`'s GPU, its first arena chunk pinned now.
    ///
    /// Errors: [`crate::error::Error::Cuda`] when the memory cannot be pinned.
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Programs> {
        Ok(Programs {
            ctx: ctx.clone(),
            arena: Arena::new(ctx)?,
            entries: FxHashMap::default(),
            launches: 0,
        })
    }

    /// Launches `program` on `stream` through `launch` (given the program's device address),
    /// copying the bytes into pinned memory the first time.
    ///
    /// Errors: [`crate::error::Error::Cuda`] when an event cannot be created or recorded, memory
    /// cannot be pinned, or `launch` fails.
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
            // Freeing room queries and waits on events, which a thread capturing a stream in
            // global or thread-local mode may not do (it invalidates the capture).
            let region = crate::device::cuda::relaxed_capture(|| self.room(program.len()))?;
            let p = self.arena.ptr(region);
            // SAFETY: the region holds at least program.len() bytes and no program uses it.
            unsafe { std::ptr::copy_nonoverlapping(program.as_ptr(), p, program.len()) };
            let mut done = std::ptr::null_mut();
            let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            // SAFETY: the context is current; the driver writes one event handle.
            let r = unsafe { sys::cuEventCreate(&mut done, flags) };
            check(r, || format!("creating an event on GPU {gpu}"))?;
            let e = Entry {
                region,
                done,
                captured: false,
                last: 0,
            };
            self.entries.insert(program.clone(), e);
        }
        self.launches += 1;
        let Some(e) = self.entries.get_mut(&program) else {
            return Err(crate::error::Error::Internal(
                "a device program vanished".into(),
            ));
        };
        launch(self.arena.ptr(e.region) as u64)?;
        e.last = self.launches;
        if captured {
            e.captured = true;
        } else {
            // SAFETY: the event and the stream live in the current context.
            let r = unsafe { sys::cuEventRecord(e.done, stream) };
            check(r, || {
                format!("recording a program's completion on GPU {gpu}")
            })?;
        }
        Ok(())
    }

    /// Space for a new program of `len` bytes: free space, else the space of programs whose
    /// last launch completed (when over capacity or out of space), else — when every program
    /// is in flight — the oldest one's after waiting for it, else a new chunk.
    fn room(&mut self, len: usize) -> Result<Region> {
        if self.entries.len() >= CAPACITY {
            self.drop_where(|e| !e.captured && Self::idle(e));
        }
        if let Some(r) = self.arena.take(len) {
            return Ok(r);
        }
        self.drop_where(|e| !e.captured && Self::idle(e));
        if let Some(r) = self.arena.take(len) {
            return Ok(r);
        }
        let oldest = self
            .entries
            .iter()
            .filter(|(_, e)| !e.captured)
            .min_by_key(|(_, e)| e.last)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            if let Some(e) = self.entries.get(&k) {
                // SAFETY: a live event of this context; waits for the program's last launch.
                let _ = unsafe { sys::cuEventSynchronize(e.done) };
            }
            self.drop_where(|e| !e.captured && Self::idle(e));
            if let Some(r) = self.arena.take(len) {
                return Ok(r);
            }
        }
        self.arena.take_or_grow(len)
    }

    fn idle(e: &Entry) -> bool {
        // SAFETY: the event is live; querying has no side effects.
        unsafe { sys::cuEventQuery(e.done) == sys::CUresult::CUDA_SUCCESS }
    }

    /// Drops the programs `pred` picks, returning their space.
    fn drop_where(&mut self, pred: impl Fn(&Entry) -> bool) {
        let arena = &mut self.arena;
        self.entries.retain(|_, e| {
            if !pred(e) {
                return true;
            }
            arena.give(e.region);
            // SAFETY: the event's work completed; it is destroyed once, with its entry.
            let _ = unsafe { sys::cuEventDestroy_v2(e.done) };
            false
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
