//! The CUDA backend: the driver loaded at run time (cudarc's `dynamic-loading`), devices and
//! their primary contexts, device memory, and the kernels of `kernels/*.cu` compiled by NVRTC.
//! Nothing here is reached on a host without libcuda: [`probe`] says so in one line first.

mod driver;
mod memory;

pub use driver::DeviceInfo;
pub(crate) use driver::{Cuda, check, context, cuda_error, probe};
pub(crate) use memory::{DeviceAlloc, PinnedHost};
