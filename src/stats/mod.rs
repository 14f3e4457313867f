//! A communicator's live counters: bytes and slots per link (connection, or a peer's window read
//! directly), and the operation in flight with its progress. [`CommStats`] is shared (`Sync`):
//! the executor updates it with relaxed atomics while any thread reads it (`rnccl bench
//! --format json`, the coming live view and hang reports).

mod history;
mod op;
pub mod page;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use history::coarse_unix_ns;
pub use history::{HISTORY_LEN, OpRecord};
pub(crate) use op::coarse_now_ns;
#[cfg(test)]
pub(crate) use op::test_op;
pub use op::{OpInfo, OpProgress, OpSnapshot};

use crate::conn::ConnKey;

/// Counters of one direction of one link.
#[derive(Debug, Default)]
pub struct LinkCounters {
    /// Payload bytes moved.
    bytes: AtomicU64,
    /// Slots (NCCL steps) or chunks moved.
    slots: AtomicU64,
    /// Nanoseconds operations stalled waiting on this link (CPU ranks), stalls that ended.
    wait_ns: AtomicU64,
    /// When the stall in progress on this link began (coarse monotonic ns), 0 when none.
    stalled_since: AtomicU64,
}

impl LinkCounters {
    /// Counts one slot (or chunk) of `bytes`.
    #[inline]
    pub fn add(&self, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.slots.fetch_add(1, Ordering::Relaxed);
    }

    /// An operation starts stalling on this link (for data to receive, or a free slot to
    /// send into), noticed at `now_ns` on the coarse monotonic clock.
    pub fn stall_begin(&self, now_ns: u64) {
        self.stalled_since.store(now_ns.max(1), Ordering::Relaxed);
    }

    /// The stall on this link ended after `ns` nanoseconds, which are added to its waiting.
    pub fn stall_end(&self, ns: u64) {
        self.wait_ns.fetch_add(ns, Ordering::Relaxed);
        self.stalled_since.store(0, Ordering::Relaxed);
    }

    /// Nanoseconds the stall in progress has lasted at `now_ns`, 0 when none.
    pub fn stalled_ns(&self, now_ns: u64) -> u64 {
        match self.stalled_since.load(Ordering::Relaxed) {
            0 => 0,
            since => now_ns.saturating_sub(since),
        }
    }

    /// Nanoseconds waited so far at `now_ns`: ended stalls and the one in progress.
    pub fn wait_ns(&self, now_ns: u64) -> u64 {
        self.wait_ns.load(Ordering::Relaxed) + self.stalled_ns(now_ns)
    }

    /// Bytes so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Slots so far.
    pub fn slots(&self) -> u64 {
        self.slots.load(Ordering::Relaxed)
    }
}

/// Which way a link carries data, seen from this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Direction {
    /// This rank sends.
    Send,
    /// This rank receives.
    Recv,
    /// This rank reads the peer's registered window in place (direct collectives).
    Read,
}

/// How a link's bytes move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Path {
    /// A heap FIFO between ranks of one process.
    SameProcess,
    /// A shared-memory FIFO between processes of one host.
    Shm,
    /// TCP sockets.
    Tcp,
    /// Direct reads of a peer's registered window.
    Window,
    /// A GPU FIFO the kernels reach directly (same GPU, NVLink or PCIe peer access).
    GpuP2p,
    /// A GPU FIFO in pinned host memory (`NCCL_P2P_DISABLE=1`, or no peer access).
    GpuHost,
    /// GPU FIFOs in pinned host memory on two hosts, carried over TCP by the proxy thread.
    GpuNet,
    /// A channel of NVIDIA NCCL's kernels, seen through rnccl's NCCL profiler plugin: NVLink,
    /// PCIe or shared memory, not told apart. Its bytes are estimated (each channel's share of
    /// the collective's bus bytes when the channel's kernel work ends), its slots count the
    /// channel's kernel work items.
    NcclKernel,
    /// A network transfer of NVIDIA NCCL's proxy, seen through rnccl's NCCL profiler plugin:
    /// bytes and steps as NCCL's proxy reports them.
    NcclNet,
    /// RDMA writes between hosts over InfiniBand/RoCE (host memory at both ends).
    Ib,
    /// GPU FIFOs in pinned host memory on two hosts, carried by RDMA writes over
    /// InfiniBand/RoCE from one FIFO's slots into the other's.
    GpuNetIb,
}

impl Path {
    /// The transport's name as NCCL's `NCCL_DEBUG=INFO` connection lines give it (`via
    /// SHM/direct/direct`, `via NET/Socket`…), for the paths rnccl's own connections take.
    pub fn nccl_name(self) -> &'static str {
        match self {
            Path::SameProcess => "P2P/direct pointer",
            Path::Shm => "SHM/direct/direct",
            Path::Tcp => "NET/Socket",
            Path::Ib => "NET/IB",
            Path::Window => "P2P/window",
            Path::GpuP2p => "P2P/IPC",
            Path::GpuHost => "SHM/host memory",
            Path::GpuNet => "NET/Socket (host staged)",
            Path::GpuNetIb => "NET/IB (host staged)",
            Path::NcclKernel => "NCCL kernel",
            Path::NcclNet => "NCCL proxy",
        }
    }
}

/// The peer of a link whose peer the writer does not know (NVIDIA NCCL's kernel channels on
/// more than two ranks: the profiler API does not say which ring neighbour a channel feeds).
pub const UNKNOWN_PEER: usize = u32::MAX as usize;

/// A snapshot of one link's counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LinkSnapshot {
    /// Peer rank.
    pub peer: usize,
    /// Channel.
    pub channel: u16,
    /// 0 = collective connection, 1 = point-to-point connection (0 for window reads).
    pub index: u8,
    /// Direction.
    pub direction: Direction,
    /// How the bytes move.
    pub transport: Path,
    /// Payload bytes so far.
    pub bytes: u64,
    /// Slots (or direct chunks) so far.
    pub slots: u64,
    /// Nanoseconds operations stalled waiting on this link so far, the stall in progress
    /// included (CPU ranks: rounds of the executor that moved nothing, charged to the
    /// connections its lanes could not use; GPU kernels wait on the device and leave it 0).
    pub wait_ns: u64,
    /// Nanoseconds the stall in progress on this link has lasted, 0 when none: a rank stuck on
    /// this link shows it growing.
    pub stalled_ns: u64,
}

/// One link's identity and counters.
#[derive(Debug, Clone)]
pub struct Link {
    /// The connection (for window reads: the peer, channel 0).
    pub key: ConnKey,
    /// Direction.
    pub direction: Direction,
    /// How the bytes move.
    pub path: Path,
    /// Live counters.
    pub counters: Arc<LinkCounters>,
}

impl Link {
    /// Reads the counters.
    pub fn snapshot(&self) -> LinkSnapshot {
        let now = op::coarse_now_ns();
        LinkSnapshot {
            peer: self.key.peer,
            channel: self.key.channel,
            index: self.key.index,
            direction: self.direction,
            transport: self.path,
            bytes: self.counters.bytes(),
            slots: self.counters.slots(),
            wait_ns: self.counters.wait_ns(now),
            stalled_ns: self.counters.stalled_ns(now),
        }
    }
}

/// Every counter of one communicator rank, readable from any thread while it runs.
#[derive(Debug, Default)]
pub struct CommStats {
    links: Mutex<Vec<Link>>,
    /// Per peer, bytes read from its windows by direct collectives (made on first use).
    window_reads: Mutex<Vec<Arc<LinkCounters>>>,
    op: OpProgress,
}

impl CommStats {
    /// No links, no operation.
    pub fn new() -> CommStats {
        CommStats::default()
    }

    /// Registers a link (a connection just opened) and returns its counters.
    pub fn add_link(&self, key: ConnKey, direction: Direction, path: Path) -> Arc<LinkCounters> {
        let counters = Arc::new(LinkCounters::default());
        let link = Link {
            key,
            direction,
            path,
            counters: counters.clone(),
        };
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(link);
        counters
    }

    /// Per peer rank (`0..nranks`), the counters of direct reads of its windows.
    pub fn window_reads(&self, nranks: usize) -> Vec<Arc<LinkCounters>> {
        let mut w = self.window_reads.lock().unwrap_or_else(|p| p.into_inner());
        while w.len() < nranks {
            let peer = w.len();
            let c = self.add_link(ConnKey::collective(peer, 0), Direction::Read, Path::Window);
            w.push(c);
        }
        w[..nranks].to_vec()
    }

    /// Every link's counters now.
    pub fn links(&self) -> Vec<LinkSnapshot> {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(Link::snapshot)
            .collect()
    }

    /// The operation in flight and its progress.
    pub fn op(&self) -> &OpProgress {
        &self.op
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_another_thread() {
        let stats = Arc::new(CommStats::new());
        let c = stats.add_link(ConnKey::p2p(1), Direction::Send, Path::Tcp);
        let reader = {
            let stats = stats.clone();
            std::thread::spawn(move || {
                loop {
                    let l = stats.links();
                    if l[0].bytes == 3 * 4096 {
                        return l;
                    }
                    std::thread::yield_now();
                }
            })
        };
        for _ in 0..3 {
            c.add(4096);
        }
        let l = reader.join().unwrap();
        assert_eq!((l[0].slots, l[0].index, l[0].transport), (3, 1, Path::Tcp));
        let w = stats.window_reads(2);
        w[1].add(10);
        let reads: Vec<_> = stats
            .links()
            .into_iter()
            .filter(|l| l.direction == Direction::Read)
            .collect();
        assert_eq!(reads.len(), 2);
        assert_eq!((reads[1].peer, reads[1].bytes), (1, 10));
        assert_eq!(stats.window_reads(2).len(), 2, "made once");
    }
}
