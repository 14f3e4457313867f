//! Connecting, through the bootstrap.
//!
//! The receiving end of every connection decides and creates: a heap FIFO registered under a
//! random token (same process), a shared-memory segment (same host), a token the sender's data
//! sockets will present to this rank's TCP data listener (other hosts), or its IB queue pairs
//! and registered slots (other hosts with IB). It sends that offer to the sender, which
//! attaches and acknowledges (for IB, with its own queue pairs and CTS FIFO); the receiver then
//! unlinks the segment, collects the sockets or connects its queue pairs. Offers go out before any wait, so a set of connections between any ranks
//! completes without ordering constraints.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use super::fifo::{FifoMemory, HeapMemory, MemReceiver, MemSender, init_fifo, region_bytes};
use super::ib::{IbAddr, IbNet, IbReceiver, IbSender};
use super::params::TransportParams;
use super::shm::ShmFifo;
use super::tcp::listener::DataListener;
use super::tcp::{self, Slots};
use super::{RecvConn, SendConn, SendEnd, TransportKind};
use crate::bootstrap::{BootstrapNet, Deadline, PeerInfo, tags};
use crate::conn::ConnKey;
use crate::error::{Error, Result};
use crate::os::shm::ShmSegment;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum Offer {
    SameProcess {
        token: u64,
        slot_bytes: u64,
    },
    Shm {
        name: String,
        slot_bytes: u64,
    },
    Tcp {
        /// The receiver's data listener.
        addr: SocketAddr,
        token: u64,
        sockets: u32,
        threads: u32,
        slot_bytes: u64,
    },
    Ib {
        /// The receiver's queue pairs and slots.
        addr: IbAddr,
        slot_bytes: u64,
    },
}

fn same_process_fifos() -> &'static Mutex<HashMap<u64, Arc<HeapMemory>>> {
    static FIFOS: OnceLock<Mutex<HashMap<u64, Arc<HeapMemory>>>> = OnceLock::new();
    FIFOS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What a communicator passes to [`connect`].
pub(crate) struct Endpoints<'a> {
    /// The bootstrap network.
    pub net: &'a BootstrapNet,
    /// This rank's TCP data listener.
    pub listener: &'a DataListener,
    /// The communicator's message namespace.
    pub comm_tag: u64,
    /// This rank in the communicator.
    pub rank: usize,
    /// Communicator rank → bootstrap rank.
    pub net_rank: &'a [usize],
    /// Transport knobs.
    pub params: TransportParams,
    /// Bytes per FIFO slot (communicator-wide).
    pub slot_bytes: usize,
    /// Bound on every wait.
    pub deadline: Deadline,
    /// Raised to interrupt every wait.
    pub abort: &'a AtomicBool,
}

impl Endpoints<'_> {
    fn info(&self, comm_rank: usize) -> &PeerInfo {
        &self.net.peers()[self.net_rank[comm_rank]]
    }

    fn describe(&self, comm_rank: usize) -> String {
        let p = self.info(comm_rank);
        format!("rank {comm_rank} (host {}, pid {})", p.hostname, p.pid)
    }

    fn offer_to(&self, key: &ConnKey, offer: &Offer) -> Result<()> {
        let body = serde_json::to_vec(offer)
            .map_err(|e| Error::Internal(format!("encoding a connection offer: {e}")))?;
        self.net.send(
            self.net_rank[key.peer],
            self.comm_tag,
            tags::conn_offer(key),
            &body,
            self.deadline,
        )
    }

    fn ack_to(&self, key: &ConnKey) -> Result<()> {
        self.ack_with(key, b"")
    }

    fn ack_with(&self, key: &ConnKey, body: &[u8]) -> Result<()> {
        self.net.send(
            self.net_rank[key.peer],
            self.comm_tag,
            tags::conn_ack(key),
            body,
            self.deadline,
        )
    }

    fn wait_ack(&self, key: &ConnKey) -> Result<Vec<u8>> {
        let what = format!(
            "waiting for {} to attach channel {}",
            self.describe(key.peer),
            key.channel
        );
        self.net.recv_abortable(
            self.net_rank[key.peer],
            self.comm_tag,
            tags::conn_ack(key),
            self.deadline,
            &what,
            self.abort,
        )
    }

    /// The IB devices, for a connection the selection made IB.
    fn ib(&self) -> Result<&IbNet> {
        self.params
            .ib
            .as_deref()
            .ok_or_else(|| Error::Internal("an IB connection without IB devices".into()))
    }

    /// A FIFO end failed to attach: the peer's memory is not what its offer said.
    fn bad_fifo(&self, key: &ConnKey, what: &str, e: String) -> Error {
        Error::Remote(format!("{what} from {}: {e}", self.describe(key.peer)))
    }

    /// The error for a peer's segment `name` that could not be opened: gone from `/dev/shm`
    /// means the peer gave up after offering it (its creator unlinks it on failure), so the peer
    /// is named with what it reported, if anything.
    fn withdrawn(&self, key: &ConnKey, name: &str, e: Error) -> Error {
        match e {
            Error::System { os_error, .. } if os_error.kind() == std::io::ErrorKind::NotFound => {
                let from = self.net_rank[key.peer];
                let notice = self
                    .net
                    .try_recv(from, self.comm_tag, tags::failure_notice())
                    .map(|b| format!("; first failure: {}", String::from_utf8_lossy(&b)))
                    .unwrap_or_default();
                Error::Remote(format!(
                    "{} withdrew its shared-memory segment {name} for channel {} before this \
                     rank opened it: it gave up (failed or exited){notice}",
                    self.describe(key.peer),
                    key.channel
                ))
            }
            other => other,
        }
    }
}

enum Pending {
    SameProcess(u64, Arc<HeapMemory>),
    Shm(ShmFifo),
    Tcp {
        token: u64,
        sockets: usize,
        threads: usize,
    },
    Ib(Box<IbReceiver>),
}

/// Connections being set up in three phases, so one thread can connect several communicators
/// at once: [`ConnectJob::start`] offers (never waits), [`ConnectJob::attach`] attaches this
/// rank's sending ends to the peers' offers, [`ConnectJob::finish`] waits for the peers to
/// attach to this rank's receiving ends. Every rank that appears as a peer must do the same
/// with the mirror keys at about the same time.
pub(crate) struct ConnectJob {
    pending: Vec<(ConnKey, Pending, TransportKind)>,
    sends: Vec<ConnKey>,
    attached: Vec<(ConnKey, SendConn, TransportKind)>,
}

/// Sending ends and receiving ends made by a [`ConnectJob`].
pub(crate) type Made = (
    Vec<(ConnKey, SendConn, TransportKind)>,
    Vec<(ConnKey, RecvConn, TransportKind)>,
);

impl ConnectJob {
    /// Phase 1: creates the receiving ends and sends their offers (never waits on a peer).
    ///
    /// Errors: [`Error::System`] when a segment cannot be created, [`Error::Remote`] when an
    /// offer cannot be delivered.
    pub(crate) fn start(
        ep: &Endpoints<'_>,
        sends: &[ConnKey],
        recvs: &[ConnKey],
    ) -> Result<ConnectJob> {
        let me = ep.info(ep.rank).clone();
        let slot = ep.slot_bytes;
        let mut pending = Vec::with_capacity(recvs.len());
        for key in recvs {
            let kind = ep.params.select(&me, ep.info(key.peer));
            let (offer, p) = match kind {
                TransportKind::SameProcess => {
                    let mem = Arc::new(HeapMemory::new(slot).map_err(|e| {
                        Error::system(
                            format!("allocating a same-process FIFO: {e}"),
                            std::io::Error::from(std::io::ErrorKind::OutOfMemory),
                        )
                    })?);
                    init_fifo(&*mem, slot).map_err(Error::Internal)?;
                    let token = crate::bootstrap::unique_id::random_magic()?;
                    same_process_fifos()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(token, mem.clone());
                    let offer = Offer::SameProcess {
                        token,
                        slot_bytes: slot as u64,
                    };
                    (offer, Pending::SameProcess(token, mem))
                }
                TransportKind::Shm => {
                    let len = region_bytes(slot).ok_or_else(|| {
                        Error::invalid_usage(format!("FIFO slots of {slot} bytes overflow"))
                    })?;
                    let seg = ShmFifo::new(ShmSegment::create(len)?).map_err(Error::Internal)?;
                    init_fifo(&seg, slot).map_err(Error::Internal)?;
                    let offer = Offer::Shm {
                        name: seg.name().to_string(),
                        slot_bytes: slot as u64,
                    };
                    (offer, Pending::Shm(seg))
                }
                TransportKind::Tcp => {
                    let token = crate::bootstrap::unique_id::random_magic()?;
                    let (sockets, threads) = (ep.params.sockets, ep.params.socket_threads);
                    let offer = Offer::Tcp {
                        addr: ep.listener.addr(),
                        token,
                        sockets: sockets as u32,
                        threads: threads as u32,
                        slot_bytes: slot as u64,
                    };
                    let p = Pending::Tcp {
                        token,
                        sockets,
                        threads,
                    };
                    (offer, p)
                }
                TransportKind::Ib => {
                    let ib = ep.ib()?;
                    let peer = ep.describe(key.peer);
                    let port = ib.port_for(usize::from(key.channel)).map_err(|e| {
                        Error::Remote(format!("opening the IB port for {peer}: {e}"))
                    })?;
                    let end = IbReceiver::new(port, &ib.params, slot, &peer)
                        .map_err(|e| Error::Remote(e.to_string()))?;
                    let offer = Offer::Ib {
                        addr: end.addr(),
                        slot_bytes: slot as u64,
                    };
                    (offer, Pending::Ib(Box::new(end)))
                }
            };
            ep.offer_to(key, &offer)?;
            pending.push((*key, p, kind));
        }
        Ok(ConnectJob {
            pending,
            sends: sends.to_vec(),
            attached: Vec::new(),
        })
    }

    /// Phase 2: waits for the peers' offers and attaches the sending ends.
    ///
    /// Errors: [`Error::Timeout`] naming a peer whose offer never came; [`Error::Remote`] for a
    /// malformed offer or an unreachable data listener.
    pub(crate) fn attach(&mut self, ep: &Endpoints<'_>) -> Result<()> {
        for key in std::mem::take(&mut self.sends) {
            let from = ep.net_rank[key.peer];
            let peer = ep.describe(key.peer);
            let what = format!("connecting channel {} to {peer}", key.channel);
            let body = ep.net.recv_abortable(
                from,
                ep.comm_tag,
                tags::conn_offer(&key),
                ep.deadline,
                &what,
                ep.abort,
            )?;
            let offer: Offer = serde_json::from_slice(&body).map_err(|e| {
                Error::Remote(format!("malformed connection offer from {peer}: {e}"))
            })?;
            let (conn, kind): (SendConn, TransportKind) = match offer {
                Offer::SameProcess { token, slot_bytes } => {
                    let mem = same_process_fifos()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&token)
                        .ok_or_else(|| {
                            Error::Internal(format!(
                                "same-process FIFO {token:x} from {peer} not registered"
                            ))
                        })?;
                    let mem: Arc<dyn FifoMemory> = mem;
                    let end = attach_sender(ep, &key, mem, slot_bytes, "same-process FIFO")?;
                    ep.ack_to(&key)?;
                    (end, TransportKind::SameProcess)
                }
                Offer::Shm { name, slot_bytes } => {
                    let seg = ShmSegment::open(&name).map_err(|e| ep.withdrawn(&key, &name, e))?;
                    let seg = ShmFifo::new(seg)
                        .map_err(|e| ep.bad_fifo(&key, "shared-memory offer", e))?;
                    let seg: Arc<dyn FifoMemory> = Arc::new(seg);
                    let end = attach_sender(ep, &key, seg, slot_bytes, &format!("segment {name}"))?;
                    ep.ack_to(&key)?;
                    (end, TransportKind::Shm)
                }
                Offer::Tcp {
                    addr,
                    token,
                    sockets,
                    threads,
                    slot_bytes,
                } => {
                    let dial = tcp::Dial {
                        addr,
                        peer: &peer,
                        what: &peer,
                        magic: ep.net.magic(),
                        token,
                        sockets: sockets as usize,
                        retry: ep.net.retry(),
                        deadline: ep.deadline,
                        silent: ep.net.silent_link(),
                        congestion: ep.params.congestion.name.as_deref(),
                    };
                    let end =
                        tcp::dial(&dial, slot_bytes as usize, threads as usize, Slots::owned())?;
                    (Box::new(end) as SendConn, TransportKind::Tcp)
                }
                Offer::Ib { addr, slot_bytes } => {
                    let ib = ep.ib()?;
                    let port = ib.port_for(usize::from(key.channel)).map_err(|e| {
                        Error::Remote(format!("opening the IB port for {peer}: {e}"))
                    })?;
                    let end = IbSender::new(port, &ib.params, slot_bytes as usize, &peer, &addr)
                        .map_err(|e| Error::Remote(e.to_string()))?;
                    let body = serde_json::to_vec(&end.addr()).map_err(|e| {
                        Error::Internal(format!("encoding an IB connection answer: {e}"))
                    })?;
                    ep.ack_with(&key, &body)?;
                    (Box::new(end) as SendConn, TransportKind::Ib)
                }
            };
            log_connection(ep, ep.rank, key.peer, &key, kind);
            self.attached.push((key, conn, kind));
        }
        Ok(())
    }

    /// Phase 3: waits for the peers to attach to this rank's receiving ends.
    ///
    /// Errors: [`Error::Timeout`] naming a peer that never attached.
    pub(crate) fn finish(self, ep: &Endpoints<'_>) -> Result<Made> {
        let mut recv_conns = Vec::with_capacity(self.pending.len());
        for (key, p, kind) in self.pending {
            let conn: RecvConn = match p {
                Pending::SameProcess(token, mem) => {
                    let acked = ep.wait_ack(&key);
                    // Normally the sender took the entry; after a failure, do not leave it behind.
                    same_process_fifos()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&token);
                    acked?;
                    let mem: Arc<dyn FifoMemory> = mem;
                    Box::new(MemReceiver::new(mem).map_err(Error::Internal)?)
                }
                Pending::Shm(mut seg) => {
                    ep.wait_ack(&key)?;
                    seg.segment().unlink();
                    let seg: Arc<dyn FifoMemory> = Arc::new(seg);
                    Box::new(MemReceiver::new(seg).map_err(Error::Internal)?)
                }
                Pending::Tcp {
                    token,
                    sockets,
                    threads,
                } => {
                    let peer = ep.describe(key.peer);
                    let (net, from) = (ep.net, ep.net_rank[key.peer]);
                    let gave_up = || {
                        net.try_recv(from, ep.comm_tag, tags::failure_notice())
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                    };
                    let collect = tcp::Collect {
                        listener: ep.listener,
                        token,
                        sockets,
                        peer: &peer,
                        what: &peer,
                        deadline: ep.deadline,
                        abort: ep.abort,
                        gave_up: &gave_up,
                        silent: ep.net.silent_link(),
                    };
                    Box::new(tcp::collect(
                        &collect,
                        ep.slot_bytes,
                        threads,
                        Slots::owned(),
                    )?)
                }
                Pending::Ib(mut end) => {
                    let peer = ep.describe(key.peer);
                    let body = ep.wait_ack(&key)?;
                    let sender: IbAddr = serde_json::from_slice(&body).map_err(|e| {
                        Error::Remote(format!("malformed IB connection answer from {peer}: {e}"))
                    })?;
                    end.connect(&sender, &ep.ib()?.params)
                        .map_err(|e| Error::Remote(e.to_string()))?;
                    end
                }
            };
            recv_conns.push((key, conn, kind));
        }
        Ok((self.attached, recv_conns))
    }
}

/// The sending end of a memory FIFO a peer offered, checked against the slot size its offer
/// announced.
fn attach_sender(
    ep: &Endpoints<'_>,
    key: &ConnKey,
    mem: Arc<dyn FifoMemory>,
    slot_bytes: u64,
    what: &str,
) -> Result<SendConn> {
    let end = MemSender::new(mem).map_err(|e| ep.bad_fifo(key, what, e))?;
    if end.slot_bytes() as u64 != slot_bytes {
        return Err(ep.bad_fifo(
            key,
            what,
            format!(
                "{}-byte slots where the offer said {slot_bytes}",
                end.slot_bytes()
            ),
        ));
    }
    Ok(Box::new(end))
}

fn log_connection(ep: &Endpoints<'_>, from: usize, to: usize, key: &ConnKey, kind: TransportKind) {
    tracing::info!(
        target: "rnccl::init",
        "Channel {:02}/{} : {}[{}] -> {}[{}] via {}",
        key.channel,
        key.index,
        from,
        ep.net_rank[from],
        to,
        ep.net_rank[to],
        kind.nccl_name()
    );
}
