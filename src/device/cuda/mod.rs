//! The CUDA backend: the driver loaded at run time (cudarc's `dynamic-loading`), devices and
//! their primary contexts, device memory, and the kernels of `kernels/*.cu` compiled by NVRTC.
//! Nothing here is reached on a host without libcuda: [`probe`] says so in one line first.

pub(crate) mod abi;
mod check;
pub(crate) mod compile;
mod driver;
pub(crate) mod host_shared;
pub(crate) mod ipc;
mod loaded;
mod memory;
mod module;
mod reach;

pub(crate) use check::Checker;
pub use driver::DeviceInfo;
pub(crate) use driver::{check, context, cuda_error, probe, relaxed_capture};
pub(crate) use memory::{DeviceAlloc, PinnedHost};
pub(crate) use module::{Interp, PeerKernel};
pub(crate) use reach::{peer_reaches, peer_reaches_range};

/// The GPUs of this host (CUDA_VISIBLE_DEVICES applies), or why there are none.
///
/// Errors: [`crate::error::Error::Cuda`] in one line: no NVIDIA driver, a driver that fails to
/// start, or no visible GPU.
pub fn gpus() -> crate::error::Result<Vec<DeviceInfo>> {
    Ok(probe()?.devices.clone())
}
