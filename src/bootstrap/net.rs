//! [`BootstrapNet`]: one rank's side of the bootstrap — its check-in with the root, the peer
//! table, and tagged messages to and from any rank.

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::checkin::check_in;
use super::mailbox::{Mailbox, Missing, Service};
use super::unique_id::UniqueId;
use super::wire::{HelloKind, PeerHello, encode_message, write_hello};
use super::{Deadline, PeerInfo, Retry, connect_unless, far_end_gone, host, root, tags};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::os::host::process_alive;
use crate::topo::ifaces;

/// What a rank tells the others about itself in its [`PeerInfo`], besides what the bootstrap
/// finds out (host, process, address).
#[derive(Debug, Clone, Default)]
pub(crate) struct Announce {
    /// The RDMA fabric this rank can reach others on.
    pub ib_fabric: Option<u64>,
    /// Its process's status service, if it runs one.
    pub status: Option<SocketAddr>,
    /// PCI bus id of its GPU, for a GPU rank.
    pub gpu_bus: Option<String>,
}

/// A rank's bootstrap network: the peer table and tagged messages between any two ranks.
pub(crate) struct BootstrapNet {
    rank: usize,
    peers: Vec<PeerInfo>,
    magic: u64,
    retry: Retry,
    mailbox: Arc<Mailbox>,
    service: Service,
    outgoing: Mutex<HashMap<usize, Arc<Mutex<TcpStream>>>>,
    silent_link: Option<Duration>,
}

impl BootstrapNet {
    /// The interface a rank of `id` uses for the bootstrap and its TCP listeners
    /// (`NCCL_SOCKET_IFNAME`, `NCCL_SOCKET_FAMILY`; with `NCCL_COMM_ID`, the one that reaches
    /// the root): what [`BootstrapNet::init`] binds to, and where the caller may start services
    /// it announces to the other ranks.
    ///
    /// Errors: as [`ifaces::bootstrap_interface`].
    pub(crate) fn interface(id: &UniqueId, cfg: &Config) -> Result<ifaces::Interface> {
        let comm_id_hint = id.root_by_rank0.then_some(id.root);
        ifaces::bootstrap_interface(cfg, comm_id_hint)
    }

    /// Checks in with the root of `id` as `rank` of `nranks` and starts this rank's listeners
    /// on `iface` (from [`BootstrapNet::interface`]). Rank 0 starts the root first when the id
    /// came from `NCCL_COMM_ID`. `announce` is what the other ranks learn of this one besides
    /// its address (its [`PeerInfo`]).
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
        iface: &ifaces::Interface,
        announce: Announce,
    ) -> Result<Arc<BootstrapNet>> {
        let deadline = Deadline::after(timeout);
        let retry = Retry::from_config(cfg)?;
        let silent_link = super::silence::silent_link(cfg)?;
        let hosted_root = if id.root_by_rank0 && rank == 0 {
            let l = TcpListener::bind(id.root).map_err(|e| {
                let taken = if e.kind() == std::io::ErrorKind::AddrInUse {
                    ": another process holds that port (another job, or one still running); give this job its own port"
                } else {
                    ""
                };
                Error::system(format!("rank 0 starting the bootstrap root at {} (NCCL_COMM_ID / MASTER_ADDR:MASTER_PORT){taken}", id.root), e)
            })?;
            Some(root::spawn(l, id.magic, timeout, id.job.clone())?)
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
            hostname: crate::os::host::short_hostname(),
            host_hash: crate::hash::nccl_hash(host::host_id(cfg).as_bytes()),
            pid: std::process::id(),
            pid_ns: crate::os::host::pid_namespace(),
            shm_dev: crate::os::host::shm_dev(),
            bootstrap: local(&msg_listener)?,
            iface: iface.name.clone(),
            ib_fabric: announce.ib_fabric,
            gpu_bus: announce.gpu_bus,
            version: env!("CARGO_PKG_VERSION").to_string(),
            status: announce.status,
        };
        let mailbox = Arc::new(Mailbox::new(nranks));
        let service = Service::start(msg_listener, id.magic, mailbox.clone(), silent_link)?;
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
            silent_link,
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

    /// How long a TCP link may go unanswered before it fails (`RNCCL_SILENT_LINK`; None: the
    /// kernel's defaults).
    pub(crate) fn silent_link(&self) -> Option<Duration> {
        self.silent_link
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
        let conn = self.outgoing(to, self.retry, deadline, Some(comm))?;
        let frame = encode_message(comm, tag, payload);
        let mut s = conn.lock().unwrap_or_else(|p| p.into_inner());
        s.write_all(&frame).map_err(|e| {
            let what = format!("sending a bootstrap message to {}", self.describe(to));
            if let Some((r, text)) = self.mailbox.gave_up(comm) {
                Error::Remote(format!(
                    "{} gave up while this rank was {what}; first failure: {text}",
                    self.describe(r)
                ))
            } else if self.local_process_gone(to) {
                Error::Remote(format!("{what}: it exited (process gone)"))
            } else {
                Error::Remote(format!("{what}: {e}"))
            }
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
        let mut probed = false;
        loop {
            let slice = Deadline {
                at: deadline.at.min(Instant::now() + LIVENESS_EVERY),
                timeout: deadline.timeout,
            };
            let missing = match self.mailbox.take(from, comm, tag, slice, abort) {
                Ok(m) => return Ok(m),
                Err(Missing::Timeout) if !deadline.passed() => {
                    match self.peer_gone(from, &mut probed) {
                        Some(gone) => gone,
                        None => continue,
                    }
                }
                Err(m) => m,
            };
            let notice = |r: usize| match self.mailbox.gave_up(comm) {
                Some((who, text)) if who == r => format!("; first failure: {text}"),
                _ => String::new(),
            };
            return Err(match missing {
                Missing::Closed => Error::Remote(format!(
                    "{} closed its bootstrap connection while this rank was {what} (it exited or \
                     aborted){}",
                    self.describe(from),
                    notice(from)
                )),
                Missing::Gone(how) => Error::Remote(format!(
                    "{} {how} while this rank was {what}{}",
                    self.describe(from),
                    notice(from)
                )),
                Missing::GaveUp(r) => Error::Remote(format!(
                    "{} gave up while this rank was {what}{}",
                    self.describe(r),
                    notice(r)
                )),
                Missing::Timeout => Error::Timeout {
                    what: what.to_string(),
                    waited_for: self.describe(from),
                    after: deadline.timeout,
                },
                Missing::Aborted => {
                    Error::Aborted(format!("{what} interrupted: the communicator was aborted"))
                }
            });
        }
    }

    /// Tells bootstrap ranks `to`, in order, that this rank gives up on communicator `comm` and
    /// why (best effort: one connection attempt each, 300 ms in all), which ends their waits on
    /// `comm` with this rank named (see [`BootstrapNet::recv_abortable`]).
    /// The text says where the failure began: this rank's `why`, or, when another rank's
    /// notice already reached this one, that notice unchanged (a cascade names its first
    /// failure, not a chain of ranks that gave up in turn).
    pub(crate) fn notify_failure(&self, comm: u64, to: &[usize], why: &str) {
        let deadline = Deadline::after(Duration::from_millis(300));
        let text: String = match self.mailbox.gave_up(comm) {
            Some((_, first)) => first,
            None => format!("{}: {why}", self.describe(self.rank))
                .chars()
                .take(600)
                .collect(),
        };
        let frame = encode_message(comm, tags::failure_notice(), text.as_bytes());
        let once = Retry {
            count: 0,
            step: Duration::ZERO,
        };
        for &r in to.iter().filter(|&&r| r != self.rank) {
            if deadline.passed() {
                break;
            }
            if let Ok(conn) = self.outgoing(r, once, deadline, None) {
                let mut s = conn.lock().unwrap_or_else(|p| p.into_inner());
                let _ = s.write_all(&frame);
            }
        }
    }

    /// The first rank that gave up on communicator `comm` (sent a failure notice), if any.
    pub(crate) fn gave_up(&self, comm: u64) -> Option<usize> {
        self.mailbox.gave_up(comm).map(|(r, _)| r)
    }

    /// How `from` is known to be gone, if it is: on this host (same process namespace), its
    /// process no longer exists; elsewhere, its host closed or stopped answering this rank's
    /// connection to its listener (opened once for the purpose when this rank had none: a
    /// refused connection means its listener is gone).
    fn peer_gone(&self, from: usize, probed: &mut bool) -> Option<Missing> {
        let (me, peer) = (&self.peers[self.rank], &self.peers[from]);
        if from == self.rank {
            return None;
        }
        if peer.host_hash == me.host_hash && peer.pid_ns == me.pid_ns {
            return self
                .local_process_gone(from)
                .then_some(Missing::Gone("exited (process gone)"));
        }
        let existing = self
            .outgoing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&from)
            .cloned();
        let conn = match existing {
            Some(c) => c,
            None if !*probed => {
                *probed = true;
                let once = Retry {
                    count: 0,
                    step: Duration::ZERO,
                };
                match self.outgoing(from, once, Deadline::after(PROBE_CONNECT), None) {
                    Ok(c) => c,
                    Err(_) => return refused(peer.bootstrap),
                }
            }
            None => return None,
        };
        let s = conn.try_lock().ok()?;
        far_end_gone(&s).map(Missing::Gone)
    }

    /// Whether `rank` runs on this host, in this process namespace, and its process is gone.
    fn local_process_gone(&self, rank: usize) -> bool {
        let (me, peer) = (&self.peers[self.rank], &self.peers[rank]);
        rank != self.rank
            && peer.host_hash == me.host_hash
            && peer.pid_ns == me.pid_ns
            && !process_alive(peer.pid)
    }

    /// The connection to `to`'s message listener, opened (and greeted) on first use. Retries
    /// stop early when `to` is found gone or, for a message of communicator `comm`, when a rank
    /// gave up on it.
    fn outgoing(
        &self,
        to: usize,
        retry: Retry,
        deadline: Deadline,
        comm: Option<u64>,
    ) -> Result<Arc<Mutex<TcpStream>>> {
        let mut out = self.outgoing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = out.get(&to) {
            return Ok(c.clone());
        }
        let what = format!("{}'s bootstrap listener", self.describe(to));
        let hopeless = || {
            if self.local_process_gone(to) {
                return Some(Error::Remote(format!(
                    "cannot reach {what}: {} exited (process gone)",
                    self.describe(to)
                )));
            }
            let (r, text) = self.mailbox.gave_up(comm?)?;
            Some(Error::Remote(format!(
                "{} gave up while this rank was connecting to {what}; first failure: {text}",
                self.describe(r)
            )))
        };
        let mut s = connect_unless(self.peers[to].bootstrap, &what, retry, deadline, &hopeless)?;
        s.set_nodelay(true).ok();
        s.set_write_timeout(Some(deadline.timeout)).ok();
        super::silence::detect_silence(&s, self.silent_link);
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
        Ok(c)
    }
}

/// How often a wait on a peer checks that the peer still exists.
const LIVENESS_EVERY: Duration = Duration::from_millis(100);
/// How long a wait may spend opening a connection to a remote peer to watch it.
const PROBE_CONNECT: Duration = Duration::from_secs(1);

/// A peer whose listener refused this rank's connection is gone; one that did not answer in
/// time is not known to be.
fn refused(addr: std::net::SocketAddr) -> Option<Missing> {
    let probe = TcpStream::connect_timeout(&addr, PROBE_CONNECT);
    matches!(probe, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused).then_some(
        Missing::Gone("refused a connection to its bootstrap listener (its process is gone)"),
    )
}

impl Drop for BootstrapNet {
    fn drop(&mut self) {
        self.service.stop();
    }
}
