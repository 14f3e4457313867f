//! [`Core`]: what every rank of a communicator shares and never changes — its place in the
//! job (rank, peers through the bootstrap), its channels and slot geometry, the knobs its
//! engine runs with, its live counters and abort flag — and [`Watch`], what others read of
//! its engine while it runs. The engines run with a `&Core`; the communicator (`crate::comm`)
//! builds it and hands it out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::gpu::GpuComm;
use super::host::{PeerView, WaitPolicy};
use crate::bootstrap::{BootstrapNet, Deadline, tags};
use crate::coll::{Geometry, Rings};
use crate::config::Config;
use crate::config::syntax::AlgoProtoList;
use crate::error::Result;
use crate::graph::tuning::Model;
use crate::os::host::process_alive;
use crate::stats::CommStats;
use crate::transport::TransportParams;
use crate::transport::tcp::listener::DataListener;

/// What watchers of a communicator rank read of its engine, from any thread: its counter page,
/// the status service, and abort handles.
#[derive(Clone, Default)]
pub(crate) enum Watch {
    /// A host rank: its connections count into [`Core::stats`] themselves.
    #[default]
    Host,
    /// A GPU rank: its kernels' reports, operation words and connection counters.
    Gpu(Arc<GpuComm>),
}

impl Watch {
    /// The GPU's side of the engine, on a GPU rank.
    pub(crate) fn gpu(&self) -> Option<&Arc<GpuComm>> {
        match self {
            Watch::Host => None,
            Watch::Gpu(g) => Some(g),
        }
    }
}

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
    /// What watchers of this rank (its counter page, the status service, abort handles) read
    /// of its engine: nothing more for host ranks; the GPU's kernels' reports and connections
    /// for a GPU rank.
    pub watch: Watch,
}

impl Core {
    /// "rank 3 (host b, pid 812)" for a communicator rank.
    pub(crate) fn describe(&self, rank: usize) -> String {
        let p = &self.net.peers()[self.net_rank[rank]];
        format!("rank {rank} (host {}, pid {})", p.hostname, p.pid)
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
    /// Errors: as [`Core::all_gather_among`].
    pub(crate) fn all_gather_bytes(
        &self,
        tag: u64,
        mine: &[u8],
        what: &str,
    ) -> Result<Vec<Vec<u8>>> {
        self.post_to_all(tag, mine)?;
        self.collect_from_all(tag, what)
    }

    /// The first half of [`Core::all_gather_bytes`]: sends `mine` to every rank (itself
    /// included) under bootstrap `tag` without waiting for anyone, so one thread can post for
    /// several communicators before collecting any ([`Core::collect_from_all`]).
    ///
    /// Errors: bootstrap errors of the sends (a peer that left).
    pub(crate) fn post_to_all(&self, tag: u64, mine: &[u8]) -> Result<()> {
        let deadline = self.deadline();
        for r in 0..self.nranks {
            self.net
                .send(self.net_rank[r], self.tag, tag, mine, deadline)?;
        }
        Ok(())
    }

    /// The second half of [`Core::all_gather_bytes`]: what each rank posted under `tag`,
    /// indexed by rank.
    ///
    /// Errors: as [`Core::all_gather_among`].
    pub(crate) fn collect_from_all(&self, tag: u64, what: &str) -> Result<Vec<Vec<u8>>> {
        let deadline = self.deadline();
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

    /// As [`Core::all_gather_bytes`] among `ranks` only (this rank among them) under bootstrap
    /// namespace `comm`, returning what each sent in the order of `ranks`; waits end early when
    /// `abort` is raised. Shrink runs it among the ranks that stay, in its child's namespace and
    /// with a flag of its own: the parent's flag may be raised, and its namespace may hold a
    /// failure notice that would end every wait in it.
    ///
    /// Errors: bootstrap [`crate::error::Error::Timeout`] naming the rank that did not send
    /// (`what` says where), [`crate::error::Error::Remote`] for one that left,
    /// [`crate::error::Error::Aborted`] once `abort` is raised.
    pub(crate) fn all_gather_among(
        &self,
        comm: u64,
        ranks: &[usize],
        tag: u64,
        mine: &[u8],
        what: &str,
        abort: &AtomicBool,
    ) -> Result<Vec<Vec<u8>>> {
        let deadline = self.deadline();
        for &r in ranks {
            self.net.send(self.net_rank[r], comm, tag, mine, deadline)?;
        }
        ranks
            .iter()
            .map(|&r| {
                self.net
                    .recv_abortable(self.net_rank[r], comm, tag, deadline, what, abort)
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
        me.host_hash == peer.host_hash && peer.pid_ns == me.pid_ns && !process_alive(peer.pid)
    }
}
