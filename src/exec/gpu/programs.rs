//! A communicator's device programs, written to pinned host memory and copied to the GPU's
//! ([`Arena`]), kept by what they are encoded from (a
//! [`Recipe`]: the plans, the buffers and the reduction): an operation repeated on the same
//! buffers — every training step, every benchmark iteration — launches the program already
//! there without encoding it again or copying it. Encoding is what a launch would otherwise
//! spend its time on: a ring program of 64 channels is 8-23 KB, and encoding it took 14-38 µs
//! on a 2-core VM, where a kernel launch costs 4.2-4.4 µs (perf/launch_floor.cu on 4×H200,
//! 2026-11-28); one thread driving 4 GPUs paid that four times per iteration. A program
//! launched while its stream was being captured into a CUDA graph is kept for the
//! communicator's life, since the graph may replay it at any time; others give their space
//! back once their last launch has completed and the cache is over capacity or the arena is
//! full.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};
use rustc_hash::FxHashMap;

use super::arena::{Arena, Region};
use super::program::DevBuffers;
use crate::coll::Plan;
use crate::device::ReduceSpec;
use crate::device::cuda::{check, cuda_error};
use crate::error::Result;
use crate::redop::Scalar;

/// What a launch's program is encoded from besides the communicator's connections and control
/// words, which stay the same for its life: each part's plan and buffers, and the reduction.
/// Plans are told apart by identity: the recipe holds them, so no other plan can take a held
/// plan's address while its program is kept, and the same plan always encodes alike.
#[derive(Clone)]
pub(crate) struct Recipe {
    /// The parts: a plan and its buffers each.
    pub parts: Vec<(Arc<Plan>, DevBuffers)>,
    /// The reduction the kernel applies.
    pub spec: ReduceSpec,
}

impl Recipe {
    /// The spec's fields with its scalar as bits, so equal recipes hash alike (an `f64`
    /// scalar's `==` would call 0.0 and -0.0 equal and NaN unequal to itself).
    fn spec_key(&self) -> impl Eq + Hash {
        let s = &self.spec;
        let pre = s.pre.map(|p| match p {
            Scalar::Int(v) => (0u8, v as u64),
            Scalar::Uint(v) => (1, v),
            Scalar::Float(v) => (2, v.to_bits()),
            Scalar::Device(a) => (3, a),
        });
        (s.dtype, s.combine, pre, s.post_div)
    }
}

impl PartialEq for Recipe {
    fn eq(&self, other: &Recipe) -> bool {
        self.parts.len() == other.parts.len()
            && self
                .parts
                .iter()
                .zip(&other.parts)
                .all(|((p, b), (q, c))| Arc::ptr_eq(p, q) && b == c)
            && self.spec_key() == other.spec_key()
    }
}

impl Eq for Recipe {}

impl Hash for Recipe {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for (p, b) in &self.parts {
            Arc::as_ptr(p).hash(state);
            b.hash(state);
        }
        self.spec_key().hash(state);
    }
}

/// Programs kept before idle ones are dropped.
const CAPACITY: usize = 256;

struct Entry {
    region: Region,
    /// Lanes (thread blocks) the program runs on.
    nlanes: u32,
    /// Recorded after the entry's last launch outside a capture.
    done: sys::CUevent,
    /// Launched inside a stream capture: a graph may replay it, so it is never dropped.
    captured: bool,
    /// Launch number of the entry's last launch (oldest first when space must be freed).
    last: u64,
}

/// Device programs by recipe.
pub(crate) struct Programs {
    ctx: Arc<CudaContext>,
    arena: Arena,
    entries: FxHashMap<Recipe, Entry>,
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

    /// Launches the program of `recipe` on `stream` through `launch` (given the program's
    /// device address and its lane count), encoding it with `encode` (the program's bytes and
    /// lane count) and copying it into pinned memory and on to the GPU's the first time.
    ///
    /// Errors: `encode`'s; [`crate::error::Error::Cuda`] when an event cannot be created or
    /// recorded, memory cannot be pinned or allocated, the program cannot be copied to the GPU,
    /// or `launch` fails.
    pub(crate) fn run(
        &mut self,
        recipe: Recipe,
        stream: sys::CUstream,
        encode: impl FnOnce(&Recipe) -> Result<(Vec<u8>, u32)>,
        launch: impl FnOnce(u64, u32) -> Result<()>,
    ) -> Result<()> {
        let gpu = self.ctx.ordinal();
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
        let captured = capturing(stream)?;
        let fresh = if self.entries.contains_key(&recipe) {
            None
        } else {
            Some(self.keep(&recipe, encode)?)
        };
        self.launches += 1;
        let e = match fresh {
            Some(entry) => self.entries.entry(recipe).or_insert(entry),
            None => self
                .entries
                .get_mut(&recipe)
                .ok_or_else(|| crate::error::Error::Internal("a device program vanished".into()))?,
        };
        launch(self.arena.device(e.region), e.nlanes)?;
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

    /// A new entry for `recipe`: its program encoded by `encode`, written into the arena and
    /// uploaded to the GPU, with its completion event.
    ///
    /// Errors: `encode`'s; [`crate::error::Error::Cuda`] when memory cannot be pinned or
    /// allocated, the upload fails or the event cannot be created.
    fn keep(
        &mut self,
        recipe: &Recipe,
        encode: impl FnOnce(&Recipe) -> Result<(Vec<u8>, u32)>,
    ) -> Result<Entry> {
        let gpu = self.ctx.ordinal();
        let (program, nlanes) = encode(recipe)?;
        // Freeing room queries and waits on events, which a thread capturing a stream in
        // global or thread-local mode may not do (it invalidates the capture).
        let region = crate::device::cuda::relaxed_capture(|| self.room(program.len()))?;
        let p = self.arena.ptr(region);
        // SAFETY: the region holds at least program.len() bytes and no program uses it.
        unsafe { std::ptr::copy_nonoverlapping(program.as_ptr(), p, program.len()) };
        self.arena.upload(region, program.len())?;
        let mut done = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: the context is current; the driver writes one event handle.
        let r = unsafe { sys::cuEventCreate(&mut done, flags) };
        check(r, || format!("creating an event on GPU {gpu}"))?;
        Ok(Entry {
            region,
            nlanes,
            done,
            captured: false,
            last: 0,
        })
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

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;

    use super::*;
    use crate::coll::Algo;
    use crate::dtype::DataType;
    use crate::redop::RedOp;

    fn hash(r: &Recipe) -> u64 {
        let mut h = DefaultHasher::new();
        r.hash(&mut h);
        h.finish()
    }

    fn recipe(plan: &Arc<Plan>, input: u64, pre: Option<Scalar>) -> Recipe {
        let bufs = DevBuffers {
            input: (input, 64),
            output: (0x2000, 64),
            scratch: (0, 0),
        };
        let mut spec = ReduceSpec::new(DataType::Float32, RedOp::Sum.lower(DataType::Float32, 2));
        spec.pre = pre;
        Recipe {
            parts: vec![(plan.clone(), bufs)],
            spec,
        }
    }

    #[test]
    fn recipes_match_on_the_same_plan_buffers_and_reduction_only() {
        let plan = Arc::new(Plan::new(Vec::new(), 0, Algo::Ring));
        let twin = Arc::new(Plan::new(Vec::new(), 0, Algo::Ring));
        let a = recipe(&plan, 0x1000, None);
        assert!(a == recipe(&plan, 0x1000, None));
        assert_eq!(hash(&a), hash(&recipe(&plan, 0x1000, None)));
        assert!(a != recipe(&plan, 0x1100, None), "other buffers");
        assert!(
            a != recipe(&twin, 0x1000, None),
            "another plan, however alike"
        );
        let f = |v: f64| Some(Scalar::Float(v));
        assert!(recipe(&plan, 0x1000, f(0.5)) != a, "a scalar");
        assert!(recipe(&plan, 0x1000, f(0.0)) != recipe(&plan, 0x1000, f(-0.0)));
        let nan = recipe(&plan, 0x1000, f(f64::NAN));
        assert!(nan == nan.clone(), "a NaN scalar still finds its program");
        assert_eq!(hash(&nan), hash(&nan.clone()));
        assert!(
            recipe(&plan, 0x1000, Some(Scalar::Device(8)))
                != recipe(&plan, 0x1000, Some(Scalar::Uint(8)))
        );
    }
}
