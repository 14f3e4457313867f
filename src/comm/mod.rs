//! Communicators: the public API mirroring nccl.h (init, split, abort, collectives, groups).

mod api;
pub mod buffer_registration;
mod config;
pub mod device_window;
mod group;
mod grow;
mod init;
pub(crate) mod layout;
mod pending;
mod rma;
mod shrink;
mod split;
mod status;
mod suspend;
pub mod window;

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use buffer_registration::BufferRegistration;
pub use config::CommConfig;
pub use device_window::{DeviceWindow, PendingDeviceWindow};
pub use group::{Group, group_end, group_start};
pub use pending::Pending;
pub use rma::SignalWait;
pub use shrink::ShrinkMode;
pub use split::SPLIT_NOCOLOR;
pub use suspend::GpuMemory;
pub use window::{DIRECT_MIN_BYTES, Window};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::exec::host::Connections;
use crate::exec::{Core, State, Watch};
use crate::stats::{CommStats, LinkSnapshot, Path};
use crate::transport::TransportKind;

/// One rank's handle on a communicator.
///
/// A communicator is driven by one thread at a time (it is `Send`, not `Sync`), as in NCCL.
/// Dropping it releases everything: connections close cleanly, shared-memory names were already
/// unlinked when both ends mapped them, sockets close.
pub struct Communicator {
    /// What its ranks share and never change (its engine's shared side included).
    pub(crate) core: Arc<Core>,
    /// Its engine and counters, on the driving thread.
    pub(crate) state: RefCell<State>,
    /// Splits, shrinks and grows so far (each child's tag counts them).
    pub(crate) splits: Cell<u64>,
    /// Set by [`Communicator::revoke`].
    pub(crate) revoked: Cell<bool>,
    /// GPU windows registered so far (each registration's number counts them).
    pub(crate) device_windows: Cell<u64>,
    /// The grow id [`Communicator::grow_id`] made and no grow used yet.
    pub(crate) grow_id: RefCell<Option<crate::bootstrap::unique_id::UniqueId>>,
    /// Its place on the process's counter page (`None` with `RNCCL_STATS=0`).
    _page: Option<crate::stats::page::Registration>,
}

/// Aborts a communicator from any thread (`ncclCommAbort` used as a watchdog): the operation
/// in progress returns [`Error::Aborted`], the communicator becomes unusable, and peers waiting
/// on it fail fast.
#[derive(Clone)]
pub struct AbortHandle(Arc<AtomicBool>, Watch);

impl AbortHandle {
    /// Raises the abort flag (and the one the communicator's GPU kernels poll).
    pub fn abort(&self) {
        self.0.store(true, Ordering::SeqCst);
        if let Some(g) = self.1.gpu() {
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
        self.core.watch.gpu().map(|g| g.info.ordinal)
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
            .filter(|&&r| core.watch.gpu().is_none() || peers[r].host_hash != me.host_hash)
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
        self.core.watch.gpu().map(|g| &g.info)
    }

    /// Where this rank's GPU kernels are cached on disk (`RNCCL_KERNEL_CACHE`), if anywhere.
    pub(crate) fn gpu_kernel_cache(&self) -> Option<&std::path::Path> {
        self.core
            .watch
            .gpu()
            .and_then(|g| g.kernel_cache.as_deref())
    }

    /// The primary context of the GPU this rank runs on, for the crate's own users of the
    /// device (the benchmark's streams and buffers).
    pub(crate) fn gpu_context(&self) -> Option<&Arc<cudarc::driver::CudaContext>> {
        self.core.watch.gpu().map(|g| &g.ctx)
    }

    /// Errors that happened after operations were enqueued (`ncclCommGetAsyncError`): `Ok`
    /// while none did. GPU kernels report a peer that stopped answering (a timeout naming the
    /// peer and channel, with the job's status as a host rank's timeout carries it), an abort,
    /// or a peer running a different operation; a host communicator reports the failure that
    /// made it unusable.
    ///
    /// Errors: [`Error::Timeout`], [`Error::Aborted`], [`Error::Remote`] as described.
    pub fn async_error(&self) -> Result<()> {
        if let Some(g) = self.core.watch.gpu() {
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

    /// The time the tuning model predicts for `args` on this communicator, µs, with NCCL's
    /// byte count (count × element size, × nranks for AllGather and ReduceScatter; NCCL's
    /// `ncclInfoSetDerived`): what `ncclGroupSimulateEnd` reports. `None` for functions the
    /// model does not tune (Send, Recv) or when no algorithm is usable.
    pub fn predicted_time_us(&self, args: &crate::coll::CollArgs) -> Option<f32> {
        use crate::func::Func;
        let mut bytes = (args.count * args.dtype.size()) as u64;
        if matches!(args.func, Func::AllGather | Func::ReduceScatter) {
            bytes *= self.core.nranks as u64;
        }
        self.core.tuning.choose(args.func, bytes).map(|c| c.time_us)
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
        self.send_connections()
            .into_iter()
            .map(|(peer, path, _)| (peer, path))
            .collect()
    }

    /// As [`Communicator::transports`], with the number of connections (one per channel whose
    /// ring sends to that peer) each `(peer rank, transport, connections)`.
    pub fn send_connections(&self) -> Vec<(usize, Path, usize)> {
        let mut all: Vec<(usize, Path)> = match self.core.watch.gpu() {
            Some(g) => g
                .traffic()
                .into_iter()
                .filter(|l| {
                    l.direction == crate::stats::Direction::Send
                        && l.index == 0
                        && l.peer != self.core.rank
                })
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
        all.sort_unstable_by_key(|&(p, t)| (p, t as u8));
        let mut out: Vec<(usize, Path, usize)> = Vec::new();
        for (peer, path) in all {
            match out.last_mut() {
                Some((p, t, n)) if *p == peer && *t == path => *n += 1,
                _ => out.push((peer, path, 1)),
            }
        }
        out
    }

    /// Data sockets per TCP connection (`NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD`, 4 when
    /// auto).
    pub fn sockets_per_connection(&self) -> usize {
        self.core.params.sockets
    }

    /// This rank's live counters (links and the operation in flight), shareable with other
    /// threads that watch the communicator while it runs.
    pub fn stats(&self) -> Arc<CommStats> {
        self.core.stats.clone()
    }

    /// A handle that aborts this communicator from another thread.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.core.abort.clone(), self.core.watch.clone())
    }

    /// Aborts and destroys the communicator (`ncclCommAbort`): connections are dropped without a
    /// clean shutdown, so peers blocked on this rank fail fast instead of waiting out their
    /// timeout.
    pub fn abort(self) {
        self.core.abort.store(true, Ordering::SeqCst);
        if let Some(g) = self.core.watch.gpu() {
            g.raise_abort();
        }
        let mut st = self.state.borrow_mut();
        let why = format!(
            "{} aborted its communicator",
            self.core.describe(self.core.rank)
        );
        let host = st.engine.host();
        self.core.notify_failure(&host.conns.peers(), &why);
        host.conns = Connections::default();
        st.failed = Some("aborted".into());
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        let st = self.state.get_mut();
        if st.failed.is_none() && !self.core.abort.load(Ordering::SeqCst) {
            st.engine.host().conns.finish_all();
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
