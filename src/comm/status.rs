//! How a communicator answers those who watch it: its counter page and status replies
//! (`Published`: who it is, its links, its operation and history, its ranks) and the hang report
//! a timed-out collective carries.

use crate::error::Error;
use crate::exec::Core;
use crate::exec::gpu::GpuComm;
use crate::stats::LinkSnapshot;
use crate::stats::page::StatusPeer;

impl crate::stats::page::Published for Core {
    fn meta(&self) -> crate::stats::page::CommMeta {
        crate::stats::page::CommMeta {
            comm_id: comm_id(self.net.magic(), self.tag),
            rank: self.rank,
            nranks: self.nranks,
            device: self.watch.gpu().map(|g| g.info.ordinal),
        }
    }

    /// The links bytes take between this rank and its peers: a GPU communicator's FIFOs, and
    /// its host engine's connections only once they carried an operation on host memory (they
    /// are idle otherwise, and would name a path the job's bytes do not take). A rank's
    /// connection to itself (point-to-point to self, a copy on its own device) is no link.
    fn links(&self) -> Vec<LinkSnapshot> {
        let mut links = self.stats.links();
        if let Some(g) = self.watch.gpu() {
            links.retain(|l| l.bytes > 0);
            links.extend(g.traffic());
        }
        links.retain(|l| l.peer != self.rank);
        links
    }

    fn op(&self) -> &crate::stats::OpProgress {
        if let Some(g) = self.watch.gpu() {
            g.ops.settle(g.device_ops(), self.stats.op());
        }
        self.stats.op()
    }

    fn peers(&self) -> Vec<StatusPeer> {
        let peers = self.net.peers();
        (0..self.nranks)
            .map(|r| {
                let p = &peers[self.net_rank[r]];
                StatusPeer {
                    rank: r,
                    host: p.hostname.clone(),
                    pid: p.pid,
                    status: p.status,
                }
            })
            .collect()
    }

    fn magic(&self) -> Option<u64> {
        Some(self.net.magic())
    }
}

impl Core {
    /// What `g`'s kernels reported ([`GpuComm::async_error`]); a timeout carries the
    /// job's status as [`Core::with_hang_report`] makes it, once per communicator. The
    /// operation the kernels stopped in stays in flight in the rank's status until this tells
    /// a caller, so the report shows it stuck.
    ///
    /// Errors: as [`GpuComm::async_error`].
    pub(crate) fn gpu_async_error(&self, g: &GpuComm) -> crate::error::Result<()> {
        let Err(e) = g.async_error(|r| self.describe(r)) else {
            return Ok(());
        };
        let e = match e {
            Error::Timeout {
                what,
                waited_for,
                after,
            } => {
                let full = g.hang_report.get_or_init(|| {
                    let plain = Error::Timeout {
                        what: what.clone(),
                        waited_for: waited_for.clone(),
                        after,
                    };
                    match self.with_hang_report(plain) {
                        Error::Timeout { waited_for, .. } => waited_for,
                        _ => waited_for.clone(),
                    }
                });
                Error::Timeout {
                    what,
                    waited_for: full.clone(),
                    after,
                }
            }
            e => e,
        };
        g.failure_told
            .store(true, std::sync::atomic::Ordering::Release);
        Err(e)
    }

    /// `e` with what the job's status shows when it is a timeout (see
    /// [`crate::status::hang`]), which also goes to this rank's NCCL_DEBUG log and to the ranks
    /// not stuck with this one; any other error as it is.
    pub(crate) fn with_hang_report(&self, e: Error) -> Error {
        let Error::Timeout {
            what,
            waited_for,
            after,
        } = e
        else {
            return e;
        };
        use crate::stats::page::Published;
        let plain = Error::Timeout {
            what: what.clone(),
            waited_for: waited_for.clone(),
            after,
        };
        let comm_id = self.meta().comm_id;
        let Some(report) = crate::status::hang::report(
            comm_id,
            &Published::peers(self),
            self.net.magic(),
            &format!("{}: {plain}", self.describe(self.rank)),
        ) else {
            return plain;
        };
        let e = Error::Timeout {
            what,
            waited_for: format!("{waited_for}; job status: {report}"),
            after,
        };
        tracing::warn!(target: "rnccl::status", "{}: {e}", self.describe(self.rank));
        e
    }
}

/// The id counter pages give a communicator: the same on all its ranks (the bootstrap's magic,
/// from the unique id, and the communicator's tag), mixed with SplitMix64's finaliser
/// (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
fn comm_id(magic: u64, tag: u64) -> u64 {
    let mut z = magic ^ tag.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
