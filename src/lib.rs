//! rnccl: NCCL's collective communications and its diagnostics, in Rust.
//!
//! The engine (this crate) runs NCCL's collectives — all_reduce, broadcast, reduce, all_gather,
//! reduce_scatter, all_to_all, gather, scatter, send/recv and group calls — with ring and
//! latency-oriented algorithms over channels, on transports chosen per peer (same process,
//! shared memory, TCP sockets). The `rnccl` command (package `rnccl-cli`) renders what the engine
//! knows. See DESIGN.md for the map of modules.
//!
//! The public API is what users of the library need: communicators and their collectives
//! ([`Communicator`], [`Group`], [`comm`]), how ranks find each other under a launcher
//! ([`launch`]), knobs ([`config`]), topology ([`topo`]), channels and the tuning model
//! ([`graph`]), the benchmark ([`bench`](mod@bench)), multi-host health checks ([`check`]),
//! live counters ([`stats`]), NCCL_DEBUG logging ([`log`]), job status across hosts
//! ([`status`]) and typed errors ([`Error`]). Plans, the executor, transports and kernels are
//! internal.

pub mod bench;
mod bootstrap;
pub mod check;
mod coll;
pub mod comm;
pub mod config;
mod conn;
mod device;
mod dtype;
mod error;
mod exec;
pub mod explain;
mod fp8;
mod func;
pub mod graph;
mod hash;
pub mod ib;
pub mod ibcheck;
pub mod launch;
pub mod log;
mod mem;
mod os;
mod redop;
pub mod stats;
pub mod status;
pub mod topo;
mod transport;
pub mod version;

pub use bootstrap::unique_id::UniqueId;
pub use coll::{CollArgs, InPlace};
pub use comm::{
    AbortHandle, BufferRegistration, CommConfig, Communicator, DeviceWindow, Group, Pending,
    PendingDeviceWindow, SPLIT_NOCOLOR, ShrinkMode, SignalWait, Window, group_end, group_start,
};
pub use device::cuda::{DeviceInfo, gpus};
pub use dtype::{DataType, Element};
pub use error::{Error, Result, ResultCode};
pub use exec::gpu::choice::{
    GpuKernel, gpu_kernel, gpu_kernel_in_group, gpu_kernel_in_windows, gpu_kernel_registered,
};
pub use exec::gpu::cost::{Platform as GpuPlatform, predicted_us as gpu_kernel_us};
pub use fp8::{F8E4M3, F8E5M2};
pub use func::Func;
pub use mem::{HostMem, mem_alloc};
pub use os::names::{remove_own_files_for_exit, remove_process_files, remove_process_files_in};
pub use redop::{RedOp, Scalar};
pub use version::{NCCL_API_VERSION, version_line};
