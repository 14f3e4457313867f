//! The GPU engine: runs plans on GPUs. A collective's plan is encoded as a device program
//! ([`program`]) and executed by the step interpreter kernel (`kernels/interp.cu`), one thread
//! block per lane, on the caller's CUDA stream; a small all-reduce on one host runs the one-shot
//! LL kernel ([`ll`]), and mid-size all-reduces, all-gathers and reduce-scatters over peer access
//! the direct kernel (`kernels/direct.cuh`, same arguments), or the symmetric kernels
//! (`kernels/symmetric.cuh`) where the buffers lie in symmetric windows ([`windows`]) or one
//! thread's group holds every rank's buffers ([`group_buffers`]); a group's
//! Send/Recv run as one fused kernel ([`launch`]), or straight into the receive buffers where
//! the group holds both ends of every pair ([`group_sends`]). Nothing here
//! waits for the GPU: completion is seen through the stream, failures after the launch through
//! the communicator's async-error query ([`GpuComm::async_error`]). Operations on host memory
//! of a GPU communicator run on its host engine.

mod arena;
pub(crate) mod choice;
pub(crate) mod comm;
pub(crate) mod cost;
#[cfg(test)]
mod emulate;
pub(crate) mod group_buffers;
pub(crate) mod group_sends;
mod launch;
pub(crate) mod launcher;
pub(crate) mod ll;
pub(crate) mod ops;
pub(crate) mod program;
mod programs;
pub(crate) mod registered;
pub(crate) mod rma;
mod scratch;
pub(crate) mod spread;
#[cfg(test)]
mod tests;
pub(crate) mod windows;

use std::sync::Arc;

pub(crate) use comm::GpuComm;
pub(crate) use programs::{Programs, capturing};

use super::host::HostEngine;
use super::{Core, Watch};
use crate::error::Result;

/// A GPU communicator's engine, on the thread that drives it: its shared side (what watchers
/// read too), its device scratch, and the host engine for its operations on host memory.
pub(crate) struct GpuEngine {
    /// The GPU, its connections and its kernels' reports.
    pub comm: Arc<GpuComm>,
    /// Device scratch for plans and input snapshots.
    scratch: scratch::GpuScratch,
    /// Operations on host memory (a benchmark's barrier) run here, over host connections.
    pub host: HostEngine,
}

impl GpuEngine {
    /// Binds the communicator whose core is `core` to GPU `ordinal` and connects it to its
    /// peers (every rank does so at about the same time); returns the engine and what
    /// watchers read of it.
    ///
    /// Errors: as [`GpuComm::new`].
    pub(crate) fn new(core: &Core, ordinal: usize) -> Result<(GpuEngine, Watch)> {
        let comm = Arc::new(GpuComm::new(core, ordinal)?);
        let engine = GpuEngine {
            comm: comm.clone(),
            scratch: scratch::GpuScratch::default(),
            host: HostEngine::default(),
        };
        Ok((engine, Watch::Gpu(comm)))
    }

    /// Bytes of device scratch held now.
    pub(crate) fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// Frees the device scratch (a suspension with memory release); the next operation
    /// allocates it again.
    pub(crate) fn release_scratch(&mut self) {
        self.scratch = scratch::GpuScratch::default();
    }
}
