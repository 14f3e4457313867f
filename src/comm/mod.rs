//! Communicators: the public API mirroring nccl.h (init, split, abort, collectives, groups).

mod api;
mod config;
mod enqueue;
mod gpu;
mod gpu_launch;
mod gpu_ops;
mod gpu_staging;
mod group;
mod init;
mod label;
pub(crate) mod layout;
mod pending;
mod plans;
mod split;
mod status;
pub mod window;

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use config::CommConfig;
pub use group::{Group, group_end, group_start};
pub use pending::Pending;
pub use split::SPLIT_NOCOLOR;
pub use window::{DIRECT_MIN_BYTES, Window};

use crate::bootstrap::{BootstrapNet, Deadline, tags};
use crate::coll::{Geometry, Rings};
use crate::config::Config;
use crate::config::syntax::AlgoProtoList;
use crate::error::{Error, Result};
use crate::exec::{Connections, PeerView, WaitPolicy};
use crate::graph::tuning::Model;
use crate::stats::{CommStats, LinkSnapshot, Path};
use crate::transport::tcp::listener::DataListener;
use crate::transport::{TransportKind, TransportParams};

/// What every rank of a communicator shares and never changes.
pub(crate) struct Core {
    pub net: Arc<BootstrapNet>,
    /// This rank's TCP data listener (shared with communicators split from this one).
    pub listener: Arc<DataListener>,
    pub tag: u64,
    pub rank: usize,
    pub nranks: usize,
    pub net_rank: Vec<usize>,
    pub rings: Rings,
    pub geo: Geometry,
    pub params: TransportParams,
    /// `NCCL_ALGO` as rank 0 had it (for messages).
    pub algo_knob: Option<String>,
    /// `NCCL_PROTO` (rank 0's), parsed: which protocols GPU kernels may use.
    pub proto: Option<AlgoProtoList>,
    /// The tuning model that picks each operation's algorithm and channel count.
    pub tuning: Model,
    pub timeout: Duration,
    pub policy: WaitPolicy,
    pub abort: Arc<AtomicBool>,
    pub knobs: Arc<Config>,
    /// Live counters, readable from any thread.
    pub stats: Arc<CommStats>,
    /// The GPU this rank runs on, and its connections (None: host memory only).
    pub gpu: Option<Arc<gpu::GpuComm>>,
}

impl Core {
    /// "rank 3 (host b, pid 812)" for a communicator rank.
    pub(crate) fn describe(&self, rank: usize) -> String {
        let p = &self.net.peers()[self.net_rank[rank]];
        format!("rank {rank} (host {}, pid {})", p.hostname, p.pid)
    }

    /// The same core bound to GPU `ordinal`, connected to its peers' GPUs (every rank binds
    /// at the same time, during init or split).
    ///
    /// Errors: as [`gpu::GpuComm::new`].
    pub(super) fn with_gpu(mut self, ordinal: usize) -> Result<Core> {
        let g = gpu::GpuComm::new(gpu::GpuSetup {
            ordinal,
            net: &self.net,
            comm_tag: self.tag,
            rank: self.rank,
            net_rank: &self.net_rank,
            rings: &self.rings,
            slot_bytes: self.geo.slot_bytes,
            p2p_disable: self.params.p2p_disable,
            timeout: self.timeout,
            abort: &self.abort,
            listener: &self.listener,
            sockets: self.params.sockets,
            knobs: &self.knobs,
            ib: self.params.ib.as_deref(),
        })?;
        self.gpu = Some(Arc::new(g));
        Ok(self)
    }

    pub(crate) fn deadline(&self) -> Deadline {
        Deadline::after(self.timeout)
    }

    /// What `rank` reported when it gave up, if it left a failure notice (waiting up to 200 ms
    /// for one): the root cause of a cascade of failures.
    pub(crate) fn failure_notice(&self, rank: usize) -> Option<String> {
        let notice = self.net.recv(
            self.net_rank[rank],
            self.tag,
            tags::failure_notice(),
            Deadline::after(std::time::Duration::from_millis(200)),
            "waiting for a failure notice",
        );
        notice
            .ok()
            .map(|t| String::from_utf8_lossy(&t).into_owned())
    }

    /// Sends `mine` to every rank (itself included) under bootstrap `tag` and returns what each
    /// rank sent, indexed by rank: the all-gather that split and window registration run.
    ///
    /// Errors: bootstrap [`Error::Timeout`] naming the rank that did not send (`what` says
    /// where), [`Error::Aborted`] when the communicator is aborted meanwhile.
    pub(crate) fn all_gather_bytes(
        &self,
        tag: u64,
        mine: &[u8],
        what: &str,
    ) -> Result<Vec<Vec<u8>>> {
        let deadline = self.deadline();
        for r in 0..self.nranks {
            self.net
                .send(self.net_rank[r], self.tag, tag, mine, deadline)?;
        }
        (0..self.nranks)
            .map(|r| {
                self.net.recv_abortable(
                    self.net_rank[r],
                    self.tag,
                    tag,
                    deadline,
                    what,
                    &self.abort,
                )
            })
            .collect()
    }

    /// Tells why this rank is giving up (best effort, within 300 ms), so peers' errors can name
    /// the root cause and their bootstrap waits end at once: to every rank when this rank is
    /// the first to give up that it knows of (whoever waits on it, or on a rank waiting on it,
    /// learns now rather than at its timeout), else to `peers` only (a cascade does not flood the
    /// job).
    pub(crate) fn notify_failure(&self, peers: &[usize], why: &str) {
        let to: Vec<usize> = if self.net.gave_up(self.tag).is_none() {
            // Neighbours first: they are the ones blocked on this rank.
            peers
                .iter()
                .copied()
                .chain((0..self.nranks).filter(|r| !peers.contains(r)))
                .collect()
        } else {
            peers.to_vec()
        };
        let to: Vec<usize> = to
            .into_iter()
            .filter(|&p| p != self.rank)
            .map(|p| self.net_rank[p])
            .collect();
        self.net.notify_failure(self.tag, &to, why);
    }
}

impl PeerView for Core {
    fn describe(&self, rank: usize) -> String {
        Core::describe(self, rank)
    }

    fn failure_notice(&self, rank: usize) -> Option<String> {
        Core::failure_notice(self, rank)
    }

    fn aborted(&self) -> bool {
        self.abort.load(Ordering::SeqCst)
    }

    fn policy(&self) -> WaitPolicy {
        self.policy
    }

    fn process_gone(&self, rank: usize) -> bool {
        let peers = self.net.peers();
        let (me, peer) = (
            &peers[self.net_rank[self.rank]],
            &peers[self.net_rank[rank]],
        );
        me.host_hash == peer.host_hash
            && peer.pid_ns == me.pid_ns
            && !crate::transport::fifo::process_alive(peer.pid)
    }
}

/// Mutable per-rank state.
pub(crate) struct State {
    pub conns: Connections,
    /// Set after an error: the communicator can only be dropped.
    pub failed: Option<String>,
    pub splits: u64,
    pub ops: u64,
    /// Plans of operations seen before.
    pub plans: plans::PlanCache,
    /// How each operation size has fared with cached and with streamed FIFO slots.
    pub slot_stores: crate::exec::SlotStores,
    /// The same choice for the output of direct operations on windows, which peers read back
    /// as FIFO slots are read.
    pub direct_stores: crate::exec::SlotStores,
    /// Collectives (not Send/Recv) queued so far: the sequence number direct operations agree on.
    pub colls: u64,
    /// Registered windows.
    pub windows: window::Windows,
    /// Device scratch (GPU communicators).
    pub gpu_scratch: gpu_launch::GpuScratch,
}

impl State {
    fn new() -> State {
        State {
            conns: Connections::default(),
            failed: None,
            splits: 0,
            ops: 0,
            plans: plans::PlanCache::default(),
            slot_stores: Default::default(),
            direct_stores: Default::default(),
            colls: 0,
            windows: Default::default(),
            gpu_scratch: Default::default(),
        }
    }

    /// The address of at least `bytes` bytes of device scratch on `ctx`'s GPU, usable by work
    /// on `stream` from now on.
    ///
    /// Errors: [`Error::Cuda`] when the GPU is out of memory.
    fn gpu_scratch(
        &mut self,
        ctx: &Arc<cudarc::driver::CudaContext>,
        bytes: usize,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<u64> {
        self.gpu_scratch.get(ctx, bytes, stream)
    }
}

/// One rank's handle on a communicator.
///
/// A communicator is driven by one thread at a time (it is `Send`, not `Sync`), as in NCCL.
/// Dropping it releases everything: connections close cleanly, shared-memory names were already
/// unlinked when both ends mapped them, sockets close.
pub struct Communicator {
    pub(crate) core: Arc<Core>,
    pub(crate) state: RefCell<State>,
    /// Its place on the process's counter page (`None` with `RNCCL_STATS=0`).
    _page: Option<crate::stats::page::Registration>,
}

/// Aborts a communicator from any thread (`ncclCommAbort` used as a watchdog): the operation
/// in progress returns [`Error::Aborted`], the communicator becomes unusable, and peers waiting
/// on it fail fast.
#[derive(Clone)]
pub struct AbortHandle(Arc<AtomicBool>, Option<Arc<gpu::GpuComm>>);

impl AbortHandle {
    /// Raises the abort flag (and the one the communicator's GPU kernels poll).
    pub fn abort(&self) {
        self.0.store(true, Ordering::SeqCst);
        if let Some(g) = &self.1 {
            g.raise_abort();
        }
    }
}

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AbortHandle")
            .field(&self.0.load(Ordering::Relaxed))
            .finish()
    }
}

impl Communicator {
    /// This rank (`ncclCommUserRank`).
    pub fn rank(&self) -> usize {
        self.core.rank
    }

    /// The CUDA device this rank runs on (`ncclCommCuDevice`), if it runs on one.
    pub fn gpu_ordinal(&self) -> Option<usize> {
        self.core.gpu.as_ref().map(|g| g.info.ordinal)
    }

    /// The network transport this rank's connections to other hosts use, as NCCL names it
    /// (`NET/IB`, `NET/Socket`), or `None` when every peer is reached through memory. GPU
    /// ranks stage inter-host traffic through host memory, over IB or sockets by the same
    /// rule as CPU ranks.
    pub(crate) fn net_transport(&self) -> Option<&'static str> {
        let core = &self.core;
        let peers = core.net.peers();
        let me = &peers[core.net_rank[core.rank]];
        let kinds: Vec<TransportKind> = core
            .net_rank
            .iter()
            .filter(|&&r| r != core.net_rank[core.rank])
            .filter(|&&r| core.gpu.is_none() || peers[r].host_hash != me.host_hash)
            .map(|&r| core.params.select(me, &peers[r]))
            .collect();
        if kinds.contains(&TransportKind::Ib) {
            Some(TransportKind::Ib.nccl_name())
        } else if kinds.contains(&TransportKind::Tcp) {
            Some(TransportKind::Tcp.nccl_name())
        } else {
            None
        }
    }

    /// The GPU this rank runs on: name, PCI bus id, compute capability.
    pub fn gpu_info(&self) -> Option<&crate::device::cuda::DeviceInfo> {
        self.core.gpu.as_ref().map(|g| &g.info)
    }

    /// Where this rank's GPU kernels are cached on disk (`RNCCL_KERNEL_CACHE`), if anywhere.
    pub(crate) fn gpu_kernel_cache(&self) -> Option<&std::path::Path> {
        self.core
            .gpu
            .as_ref()
            .and_then(|g| g.kernel_cache.as_deref())
    }

    /// The primary context of the GPU this rank runs on, for the crate's own users of the
    /// device (the benchmark's streams and buffers).
    pub(crate) fn gpu_context(&self) -> Option<&Arc<cudarc::driver::CudaContext>> {
        self.core.gpu.as_ref().map(|g| &g.ctx)
    }

    /// Errors that happened after operations were enqueued (`ncclCommGetAsyncError`): `Ok`
    /// while none did. GPU kernels report a peer that stopped answering (a timeout naming the
    /// peer and channel, with the job's status as a host rank's timeout carries it), an abort,
    /// or a peer running a different operation; a host communicator reports the failure that
    /// made it unusable.
    ///
    /// Errors: [`Error::Timeout`], [`Error::Aborted`], [`Error::Remote`] as described.
    pub fn async_error(&self) -> Result<()> {
        if let Some(g) = &self.core.gpu {
            self.core.gpu_async_error(g)?;
        }
        if self.core.abort.load(Ordering::SeqCst) {
            return Err(Error::Aborted("the communicator was aborted".into()));
        }
        match &self.state.try_borrow().ok().and_then(|s| s.failed.clone()) {
            Some(why) => Err(Error::Remote(why.clone())),
            None => Ok(()),
        }
    }

    /// Number of ranks (`ncclCommCount`).
    pub fn nranks(&self) -> usize {
        self.core.nranks
    }

    /// Channels collectives are spread over.
    pub fn nchannels(&self) -> usize {
        self.core.rings.nchannels()
    }

    /// Ring order of every channel.
    pub fn rings(&self) -> &[Vec<usize>] {
        self.core.rings.order()
    }

    /// Bytes per transport FIFO slot (`NCCL_BUFFSIZE / 8`).
    pub fn slot_bytes(&self) -> usize {
        self.core.geo.slot_bytes
    }

    /// The knobs this communicator was created with.
    pub fn knobs(&self) -> &Config {
        &self.core.knobs
    }

    /// "rank 3 (host b, pid 812)".
    pub fn describe(&self, rank: usize) -> String {
        self.core.describe(rank)
    }

    /// Traffic so far on every link of this rank: connections it opened, and peers' windows
    /// it read directly.
    pub fn traffic(&self) -> Vec<LinkSnapshot> {
        use crate::stats::page::Published;
        self.core.links()
    }

    /// How this rank reaches the peers it sends to on its rings, one entry per peer in peer
    /// order: `(peer rank, transport)`. GPU ranks report the connections made at init; CPU
    /// ranks, which connect on first use, the transport the same rule will pick (NCCL's order:
    /// same process, then shared memory on one host, then the network).
    pub fn transports(&self) -> Vec<(usize, Path)> {
        let mut out: Vec<(usize, Path)> = match &self.core.gpu {
            Some(g) => g
                .traffic()
                .into_iter()
                .filter(|l| l.direction == crate::stats::Direction::Send && l.index == 0)
                .map(|l| (l.peer, l.transport))
                .collect(),
            None => {
                let peers = self.core.net.peers();
                let me = &peers[self.core.net_rank[self.core.rank]];
                (0..self.core.rings.nchannels())
                    .map(|c| self.core.rings.neighbours(c, self.core.rank).1)
                    .filter(|&next| next != self.core.rank)
                    .map(|next| {
                        let peer = &peers[self.core.net_rank[next]];
                        (next, Path::from(self.core.params.select(me, peer)))
                    })
                    .collect()
            }
        };
        out.sort_unstable_by_key(|&(p, t)| (p, t as u8));
        out.dedup();
        out
    }

    /// This rank's live counters (links and the operation in flight), shareable with other
    /// threads that watch the communicator while it runs.
    pub fn stats(&self) -> Arc<CommStats> {
        self.core.stats.clone()
    }

    /// A handle that aborts this communicator from another thread.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.core.abort.clone(), self.core.gpu.clone())
    }

    /// Aborts and destroys the communicator (`ncclCommAbort`): connections are dropped without a
    /// clean shutdown, so peers blocked on this rank fail fast instead of waiting out their
    /// timeout.
    pub fn abort(self) {
        self.core.abort.store(true, Ordering::SeqCst);
        if let Some(g) = &self.core.gpu {
            g.raise_abort();
        }
        let mut st = self.state.borrow_mut();
        let why = format!(
            "{} aborted its communicator",
            self.core.describe(self.core.rank)
        );
        self.core.notify_failure(&st.conns.peers(), &why);
        st.failed = Some("aborted".into());
        st.conns = Connections::default();
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        let st = self.state.get_mut();
        if st.failed.is_none() && !self.core.abort.load(Ordering::SeqCst) {
            st.conns.finish_all();
        }
    }
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.core.rank)
            .field("nranks", &self.core.nranks)
            .field("nchannels", &self.nchannels())
            .finish()
    }
}
