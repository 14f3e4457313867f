//! The CPU backend: vectorised reductions and copies on host buffers.

mod elementwise;
pub mod reduce;
pub mod stream;
