//! Counter pages: every process running rnccl communicators publishes their live counters in a
//! small file in shared memory, `/dev/shm/rnccl-stats-<pid>` (mode 0600), which other
//! processes of the host (`rnccl top`) read. `RNCCL_STATS=0` turns it off.
//!
//! A publisher thread rewrites the page every [`PUBLISH_INTERVAL`]: it writes a new page to
//! `rnccl-stats-<pid>.tmp` and renames it over the old one, so a reader opening the page gets
//! one complete snapshot — never a torn one — and the collectives themselves only bump the
//! relaxed atomic counters they always keep (`CommStats`). The page is removed when the last
//! communicator of the process is dropped and when the process exits normally; a page whose
//! process is gone (killed) is stale, and [`discover`] reports and removes it.
//!
//! Layout version 2, little-endian, no padding beyond what is listed:
//!
//! | bytes | header (64 bytes) |
//! |---|---|
//! | 0..8 | magic `RNCCLST\0` |
//! | 8..12 | layout version (2) |
//! | 12..16 | pid of the writer |
//! | 16..24 | when written, ns since the Unix epoch |
//! | 24..32 | page bytes in all |
//! | 32..36 | communicator records that follow |
//! | 36..38 | TCP port of the process's status service (`crate::status`) |
//! | 38 | its address family: 0 none, 4 IPv4, 6 IPv6 |
//! | 39 | 0 |
//! | 40..56 | its address (IPv4 in the first 4 bytes) |
//! | 56..64 | 0 |
//!
//! Each communicator record (120 bytes) is followed by its link records (48 bytes each):
//!
//! | bytes | communicator record |
//! |---|---|
//! | 0..8 | communicator id (the same on every rank of the communicator) |
//! | 8..12, 12..16 | rank, nranks |
//! | 16..20 | CUDA device ordinal, `u32::MAX` for host memory |
//! | 20..24 | link records that follow |
//! | 24..32 | operations completed |
//! | 32..72 | the operation in flight: sequence number, count (elements), operations fused, channels, and a packed word (function `ncclFunc_t` order \| data type `ncclDataType_t` << 8 \| algorithm (Ring, Tree, Direct, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT) << 16 \| direct << 24) |
//! | 72..80 | 1 while that operation is in flight, else 0 (the words before are then zero) |
//! | 80..112 | its elapsed ns, steps in all, steps done, bytes moved |
//! | 112..120 | 0 |
//!
//! | bytes | link record |
//! |---|---|
//! | 0..4 | peer rank, `u32::MAX` when the writer does not know it |
//! | 4..6 | channel |
//! | 6 | connection index (0 collective, 1 point-to-point) |
//! | 7 | direction: 0 send, 1 receive, 2 read of a peer's window |
//! | 8 | transport: 0 same process, 1 shared memory, 2 TCP, 3 window, 4 GPU peer access, 5 GPU through host memory, 6 GPU over the network, 7 a kernel channel of NVIDIA NCCL (bytes estimated), 8 a network transfer of NVIDIA NCCL's proxy (both written by rnccl's NCCL profiler plugin), 9 InfiniBand/RoCE between host buffers, 10 GPU over InfiniBand/RoCE (host staged); a reader refuses codes it does not know |
//! | 9..16 | 0 |
//! | 16..24 | payload bytes moved |
//! | 24..32 | slots (NCCL steps) moved |
//! | 32..40 | ns operations stalled waiting on the link, the stall in progress included (CPU ranks; 0 for GPU kernels) |
//! | 40..48 | ns the stall in progress has lasted, 0 when none |

mod discover;
mod format;
pub(crate) mod publisher;

use std::path::{Path as FsPath, PathBuf};
use std::time::Duration;

pub use discover::{Found, discover};
pub use format::{MAGIC, PageError, VERSION, decode, encode};
pub(crate) use publisher::announce_status;
pub use publisher::{CommMeta, Published, Registration, StatusPeer, register};

use super::{LinkSnapshot, OpSnapshot};

/// How often a process rewrites its page.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(100);

/// The folder pages live in.
pub const PAGE_DIR: &str = crate::os::names::SHM_DIR;

/// File names of pages start with this, followed by the writer's pid.
pub const PAGE_PREFIX: &str = crate::os::names::PAGE_PREFIX;

/// The page of process `pid` in `dir`.
pub fn page_path(dir: &FsPath, pid: u32) -> PathBuf {
    dir.join(format!("{PAGE_PREFIX}{pid}"))
}

/// One process's page.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Page {
    /// The writer's pid.
    pub pid: u32,
    /// When it was written, ns since the Unix epoch.
    pub written_unix_ns: u64,
    /// Where the process's status service answers, if it runs one.
    pub status: Option<std::net::SocketAddr>,
    /// Its communicators (one record per rank the process drives).
    pub comms: Vec<CommPage>,
}

/// One communicator rank of a page.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CommPage {
    /// The communicator's id, the same on all its ranks.
    pub comm_id: u64,
    /// This rank.
    pub rank: usize,
    /// Ranks of the communicator.
    pub nranks: usize,
    /// The CUDA device ordinal, or `None` for host memory.
    pub device: Option<usize>,
    /// Operations completed.
    pub ops_completed: u64,
    /// The operation in flight.
    pub op: Option<OpSnapshot>,
    /// Counters of every link.
    pub links: Vec<LinkSnapshot>,
}
