//! Choosing a transport per peer and connecting, through the bootstrap.
//!
//! The receiving end of every connection decides and creates: a heap FIFO registered under a
//! random token (same process), a shared-memory segment (same host), or a token the sender's data
//! sockets will present (TCP). It sends that offer to the sender, which attaches and acknowledges;
//! the receiver then unlinks the segment or collects the sockets. Offers go out before any wait,
//! so a set of connections between any ranks completes without ordering constraints.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use super::fifo::{
    FifoMemory, HeapMemory, MemReceiver, MemSender, check_region, init_region, region_bytes,
};
use super::shm::ShmSegment;
use super::tcp::{TcpReceiver, TcpSender, prepare_socket};
use super::{RecvConn, SendConn, TransportKind};
use crate::bootstrap::{BootstrapNet, Deadline, PeerInfo};
use crate::config::Config;
use crate::error::{Error, Result};

/// One connection of a communicator, named from this rank's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnKey {
    /// The peer (communicator rank).
    pub peer: usize,
    /// Channel number.
    pub channel: u16,
    /// 0: collectives; 1: point-to-point operations (NCCL keeps them on separate connections).
    pub index: u8,
}

/// Sockets per TCP connection when `NCCL_NSOCKS_PERTHREAD` is auto.
pub const AUTO_SOCKETS: usize = 4;

/// Transport knobs, read once per communicator.
#[derive(Debug, Clone, Copy)]
pub struct TransportParams {
    /// `NCCL_SHM_DISABLE`.
    pub shm_disable: bool,
    /// `NCCL_P2P_DISABLE` (for CPU ranks: no same-process FIFOs; shared memory instead).
    pub p2p_disable: bool,
    /// Socket helper threads per TCP connection (`NCCL_SOCKET_NTHREADS`, auto 0, at most 16).
    pub socket_threads: usize,
    /// Data sockets per TCP connection (`NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD`, at least 1,
    /// at most 64; [`AUTO_SOCKETS`] when `NCCL_NSOCKS_PERTHREAD` is auto).
    pub sockets: usize,
}

impl TransportParams {
    /// Reads the knobs.
    ///
    /// Errors: a bad knob value, or a socket count outside NCCL's limits.
    pub fn from_config(cfg: &Config) -> Result<TransportParams> {
        let nthreads = cfg.int("NCCL_SOCKET_NTHREADS")?;
        let per = cfg.int("NCCL_NSOCKS_PERTHREAD")?;
        let nthreads = if nthreads < 0 { 0 } else { nthreads as usize };
        // Auto: four sockets per connection in all (NCCL's own auto is one outside known
        // clouds). Measured with perf/cpu_vs_mpi.sh's namespaces: a 256 MiB all_reduce moved
        // 0.77-0.83 GB/s over one socket and 0.96-1.12 GB/s over four, which spreads the
        // kernel's per-socket work over the cores.
        let per = if per < 0 {
            AUTO_SOCKETS.div_ceil(nthreads.max(1))
        } else {
            per as usize
        };
        if nthreads > 16 {
            return Err(Error::invalid_usage(format!(
                "NCCL_SOCKET_NTHREADS={nthreads} exceeds NCCL's maximum of 16"
            )));
        }
        let sockets = (nthreads.max(1) * per).max(1);
        if sockets > 64 {
            return Err(Error::invalid_usage(format!(
                "NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD = {sockets} exceeds NCCL's maximum of 64 sockets per connection"
            )));
        }
        Ok(TransportParams {
            shm_disable: cfg.flag("NCCL_SHM_DISABLE")?,
            p2p_disable: cfg.flag("NCCL_P2P_DISABLE")?,
            socket_threads: nthreads,
            sockets,
        })
    }

    /// The transport between `me` and `peer`.
    pub fn select(&self, me: &PeerInfo, peer: &PeerInfo) -> TransportKind {
        let same_host = me.host_hash == peer.host_hash;
        if same_host && me.pid == peer.pid && me.pid_ns == peer.pid_ns && !self.p2p_disable {
            TransportKind::SameProcess
        } else if same_host && me.shm_dev == peer.shm_dev && !self.shm_disable {
            TransportKind::Shm
        } else {
            TransportKind::Tcp
        }
    }
}

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
        token: u64,
        sockets: u32,
        threads: u32,
        slot_bytes: u64,
    },
}

fn same_process_fifos() -> &'static Mutex<HashMap<u64, Arc<HeapMemory>>> {
    static FIFOS: OnceLock<Mutex<HashMap<u64, Arc<HeapMemory>>>> = OnceLock::new();
    FIFOS.get_or_init(|| Mutex::new(HashMap::new()))
}

const OFFER: u64 = 1 << 60;
const ACK: u64 = 2 << 60;

fn tag(kind: u64, key: &ConnKey) -> u64 {
    kind | (u64::from(key.channel) << 8) | u64::from(key.index)
}

/// What a communicator passes to [`connect`].
pub struct Endpoints<'a> {
    /// The bootstrap network.
    pub net: &'a BootstrapNet,
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
}

enum Pending {
    SameProcess(u64, Arc<HeapMemory>),
    Shm(ShmSegment),
    Tcp {
        token: u64,
        sockets: usize,
        threads: usize,
    },
}

/// Connections that have been offered and are being attached (see [`connect`]).
pub struct ConnectJob {
    pending: Vec<(ConnKey, Pending, TransportKind)>,
    sends: Vec<ConnKey>,
    attached: Vec<(ConnKey, SendConn, TransportKind)>,
}

/// Sending ends and receiving ends made by a [`ConnectJob`].
pub type Made = (
    Vec<(ConnKey, SendConn, TransportKind)>,
    Vec<(ConnKey, RecvConn, TransportKind)>,
);

/// Connects every listed connection: `sends` where this rank sends to `key.peer`, `recvs` where
/// it receives from it. Every rank that appears as a peer must do the same with the mirror keys
/// at about the same time.
///
/// Errors: [`Error::Timeout`] / [`Error::Remote`] naming the peer that did not answer;
/// [`Error::System`] when a segment or socket cannot be created.
pub fn connect(ep: &Endpoints<'_>, sends: &[ConnKey], recvs: &[ConnKey]) -> Result<Made> {
    let mut job = ConnectJob::start(ep, sends, recvs)?;
    job.attach(ep)?;
    job.finish(ep)
}

impl ConnectJob {
    /// Phase 1: creates the receiving ends and sends their offers (never waits on a peer).
    ///
    /// Errors: [`Error::System`] when a segment cannot be created, [`Error::Remote`] when an
    /// offer cannot be delivered.
    pub fn start(ep: &Endpoints<'_>, sends: &[ConnKey], recvs: &[ConnKey]) -> Result<ConnectJob> {
        let me = ep.info(ep.rank).clone();
        let mut pending = Vec::with_capacity(recvs.len());
        for key in recvs {
            let kind = ep.params.select(&me, ep.info(key.peer));
            let (offer, p) = match kind {
                TransportKind::SameProcess => {
                    let mem = Arc::new(HeapMemory::new(ep.slot_bytes));
                    // SAFETY: freshly allocated and zeroed, large enough for the slots.
                    unsafe { init_region(&*mem, ep.slot_bytes) };
                    let token = crate::bootstrap::unique_id::random_magic()?;
                    same_process_fifos()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(token, mem.clone());
                    (
                        Offer::SameProcess {
                            token,
                            slot_bytes: ep.slot_bytes as u64,
                        },
                        Pending::SameProcess(token, mem),
                    )
                }
                TransportKind::Shm => {
                    let seg = ShmSegment::create(region_bytes(ep.slot_bytes))?;
                    // SAFETY: the new segment is zero-filled and sized for the slots.
                    unsafe { init_region(&seg, ep.slot_bytes) };
                    (
                        Offer::Shm {
                            name: seg.name().to_string(),
                            slot_bytes: ep.slot_bytes as u64,
                        },
                        Pending::Shm(seg),
                    )
                }
                TransportKind::Tcp => {
                    let token = crate::bootstrap::unique_id::random_magic()?;
                    let (sockets, threads) = (ep.params.sockets, ep.params.socket_threads);
                    let offer = Offer::Tcp {
                        token,
                        sockets: sockets as u32,
                        threads: threads as u32,
                        slot_bytes: ep.slot_bytes as u64,
                    };
                    (
                        offer,
                        Pending::Tcp {
                            token,
                            sockets,
                            threads,
                        },
                    )
                }
            };
            let body = serde_json::to_vec(&offer).expect("offer serialises");
            ep.net.send(
                ep.net_rank[key.peer],
                ep.comm_tag,
                tag(OFFER, key),
                &body,
                ep.deadline,
            )?;
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
    pub fn attach(&mut self, ep: &Endpoints<'_>) -> Result<()> {
        for key in std::mem::take(&mut self.sends) {
            let from = ep.net_rank[key.peer];
            let what = format!(
                "connecting channel {} to {}",
                key.channel,
                ep.describe(key.peer)
            );
            let body = ep.net.recv_abortable(
                from,
                ep.comm_tag,
                tag(OFFER, &key),
                ep.deadline,
                &what,
                ep.abort,
            )?;
            let offer: Offer = serde_json::from_slice(&body).map_err(|e| {
                Error::Remote(format!(
                    "malformed connection offer from {}: {e}",
                    ep.describe(key.peer)
                ))
            })?;
            let (conn, kind) = match offer {
                Offer::SameProcess { token, slot_bytes } => {
                    let mem = same_process_fifos()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&token)
                        .ok_or_else(|| {
                            Error::Internal(format!(
                                "same-process FIFO {token:x} from {} not registered",
                                ep.describe(key.peer)
                            ))
                        })?;
                    let mem: Arc<dyn FifoMemory> = mem;
                    ep.net
                        .send(from, ep.comm_tag, tag(ACK, &key), b"", ep.deadline)?;
                    (
                        SendConn::Mem(MemSender::new(mem, slot_bytes as usize)),
                        TransportKind::SameProcess,
                    )
                }
                Offer::Shm { name, slot_bytes } => {
                    let seg = ShmSegment::open(&name)?;
                    // SAFETY: the segment is mapped for its full length.
                    let slot = unsafe { check_region(&seg, seg.len()) }.map_err(|e| {
                        Error::Remote(format!(
                            "segment {name} from {}: {e}",
                            ep.describe(key.peer)
                        ))
                    })?;
                    if slot != slot_bytes as usize {
                        return Err(Error::Remote(format!(
                            "segment {name} from {} has {slot}-byte slots, offer said {slot_bytes}",
                            ep.describe(key.peer)
                        )));
                    }
                    let seg: Arc<dyn FifoMemory> = Arc::new(seg);
                    ep.net
                        .send(from, ep.comm_tag, tag(ACK, &key), b"", ep.deadline)?;
                    (SendConn::Mem(MemSender::new(seg, slot)), TransportKind::Shm)
                }
                Offer::Tcp {
                    token,
                    sockets,
                    threads,
                    slot_bytes,
                } => {
                    let socks = ep
                        .net
                        .connect_data(from, token, sockets as usize, ep.deadline)?;
                    for s in &socks {
                        prepare_socket(s)
                            .map_err(|e| Error::system("configuring a data socket", e))?;
                    }
                    let peer = ep.describe(key.peer);
                    (
                        SendConn::Tcp(TcpSender::new(
                            socks,
                            slot_bytes as usize,
                            threads as usize,
                            &peer,
                        )),
                        TransportKind::Tcp,
                    )
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
    pub fn finish(self, ep: &Endpoints<'_>) -> Result<Made> {
        let mut recv_conns = Vec::with_capacity(self.pending.len());
        for (key, p, kind) in self.pending {
            let from = ep.net_rank[key.peer];
            let what = format!(
                "waiting for {} to attach channel {}",
                ep.describe(key.peer),
                key.channel
            );
            let conn = match p {
                Pending::SameProcess(token, mem) => {
                    let acked = ep.net.recv_abortable(
                        from,
                        ep.comm_tag,
                        tag(ACK, &key),
                        ep.deadline,
                        &what,
                        ep.abort,
                    );
                    // Normally the sender took the entry; after a failure, do not leave it behind.
                    same_process_fifos()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&token);
                    acked?;
                    let mem: Arc<dyn FifoMemory> = mem;
                    RecvConn::Mem(MemReceiver::new(mem, ep.slot_bytes))
                }
                Pending::Shm(mut seg) => {
                    ep.net.recv_abortable(
                        from,
                        ep.comm_tag,
                        tag(ACK, &key),
                        ep.deadline,
                        &what,
                        ep.abort,
                    )?;
                    seg.unlink();
                    let seg: Arc<dyn FifoMemory> = Arc::new(seg);
                    RecvConn::Mem(MemReceiver::new(seg, ep.slot_bytes))
                }
                Pending::Tcp {
                    token,
                    sockets,
                    threads,
                } => {
                    let peer = ep.describe(key.peer);
                    let socks = ep
                        .net
                        .accept_data(token, sockets, &peer, ep.deadline, ep.abort)?;
                    for s in &socks {
                        prepare_socket(s)
                            .map_err(|e| Error::system("configuring a data socket", e))?;
                    }
                    RecvConn::Tcp(TcpReceiver::new(socks, ep.slot_bytes, threads, &peer))
                }
            };
            recv_conns.push((key, conn, kind));
        }
        Ok((self.attached, recv_conns))
    }
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
