//! rnccl: NCCL's collective communications and its diagnostics, in Rust.
//!
//! The engine (this crate) runs NCCL's collectives — all_reduce, broadcast, reduce, all_gather,
//! reduce_scatter, all_to_all, gather, scatter, send/recv and group calls — with ring and
//! latency-oriented algorithms over channels, on transports chosen per peer (same process,
//! shared memory, TCP sockets). The `rnccl` command (package `rnccl-cli`) renders what the engine
//! knows. See DESIGN.md for the map of modules.

pub mod bench;
pub mod bootstrap;
pub mod coll;
pub mod comm;
pub mod config;
pub mod conn;
pub mod device;
pub mod dtype;
pub mod error;
pub mod exec;
pub mod func;
pub mod graph;
pub mod launch;
pub mod log;
pub mod mem;
pub mod redop;
pub mod stats;
pub mod topo;
pub mod transport;

pub use bootstrap::unique_id::UniqueId;
pub use comm::{
    AbortHandle, CommConfig, Communicator, Group, SPLIT_NOCOLOR, Window, group_end, group_start,
};
pub use dtype::{DataType, Element};
pub use error::{Error, Result, ResultCode};
pub use func::Func;
pub use mem::{HostMem, mem_alloc};
pub use redop::{RedOp, Scalar};
