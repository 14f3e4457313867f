//! Runs plans on GPUs: a plan is encoded as a device program ([`program`]) and executed by the
//! step interpreter kernel (`kernels/interp.cu`), one thread block per lane, on the caller's
//! CUDA stream. Nothing here waits for the GPU: completion is seen through the stream, and
//! failures after the launch through the communicator's async-error query.

mod arena;
#[cfg(test)]
mod emulate;
pub(crate) mod ll;
pub(crate) mod program;
mod programs;
pub(crate) mod spread;
#[cfg(test)]
mod tests;

pub(crate) use programs::{Programs, capturing};
