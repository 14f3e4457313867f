//! GPU connections: FIFOs the step-interpreter kernel reads and writes itself (NCCL's P2P and
//! SHM transports on GPUs), and, for peers on other hosts, FIFOs in pinned host memory that a
//! proxy thread carries over the network (NCCL's NET transport with host staging).
//!
//! - [`conns`]: the set of connections a GPU communicator opens at init ([`GpuConns`]), their
//!   live counters, the one-shot LL areas and the proxy;
//! - [`fifo`]: one connection's ends on this host (device memory, pinned or shared host memory)
//!   and the connection handshake through the bootstrap;
//! - [`staging`]: which peers' FIFOs go through host memory (`NCCL_P2P_DISABLE`,
//!   `NCCL_P2P_LEVEL` on this host's topology);
//! - [`net`]: connections to peers on other hosts, each end's FIFO carried by the same TCP and
//!   IB ends CPU ranks use ([`super::tcp`], [`super::ib`]);
//! - [`proxy`]: the thread that drives those ends between the kernels' FIFOs.
//!
//! The FIFO layout the kernels see is the device ABI's (`crate::device::cuda::abi`).

pub(crate) mod conns;
pub(crate) mod fifo;
pub(crate) mod net;
pub(crate) mod proxy;
pub(crate) mod staging;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use conns::P2P_CHANNELS;
pub(crate) use conns::{GpuConns, GpuSetup, LlPeers};
