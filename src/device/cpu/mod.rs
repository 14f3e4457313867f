//! The CPU backend: vectorised reductions and copies on host buffers.

pub mod reduce;
pub mod stream;
