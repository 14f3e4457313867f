//! [`BootstrapNet`]: one rank's side of the bootstrap — its check-in with the root, the peer
//! table, and tagged messages to and from any rank.

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::checkin::check_in;
use super::mailbox::{Mailbox, Missing, Service};
use super::unique_id::UniqueId;
use super::wire::{HelloKind, PeerHello, encode_message, write_hello};
use super::{Deadline, PeerInfo, Retry, connect_retry, host, root};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::topo::ifaces;

/// A rank's bootstrap network: the peer table and tagged messages between any two ranks.
pub(crate) struct BootstrapNet {
    rank: usize,
    peers: Vec<PeerInfo>,
    magic: u64,
    retry: Retry,
    mailbox: Arc<Mailbox>,
    service: Service,
    outgoing: Mutex<HashMap<usize, Arc<Mutex<TcpStream>>>>,
}

impl BootstrapNet {
    /// Checks in with the root of `id` as `rank` of `nranks` and starts this rank's listeners.
    /// Rank 0 starts the root first when the id came from `NCCL_COMM_ID`. `ib_fabric` is the
    /// RDMA fabric this rank can reach others on (told to them in its [`PeerInfo`]).
    ///
    /// Errors: [`Error::Timeout`] naming the ranks that never arrived (reported by the root), or
    /// that the root was unreachable; [`Error::InvalidUsage`] for knob problems, a refused
    /// check-in (duplicate rank, nranks mismatch) or a version mismatch; [`Error::System`] when
    /// sockets cannot be opened.
    pub(crate) fn init(
        id: &UniqueId,
        rank: usize,
        nranks: usize,
        cfg: &Config,
        timeout: Duration,
        ib_fabric: Option<u64>,
    ) -> Result<Arc<BootstrapNet>> {
        let deadline = Deadline::after(timeout);
        let retry = Retry::from_config(cfg)?;
        let comm_id_hint = if id.root_by_rank0 {
            Some(id.root)
        } else {
            None
        };
        let iface = ifaces::bootstrap_interface(cfg, comm_id_hint)?;
        let hosted_root = if id.root_by_rank0 && rank == 0 {
            let l = TcpListener::bind(id.root).map_err(|e| {
                Error::system(format!("rank 0 starting the bootstrap root at {} (NCCL_COMM_ID / MASTER_ADDR:MASTER_PORT)", id.root), e)
            })?;
            Some(root::spawn(l, id.magic, timeout)?)
        } else {
            None
        };
        let msg_listener = TcpListener::bind(SocketAddr::new(iface.addr, 0)).map_err(|e| {
            Error::system(
                format!(
                    "opening the bootstrap listener on {} ({})",
                    iface.name, iface.addr
                ),
                e,
            )
        })?;
        let local = |l: &TcpListener| {
            l.local_addr()
                .map_err(|e| Error::system("reading a listener address", e))
        };
        let info = PeerInfo {
            rank: rank as u32,
            hostname: host::short_hostname(),
            host_hash: host::fnv1a(host::host_id(cfg).as_bytes()),
            pid: std::process::id(),
            pid_ns: host::pid_namespace(),
            shm_dev: host::shm_dev(),
            bootstrap: local(&msg_listener)?,
            iface: iface.name.clone(),
            ib_fabric,
            version: env!("CARGO_PKG_VERSION").to_string(),
        };
        let mailbox = Arc::new(Mailbox::new(nranks));
        let service = Service::start(msg_listener, id.magic, mailbox.clone())?;
        let peers = check_in(id, rank, nranks, info, retry, deadline);
        // A rank hosting the root waits until the root has answered everyone (it exits right
        // after), so exiting on an error cannot cut another rank's answer short.
        if let Some(root) = hosted_root {
            let _ = root.join();
        }
        let peers = peers?;
        if let Some(p) = peers.iter().find(|p| p.version != peers[rank].version) {
            return Err(Error::invalid_usage(format!(
                "rnccl version mismatch: {} runs {} but this rank runs {}; use the same build everywhere",
                p.describe(),
                p.version,
                peers[rank].version
            )));
        }
        tracing::info!(target: "rnccl::bootstrap", "Bootstrap: Using {}:{} (rank {rank} of {nranks})", iface.name, iface.addr);
        Ok(Arc::new(BootstrapNet {
            rank,
            peers,
            magic: id.magic,
            retry,
            mailbox,
            service,
            outgoing: Mutex::new(HashMap::new()),
        }))
    }

    /// Every rank's info.
    pub(crate) fn peers(&self) -> &[PeerInfo] {
        &self.peers
    }

    /// The job's magic.
    pub(crate) fn magic(&self) -> u64 {
        self.magic
    }

    /// Retry policy for connects.
    pub(crate) fn retry(&self) -> Retry {
        self.retry
    }

    /// "rank 3 (host b, pid 812)".
    pub(crate) fn describe(&self, rank: usize) -> String {
        self.peers[rank].describe()
    }

    /// Sends `payload` to `to` under (`comm`, `tag`). Messages between one pair with one tag
    /// arrive in order.
    ///
    /// Errors: [`Error::Remote`] when the peer cannot be reached or the connection fails.
    pub(crate) fn send(
        &self,
        to: usize,
        comm: u64,
        tag: u64,
        payload: &[u8],
        deadline: Deadline,
    ) -> Result<()> {
        if to == self.rank {
            self.mailbox.deliver(to, comm, tag, payload.to_vec());
            return Ok(());
        }
        let conn = {
            let mut out = self.outgoing.lock().unwrap_or_else(|p| p.into_inner());
            match out.get(&to) {
                Some(c) => c.clone(),
                None => {
                    let what = format!("{}'s bootstrap listener", self.describe(to));
                    let mut s =
                        connect_retry(self.peers[to].bootstrap, &what, self.retry, deadline)?;
                    s.set_nodelay(true).ok();
                    s.set_write_timeout(Some(deadline.timeout)).ok();
                    write_hello(
                        &mut s,
                        self.magic,
                        HelloKind::PeerMessages,
                        &PeerHello {
                            from: self.rank as u32,
                        },
                    )
                    .map_err(|e| Error::Remote(format!("greeting {}: {e}", self.describe(to))))?;
                    let c = Arc::new(Mutex::new(s));
                    out.insert(to, c.clone());
                    c
                }
            }
        };
        let frame = encode_message(comm, tag, payload);
        let mut s = conn.lock().unwrap_or_else(|p| p.into_inner());
        s.write_all(&frame).map_err(|e| {
            Error::Remote(format!(
                "sending a bootstrap message to {}: {e}",
                self.describe(to)
            ))
        })
    }

    /// Waits for the next message from `from` under (`comm`, `tag`).
    ///
    /// Errors: [`Error::Timeout`] naming the peer at the deadline; [`Error::Remote`] when the
    /// peer's connection closed first.
    pub(crate) fn recv(
        &self,
        from: usize,
        comm: u64,
        tag: u64,
        deadline: Deadline,
        what: &str,
    ) -> Result<Vec<u8>> {
        self.recv_abortable(from, comm, tag, deadline, what, &AtomicBool::new(false))
    }

    /// The next message from `from` under (`comm`, `tag`) if one has arrived; never waits.
    pub(crate) fn try_recv(&self, from: usize, comm: u64, tag: u64) -> Option<Vec<u8>> {
        let now = Deadline::after(Duration::ZERO);
        self.mailbox
            .take(from, comm, tag, now, &AtomicBool::new(false))
            .ok()
    }

    /// As [`BootstrapNet::recv`], also returning [`Error::Aborted`] once `abort` is raised.
    ///
    /// Errors: as [`BootstrapNet::recv`], plus [`Error::Aborted`].
    pub(crate) fn recv_abortable(
        &self,
        from: usize,
        comm: u64,
        tag: u64,
        deadline: Deadline,
        what: &str,
        abort: &AtomicBool,
    ) -> Result<Vec<u8>> {
        self.mailbox
            .take(from, comm, tag, deadline, abort)
            .map_err(|m| match m {
                Missing::Closed => Error::Remote(format!(
                    "{} closed its bootstrap connection {what} (it exited or aborted)",
                    self.describe(from)
                )),
                Missing::Timeout => Error::Timeout {
                    what: what.to_string(),
                    waited_for: self.describe(from),
                    after: deadline.timeout,
                },
                Missing::Aborted => {
                    Error::Aborted(format!("{what} interrupted: the communicator was aborted"))
                }
            })
    }
}

impl Drop for BootstrapNet {
    fn drop(&mut self) {
        self.service.stop();
    }
}
