//! Bootstrap: rendezvous with the root named in the unique id, then tagged messages between any
//! two ranks (NCCL's `bootstrapSend`/`bootstrapRecv`, internals §6).
//!
//! A rank checks in with the root and receives every rank's [`PeerInfo`]. From then on it talks
//! to peers directly: each rank listens on a message port served by one thread (`poll(2)` over
//! the listener and every incoming connection) that files messages into a mailbox keyed by
//! (sender, communicator, tag); [`BootstrapNet::recv`] waits on the mailbox with a deadline and
//! fails early when the sender's connection closes. Each rank also listens on a data port for the
//! TCP transport's sockets. One [`BootstrapNet`] serves a communicator and every communicator
//! split from it.

pub mod host;
pub mod ifaces;
mod mailbox;
pub mod root;
pub mod unique_id;
pub mod wire;

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mailbox::{Mailbox, Missing, Service};
use root::{CheckIn, RootReply, name_ranks};
use unique_id::UniqueId;
use wire::{FrameError, HelloKind, MAX_HELLO, encode_message, read_hello, write_hello};

use crate::config::Config;
use crate::error::{Error, Result};

/// What every rank tells the others about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PeerInfo {
    /// Rank in the communicator the bootstrap was made for.
    pub rank: u32,
    /// Short host name (for messages).
    pub hostname: String,
    /// Hash of the host identity (`NCCL_HOSTID` or hostname + boot id); equal = same host.
    pub host_hash: u64,
    /// Process id.
    pub pid: u32,
    /// Pid namespace inode (pids compare only within one).
    pub pid_ns: u64,
    /// Device number of `/dev/shm`.
    pub shm_dev: u64,
    /// Address of the bootstrap message listener.
    pub bootstrap: SocketAddr,
    /// Address of the TCP transport data listener.
    pub data: SocketAddr,
    /// Name of the interface those addresses are on.
    pub iface: String,
    /// rnccl version, which must match across ranks.
    pub version: String,
}

impl PeerInfo {
    /// "rank 3 (host b, pid 812)".
    pub fn describe(&self) -> String {
        format!(
            "rank {} (host {}, pid {})",
            self.rank, self.hostname, self.pid
        )
    }
}

/// How long to keep retrying and how long to wait: every bootstrap wait has this deadline.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// When the wait gives up.
    pub at: Instant,
    /// The configured timeout (for messages).
    pub timeout: Duration,
}

impl Deadline {
    /// A deadline `timeout` from now.
    pub fn after(timeout: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + timeout,
            timeout,
        }
    }

    /// Time left (zero once passed).
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// True once the deadline has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// Connect retry policy (`NCCL_SOCKET_RETRY_CNT`, `NCCL_SOCKET_RETRY_SLEEP_MSEC`).
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts after the first.
    pub count: u32,
    /// Linear back-off step.
    pub step: Duration,
}

impl Retry {
    /// From the knobs.
    ///
    /// Errors: a bad knob value.
    pub fn from_config(cfg: &Config) -> Result<Retry> {
        Ok(Retry {
            count: cfg.int("NCCL_SOCKET_RETRY_CNT")?.max(0) as u32,
            step: Duration::from_millis(cfg.int("NCCL_SOCKET_RETRY_SLEEP_MSEC")?.max(1) as u64),
        })
    }
}

/// Connects to `addr`, retrying refused/unreachable connections with linear back-off until the
/// retry count or the deadline runs out.
///
/// Errors: [`Error::Remote`] naming `what` and the address.
pub fn connect_retry(
    addr: SocketAddr,
    what: &str,
    retry: Retry,
    deadline: Deadline,
) -> Result<TcpStream> {
    let mut attempt = 0u32;
    loop {
        let wait = deadline
            .remaining()
            .max(Duration::from_millis(10))
            .min(Duration::from_secs(10));
        match TcpStream::connect_timeout(&addr, wait) {
            Ok(s) => return Ok(s),
            Err(e) => {
                attempt += 1;
                let transient = matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::HostUnreachable
                        | std::io::ErrorKind::NetworkUnreachable
                );
                if !transient || attempt > retry.count || deadline.passed() {
                    return Err(Error::Remote(format!(
                        "cannot connect to {what} at {addr}: {e} (gave up after {attempt} attempts)"
                    )));
                }
                let pause = (retry.step * attempt).min(deadline.remaining());
                std::thread::sleep(pause);
            }
        }
    }
}

/// A rank's bootstrap network: the peer table, tagged messages and the data listener.
pub struct BootstrapNet {
    rank: usize,
    peers: Vec<PeerInfo>,
    magic: u64,
    retry: Retry,
    mailbox: Arc<Mailbox>,
    service: Service,
    outgoing: Mutex<HashMap<usize, Arc<Mutex<TcpStream>>>>,
    data: Mutex<DataListener>,
}

/// The TCP transport's listener and the sockets it accepted but nobody claimed yet.
struct DataListener {
    listener: TcpListener,
    pending: HashMap<u64, Vec<(u32, TcpStream)>>,
}

/// A data socket's hello.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct DataHello {
    /// The connection this socket belongs to.
    pub token: u64,
    /// Its index among the connection's sockets.
    pub index: u32,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct PeerHello {
    from: u32,
}

impl BootstrapNet {
    /// Checks in with the root of `id` as `rank` of `nranks` and starts this rank's listeners.
    /// Rank 0 starts the root first when the id came from `NCCL_COMM_ID`.
    ///
    /// Errors: [`Error::Timeout`] naming the ranks that never arrived (reported by the root), or
    /// that the root was unreachable; [`Error::InvalidUsage`] for knob problems, a refused
    /// check-in (duplicate rank, nranks mismatch) or a version mismatch; [`Error::System`] when
    /// sockets cannot be opened.
    pub fn init(
        id: &UniqueId,
        rank: usize,
        nranks: usize,
        cfg: &Config,
        timeout: Duration,
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
        let data_listener = TcpListener::bind(SocketAddr::new(iface.addr, 0)).map_err(|e| {
            Error::system(
                format!(
                    "opening the data listener on {} ({})",
                    iface.name, iface.addr
                ),
                e,
            )
        })?;
        data_listener
            .set_nonblocking(true)
            .map_err(|e| Error::system("configuring the data listener", e))?;
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
            data: local(&data_listener)?,
            iface: iface.name.clone(),
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
            data: Mutex::new(DataListener {
                listener: data_listener,
                pending: HashMap::new(),
            }),
        }))
    }

    /// This rank (in the bootstrap's numbering).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn nranks(&self) -> usize {
        self.peers.len()
    }

    /// Every rank's info.
    pub fn peers(&self) -> &[PeerInfo] {
        &self.peers
    }

    /// The job's magic.
    pub fn magic(&self) -> u64 {
        self.magic
    }

    /// Retry policy for connects.
    pub fn retry(&self) -> Retry {
        self.retry
    }

    /// "rank 3 (host b, pid 812)".
    pub fn describe(&self, rank: usize) -> String {
        self.peers[rank].describe()
    }

    /// Sends `payload` to `to` under (`comm`, `tag`). Messages between one pair with one tag
    /// arrive in order.
    ///
    /// Errors: [`Error::Remote`] when the peer cannot be reached or the connection fails.
    pub fn send(
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
    pub fn recv(
        &self,
        from: usize,
        comm: u64,
        tag: u64,
        deadline: Deadline,
        what: &str,
    ) -> Result<Vec<u8>> {
        self.recv_abortable(from, comm, tag, deadline, what, &AtomicBool::new(false))
    }

    /// As [`BootstrapNet::recv`], also returning [`Error::Aborted`] once `abort` is raised.
    ///
    /// Errors: as [`BootstrapNet::recv`], plus [`Error::Aborted`].
    pub fn recv_abortable(
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

    /// Waits for `count` data sockets announcing `token` on this rank's data listener.
    ///
    /// Errors: [`Error::Timeout`] naming `from` at the deadline; [`Error::Aborted`].
    pub fn accept_data(
        &self,
        token: u64,
        count: usize,
        from: &str,
        deadline: Deadline,
        abort: &AtomicBool,
    ) -> Result<Vec<TcpStream>> {
        loop {
            if abort.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(Error::Aborted(
                    "connecting TCP data sockets interrupted: the communicator was aborted".into(),
                ));
            }
            {
                let mut d = self.data.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    match d.listener.accept() {
                        Ok((mut s, addr)) => {
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                            match read_hello::<DataHello>(
                                &mut s,
                                self.magic,
                                HelloKind::DataSocket,
                                MAX_HELLO,
                            ) {
                                Ok(h) => d.pending.entry(h.token).or_default().push((h.index, s)),
                                Err(e) => log_dropped(addr, &e),
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(Error::system("accepting a data socket", e)),
                    }
                }
                if d.pending.get(&token).is_some_and(|v| v.len() >= count) {
                    let mut socks = d.pending.remove(&token).unwrap_or_default();
                    socks.sort_by_key(|(i, _)| *i);
                    return Ok(socks.into_iter().map(|(_, s)| s).collect());
                }
            }
            if deadline.passed() {
                return Err(Error::Timeout {
                    what: "connecting TCP data sockets".into(),
                    waited_for: from.to_string(),
                    after: deadline.timeout,
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Opens `count` data sockets to `to`'s data listener, each announcing `token`.
    ///
    /// Errors: [`Error::Remote`] when the peer cannot be reached.
    pub fn connect_data(
        &self,
        to: usize,
        token: u64,
        count: usize,
        deadline: Deadline,
    ) -> Result<Vec<TcpStream>> {
        let what = format!("{}'s data listener", self.describe(to));
        (0..count)
            .map(|index| {
                let mut s = connect_retry(self.peers[to].data, &what, self.retry, deadline)?;
                write_hello(
                    &mut s,
                    self.magic,
                    HelloKind::DataSocket,
                    &DataHello {
                        token,
                        index: index as u32,
                    },
                )
                .map_err(|e| Error::Remote(format!("greeting {what}: {e}")))?;
                Ok(s)
            })
            .collect()
    }
}

impl Drop for BootstrapNet {
    fn drop(&mut self) {
        self.service.stop();
    }
}

fn log_dropped(addr: SocketAddr, e: &FrameError) {
    tracing::debug!(target: "rnccl::bootstrap", "dropped a connection from {addr}: {e}");
}

fn check_in(
    id: &UniqueId,
    rank: usize,
    nranks: usize,
    info: PeerInfo,
    retry: Retry,
    deadline: Deadline,
) -> Result<Vec<PeerInfo>> {
    let root_what = if id.root_by_rank0 {
        "the bootstrap root (run by rank 0)".to_string()
    } else {
        "the bootstrap root".to_string()
    };
    let mut s = connect_retry(id.root, &root_what, retry, deadline).map_err(|e| match e {
        Error::Remote(m) => Error::Timeout {
            what: format!("reaching the bootstrap root ({m}); check that rank 0 is running and that the unique id / NCCL_COMM_ID / MASTER_ADDR:MASTER_PORT is right"),
            waited_for: "the bootstrap root".into(),
            after: deadline.timeout,
        },
        other => other,
    })?;
    let checkin = CheckIn {
        rank: rank as u32,
        nranks: nranks as u32,
        info,
    };
    write_hello(&mut s, id.magic, HelloKind::RootCheckIn, &checkin).map_err(|e| {
        Error::Remote(format!(
            "checking in with the bootstrap root at {}: {e}",
            id.root
        ))
    })?;
    // The root sends the missing-rank list at its own deadline; wait a little longer for it.
    s.set_read_timeout(Some(deadline.remaining() + Duration::from_secs(5)))
        .ok();
    let reply: RootReply = read_hello(&mut s, id.magic, HelloKind::RootReply, usize::MAX >> 1)
        .map_err(|e| match e {
            FrameError::Io(ref io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Error::Timeout {
                    what: "in bootstrap waiting for the root's peer table".into(),
                    waited_for: "the bootstrap root (it stopped answering)".into(),
                    after: deadline.timeout,
                }
            }
            other => Error::Remote(format!("the bootstrap root at {} failed: {other}", id.root)),
        })?;
    match reply {
        RootReply::Peers(p) if p.len() == nranks => Ok(p),
        RootReply::Peers(p) => Err(Error::Internal(format!(
            "root sent {} peers for nranks={nranks}",
            p.len()
        ))),
        RootReply::Refused(why) => Err(Error::invalid_usage(format!(
            "the bootstrap root refused rank {rank}: {why}"
        ))),
        RootReply::Missing {
            missing,
            joined,
            nranks,
            waited_s,
        } => Err(Error::Timeout {
            what: format!("in bootstrap: {joined} of {nranks} ranks joined"),
            waited_for: format!("{} (never arrived)", name_ranks(&missing)),
            after: Duration::from_secs_f64(waited_s),
        }),
    }
}
