//! The kernels of `kernels/` compiled at run time by NVRTC into CUBINs for the GPU at hand, so
//! the library ships CUDA sources rather than binaries for every architecture, and builds with no
//! CUDA toolkit anywhere.
//!
//! Every file of `kernels/` is embedded ([`sources`]); the kernels each program exports are
//! listed in [`entry`].

pub(crate) mod entry;
pub(crate) mod sources;
