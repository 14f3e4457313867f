//! The kernels of `kernels/` compiled at run time by NVRTC into CUBINs for the GPU at hand, so
//! the library ships CUDA sources rather than binaries for every architecture, and builds with no
//! CUDA toolkit anywhere.
//!
//! Unit of work: one program (`*.cu`) for one architecture (`sm_<arch>`) gives one CUBIN
//! ([`cache::cubin`]). Every file of `kernels/` is embedded ([`sources`]); the headers (`*.cuh`)
//! reach NVRTC by name, CUDA's own (`cuda_fp16.h`, `cuda_bf16.h`) from the include folder
//! [`cuda_include`] finds. CUBINs are kept per process and on disk ([`disk`], under a [`key`]
//! of everything they depend on), so a host compiles once per rnccl, NVRTC and architecture.
//!
//! What blocks: a compile (seconds; different CUBINs build side by side on their callers'
//! threads, and callers wanting the same CUBIN wait for it). A host without libnvrtc gets [`crate::error::Error::Cuda`] saying how to
//! install it, never a panic.

pub(crate) mod cache;
pub(crate) mod cuda_include;
pub(crate) mod disk;
pub(crate) mod entry;
pub(crate) mod key;
pub(crate) mod nvrtc;
pub(crate) mod sources;

#[cfg(test)]
mod with_nvrtc;
