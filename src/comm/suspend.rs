//! Suspending a communicator (NCCL 2.29's `ncclCommSuspend` / `ncclCommResume`) and the GPU
//! memory it holds (`ncclCommMemStats`). A suspended communicator takes no operations; with
//! memory release, its GPU scratch (plans' scratch and input snapshots, allocated on demand) is
//! freed and comes back on the first operation after resuming. Its connections' FIFOs and
//! control words stay: peers map them, so they persist while the communicator lives.

use super::Communicator;
use crate::error::{Error, Result};
use crate::exec::Engine;

/// GPU memory a communicator holds on this rank (`ncclCommMemStats`), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuMemory {
    /// Freed by a suspension with memory release (`ncclStatGpuMemSuspend`): the scratch.
    pub suspendable: u64,
    /// Held while the communicator lives (`ncclStatGpuMemPersist`): connection FIFOs, their
    /// counters, the one-shot areas' state, the kernels' claim word.
    pub persistent: u64,
    /// Whether the communicator is suspended with its memory released
    /// (`ncclStatGpuMemSuspended`).
    pub suspended: bool,
}

impl GpuMemory {
    /// Everything tracked (`ncclStatGpuMemTotal`).
    pub fn total(&self) -> u64 {
        self.suspendable + self.persistent
    }
}

impl Communicator {
    /// Suspends the communicator (`ncclCommSuspend`): until [`Communicator::resume`], its
    /// operations are refused with [`Error::InvalidUsage`]. With `release_memory`
    /// (`NCCL_SUSPEND_MEM`), its GPU scratch is freed now.
    ///
    /// Errors: [`Error::InvalidUsage`] when already suspended, unusable, or while an operation
    /// still runs on its GPU.
    pub fn suspend(&self, release_memory: bool) -> Result<()> {
        let mut st = self.state.borrow_mut();
        if st.suspended.is_some() {
            return Err(Error::invalid_usage(
                "the communicator is already suspended (call ncclCommResume first)",
            ));
        }
        st.usable(&self.core)?;
        if let Some(op) = self.core.watch.gpu().and_then(|g| g.in_flight()) {
            return Err(Error::invalid_usage(format!(
                "operation {op} still runs on the GPU: synchronize its stream before suspending"
            )));
        }
        if release_memory && let Engine::Gpu(g) = &mut st.engine {
            g.release_scratch();
        }
        st.suspended = Some(release_memory);
        Ok(())
    }

    /// Resumes a suspended communicator (`ncclCommResume`); released scratch is allocated
    /// again on demand.
    ///
    /// Errors: [`Error::InvalidUsage`] when it is not suspended.
    pub fn resume(&self) -> Result<()> {
        let mut st = self.state.borrow_mut();
        if st.suspended.take().is_none() {
            return Err(Error::invalid_usage(
                "the communicator is not suspended (ncclCommResume follows ncclCommSuspend)",
            ));
        }
        Ok(())
    }

    /// The GPU memory this rank's communicator holds; all zero on a host communicator.
    pub fn gpu_memory(&self) -> GpuMemory {
        let st = self.state.borrow();
        match (&st.engine, self.core.watch.gpu()) {
            (Engine::Gpu(e), Some(g)) => GpuMemory {
                suspendable: e.scratch_bytes() as u64,
                persistent: g.persistent_bytes() as u64,
                suspended: st.suspended == Some(true),
            },
            _ => GpuMemory {
                suspended: st.suspended == Some(true),
                ..GpuMemory::default()
            },
        }
    }
}
