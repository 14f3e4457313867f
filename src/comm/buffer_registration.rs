//! Buffers registered with `ncclCommRegister` on a GPU communicator: a rank registers its own
//! device memory when it likes (not a collective), its peers learn of it as they launch, and
//! all-reduces, reduce-scatters and all-gathers whose buffers every rank registered load and
//! store the peers' buffers in place (`exec::gpu::registered`, kernels/registered.cuh).
//! Collectives on registered buffers give the same results as on any other.

use super::Communicator;
use crate::error::{Error, Result};

/// A registration of device memory on a GPU communicator (`ncclCommRegister`'s handle), for
/// [`Communicator::deregister_buffer`].
#[derive(Debug)]
pub struct BufferRegistration {
    /// The communicator's bootstrap tag, to refuse a registration of another communicator.
    comm: u64,
    /// The registration's number on it; 0 when `NCCL_LOCAL_REGISTER=0` made it a no-op.
    id: u64,
}

impl Communicator {
    /// Registers `bytes` bytes of this rank's GPU memory at `addr` (`ncclCommRegister`): every
    /// peer is told where they are, and maps them as it next launches. Returns at once. With
    /// `NCCL_LOCAL_REGISTER=0` it registers nothing, as in NCCL.
    ///
    /// Errors: [`Error::InvalidUsage`] on a communicator without a GPU or one that failed, or
    /// for an `NCCL_LOCAL_REGISTER` that does not parse; [`Error::InvalidArgument`] for a null
    /// address or zero bytes; bootstrap errors when a peer cannot be told.
    pub fn register_buffer(&self, addr: u64, bytes: usize) -> Result<BufferRegistration> {
        let core = &self.core;
        self.state.borrow().usable(core)?;
        let gpu = core.watch.gpu().ok_or_else(|| {
            Error::invalid_usage("registered buffers need a communicator on a GPU")
        })?;
        let honoured = core
            .knobs
            .flag("NCCL_LOCAL_REGISTER")
            .map_err(|e| Error::invalid_usage(e.to_string()))?;
        let id = match honoured {
            true => {
                gpu.ctx.bind_to_thread().map_err(|e| {
                    crate::device::cuda::cuda_error(e, "binding the registration's GPU".into())
                })?;
                gpu.registered.register(core, addr, bytes)?
            }
            false => 0,
        };
        Ok(BufferRegistration { comm: core.tag, id })
    }

    /// Releases a registration from [`Communicator::register_buffer`] and tells the peers
    /// (`ncclCommDeregister`). No collective in flight may still use the buffer.
    ///
    /// Errors: [`Error::InvalidArgument`] for a registration of another communicator;
    /// [`Error::InvalidUsage`] on a communicator without a GPU; bootstrap errors when a peer
    /// cannot be told.
    pub fn deregister_buffer(&self, reg: BufferRegistration) -> Result<()> {
        let core = &self.core;
        if reg.comm != core.tag {
            return Err(Error::invalid_arg(
                "the buffer was registered on another communicator",
            ));
        }
        if reg.id == 0 {
            return Ok(());
        }
        let gpu = core.watch.gpu().ok_or_else(|| {
            Error::invalid_usage("registered buffers need a communicator on a GPU")
        })?;
        gpu.registered.deregister(core, reg.id)
    }
}
