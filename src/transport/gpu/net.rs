//! GPU connections between hosts (NCCL's NET transport over sockets, with host staging): each
//! end keeps its own FIFO in pinned host memory mapped into its GPU, laid out as every GPU FIFO
//! is (`[tail][head @128][sizes @256][slots @512]`), so the step-interpreter kernel reads and
//! writes it as it would a peer's FIFO on the same host: its connection (`DevConn`) is local
//! on both sides. The communicator's proxy thread ([`super::proxy`]) carries the slots between
//! the two FIFOs through the network ends CPU ranks use, over the FIFOs' slots in place: the
//! TCP ends of [`crate::transport::tcp`] (the same sockets, framing and goodbyes), or the IB
//! ends of [`crate::transport::ib`].
//!
//! Connecting follows the other transports' three phases: the receiving end allocates its
//! FIFO and offers its rank's TCP data listener with a fresh token through the bootstrap
//! (never waiting); the sending end allocates its FIFO and opens
//! `NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD` data sockets (as many as the receiver's
//! offer says) to that listener, each greeting with the token ([`tcp::dial`]); the receiving
//! end collects them ([`tcp::collect`]). The listener sits on the interface the bootstrap chose (`NCCL_SOCKET_IFNAME`,
//! `NCCL_SOCKET_FAMILY`). Every wait has the communicator's deadline and stops on its abort
//! flag, naming the peer and channel.
//!
//! When both ranks have a usable IB port on the same fabric (the rule CPU ranks follow,
//! [`crate::transport::params::TransportParams::select`]), the pair uses IB instead: the
//! receiving end registers its FIFO's slots with its port and offers its queue pairs and slots;
//! the sending end registers its own FIFO's slots, connects and answers with its queue pairs
//! and CTS FIFO ([`tags::gpu_net_answer`]); the receiving end connects to that answer. The
//! proxy then moves slots by RDMA from FIFO to FIFO.

use std::net::SocketAddr;

use super::fifo::GpuEndpoints;
use super::proxy::{FifoAddrs, Link, NetConn};
use crate::bootstrap::tags;
use crate::conn::{ConnKey, NSLOTS};
use crate::device::cuda::PinnedHost;
use crate::device::cuda::abi::{HEAD_OFF, SIZES_OFF, SLOTS_OFF};
use crate::error::{Error, Result};
use crate::stats::Path;
use crate::transport::ib::{IbAddr, IbNet, IbReceiver, IbSender};
use crate::transport::tcp::{self, Slots};

/// A receiving end's offer: where to connect its data sockets.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct NetOffer {
    /// The receiver's TCP data listener.
    addr: SocketAddr,
    /// The token the sockets announce.
    token: u64,
    /// How many sockets to open.
    sockets: u32,
    /// Bytes per slot.
    slot_bytes: u64,
    /// The receiving end's queue pairs and registered slots, when the pair uses IB (then
    /// no socket is opened).
    ib: Option<IbAddr>,
}

/// The addresses of a FIFO segment at `base` (`[tail][head @128][sizes @256][slots @512]`).
pub(crate) fn segment_addrs(base: u64, slot_bytes: usize) -> FifoAddrs {
    FifoAddrs {
        tail: base,
        head: base + HEAD_OFF as u64,
        sizes: base + SIZES_OFF as u64,
        slots: base + SLOTS_OFF as u64,
        slot_bytes,
    }
}

/// Bytes of a FIFO segment of `NSLOTS` slots of `slot_bytes` bytes.
pub(crate) fn segment_bytes(slot_bytes: usize) -> usize {
    SLOTS_OFF + NSLOTS * slot_bytes
}

/// One connected end: its FIFO (in this process's pinned memory) and the network end over its
/// slots.
pub(crate) struct NetEnd {
    /// The connection, named from this rank's side.
    pub key: ConnKey,
    /// The FIFO segment.
    pub fifo: PinnedHost,
    /// The network end whose slots are the FIFO's (taken by [`NetEnd::proxy_conn`]).
    link: Option<Link>,
    /// How the bytes cross.
    path: Path,
}

impl NetEnd {
    fn new(key: ConnKey, fifo: PinnedHost, link: Link, path: Path) -> NetEnd {
        NetEnd {
            key,
            fifo,
            link: Some(link),
            path,
        }
    }

    /// What the proxy drives for this end; `peer_name` names the peer in errors. The network
    /// end moves to the proxy, which drops it (closing its sockets, deregistering the FIFO's
    /// slots) before the FIFO is freed: the FIFO outlives the proxy.
    ///
    /// Errors: [`Error::Internal`] when the end was taken already.
    pub(crate) fn proxy_conn(&mut self, slot_bytes: usize, peer_name: String) -> Result<NetConn> {
        let link = self.link.take().ok_or_else(|| {
            Error::Internal(format!("the network end of {:?} was taken twice", self.key))
        })?;
        Ok(NetConn {
            fifo: segment_addrs(self.fifo.ptr() as u64, slot_bytes),
            link,
            peer: self.key.peer,
            peer_name,
            channel: self.key.channel,
        })
    }

    /// How the end's bytes cross to the other host, for its live counters.
    pub(crate) fn path(&self) -> Path {
        self.path
    }
}

/// How a receiving end waits for its sender.
enum Awaiting {
    /// `sockets` data sockets greeting with `token`.
    Sockets { token: u64, sockets: usize },
    /// The sender's IB answer, for this end.
    Ib(Box<IbReceiver>),
}

/// Receiving ends offered and waiting for their senders.
struct Pending {
    key: ConnKey,
    fifo: PinnedHost,
    awaiting: Awaiting,
}

/// Where `fifo`'s slots start (see [`segment_addrs`]).
fn slots_of(fifo: &PinnedHost) -> *mut u8 {
    // SAFETY: the segment is `segment_bytes` long, so its slots start inside it.
    unsafe { fifo.ptr().add(SLOTS_OFF) }
}

/// The IB devices for connections to `peer`, when the pair uses IB.
fn ib_for<'a>(ep: &GpuEndpoints<'a>, peer: usize) -> Option<&'a IbNet> {
    let peers = ep.net.peers();
    let (me, them) = (&peers[ep.net_rank[ep.rank]], &peers[ep.net_rank[peer]]);
    ep.ib
        .filter(|_| me.ib_fabric.is_some() && me.ib_fabric == them.ib_fabric)
}

/// Opens `ib`'s port for `key`'s channel.
///
/// Errors: [`Error::Remote`] naming the peer when the port cannot be opened.
fn port_for(
    ib: &IbNet,
    key: &ConnKey,
    peer: &str,
) -> Result<std::sync::Arc<crate::ib::endpoint::PortHandle>> {
    ib.port_for(usize::from(key.channel))
        .map_err(|e| Error::Remote(format!("opening the IB port for {peer}: {e}")))
}

/// Connections to other hosts being set up: [`NetJob::offer`] (phase 1, never waits),
/// [`NetJob::attach`] (phase 2, the sending ends), [`NetJob::finish`] (phase 3, the receiving
/// ends). Every peer runs the same phases with the mirror keys at about the same time.
pub(crate) struct NetJob {
    pending: Vec<Pending>,
}

impl NetJob {
    /// Phase 1: allocates every receiving end's FIFO and offers it.
    ///
    /// Errors: [`Error::Cuda`] when host memory cannot be pinned; [`Error::Remote`] when an
    /// offer cannot be delivered.
    pub(crate) fn offer(ep: &GpuEndpoints<'_>, recvs: &[ConnKey]) -> Result<NetJob> {
        let mut pending = Vec::with_capacity(recvs.len());
        for key in recvs {
            let fifo = PinnedHost::zeroed(ep.ctx, segment_bytes(ep.slot_bytes))?;
            let token = crate::bootstrap::unique_id::random_magic()?;
            let (ib, awaiting) = match ib_for(ep, key.peer) {
                Some(ib) => {
                    let peer = ep.describe(key.peer);
                    let port = port_for(ib, key, &peer)?;
                    // SAFETY: the slots lie in `fifo`, which the end returned by `finish`
                    // keeps; the proxy drops the IB end before that end is dropped
                    // (`NetEnd::proxy_conn`), and only the HCA writes a slot between its
                    // offer and its arrival (the kernel reads it after `tail` says so).
                    let end = unsafe {
                        IbReceiver::with_slots(
                            port,
                            &ib.params,
                            ep.slot_bytes,
                            &peer,
                            Some(slots_of(&fifo)),
                        )
                    }
                    .map_err(|e| Error::Remote(e.to_string()))?;
                    (Some(end.addr()), Awaiting::Ib(Box::new(end)))
                }
                None => (
                    None,
                    Awaiting::Sockets {
                        token,
                        sockets: ep.sockets,
                    },
                ),
            };
            let offer = NetOffer {
                addr: ep.listener.addr(),
                token,
                sockets: ep.sockets as u32,
                slot_bytes: ep.slot_bytes as u64,
                ib,
            };
            ep.send(key, tags::gpu_net_offer(key), &offer)?;
            pending.push(Pending {
                key: *key,
                fifo,
                awaiting,
            });
        }
        Ok(NetJob { pending })
    }

    /// Phase 2: waits for each peer's offer, allocates the sending end's FIFO and connects its
    /// data sockets.
    ///
    /// Errors: [`Error::Timeout`] / [`Error::Aborted`] naming a peer whose offer never came;
    /// [`Error::Remote`] for an offer with another slot size or an unreachable listener;
    /// [`Error::Cuda`] when host memory cannot be pinned.
    pub(crate) fn attach(&self, ep: &GpuEndpoints<'_>, sends: &[ConnKey]) -> Result<Vec<NetEnd>> {
        let mut ends = Vec::with_capacity(sends.len());
        for key in sends {
            let offer: NetOffer = ep.recv(
                key,
                tags::gpu_net_offer(key),
                "offer its GPU FIFO for the network",
            )?;
            let peer = ep.describe(key.peer);
            if offer.slot_bytes != ep.slot_bytes as u64 {
                return Err(Error::Remote(format!(
                    "{peer} offered {}-byte slots where this rank uses {}: the ranks disagree \
                     on NCCL_BUFFSIZE",
                    offer.slot_bytes, ep.slot_bytes
                )));
            }
            if offer.sockets == 0 || offer.sockets > 64 {
                return Err(Error::Remote(format!(
                    "{peer} asked for {} data sockets on channel {} (1 to 64 are valid)",
                    offer.sockets, key.channel
                )));
            }
            let fifo = PinnedHost::zeroed(ep.ctx, segment_bytes(ep.slot_bytes))?;
            if let Some(remote) = &offer.ib {
                let Some(ib) = ib_for(ep, key.peer) else {
                    return Err(Error::Remote(format!(
                        "{peer} offered an IB connection on channel {} where this rank has no \
                         IB port on its fabric: the ranks disagree on NCCL_IB_DISABLE, \
                         NCCL_IB_HCA or RNCCL_IB_FAKE",
                        key.channel
                    )));
                };
                let port = port_for(ib, key, &peer)?;
                // SAFETY: the slots lie in `fifo`, which the returned end keeps; the proxy
                // drops the IB end first (`NetEnd::proxy_conn`), and the kernel rewrites a
                // slot only after `head` (the IB end's completions) passes it.
                let end = unsafe {
                    IbSender::with_slots(
                        port,
                        &ib.params,
                        ep.slot_bytes,
                        &peer,
                        remote,
                        Some(slots_of(&fifo)),
                    )
                }
                .map_err(|e| Error::Remote(e.to_string()))?;
                ep.send(key, tags::gpu_net_answer(key), &end.addr())?;
                log_connection(ep, ep.rank, key, "NET/IB/GPU host staging", &end.port());
                let link = Link::Send(Box::new(end));
                ends.push(NetEnd::new(*key, fifo, link, Path::GpuNetIb));
                continue;
            }
            let what = format!("{peer} (channel {})", key.channel);
            let dial = tcp::Dial {
                addr: offer.addr,
                peer: &peer,
                what: &what,
                magic: ep.net.magic(),
                token: offer.token,
                sockets: offer.sockets as usize,
                retry: ep.net.retry(),
                deadline: ep.deadline,
                silent: ep.net.silent_link(),
                congestion: ep.congestion,
            };
            // SAFETY: the slots lie in `fifo`, which the returned end keeps; the proxy drops
            // the TCP end first (`NetEnd::proxy_conn`), and the kernel rewrites a slot only
            // after `head` (the end's completed frames) passes it.
            let slots = unsafe { Slots::borrowed(slots_of(&fifo)) };
            // The proxy thread drives the sockets (no helper threads).
            let end = tcp::dial(&dial, ep.slot_bytes, 0, slots)?;
            let sockets = format!("{} sockets", offer.sockets);
            log_connection(ep, ep.rank, key, "NET/Socket/GPU host staging", &sockets);
            let link = Link::Send(Box::new(end));
            ends.push(NetEnd::new(*key, fifo, link, Path::GpuNet));
        }
        Ok(ends)
    }

    /// Phase 3: collects every receiving end's data sockets.
    ///
    /// Errors: [`Error::Timeout`] naming a peer that never connected, [`Error::Remote`] when
    /// it gave up, [`Error::Aborted`] on abort, [`Error::System`] when accepting fails.
    pub(crate) fn finish(self, ep: &GpuEndpoints<'_>) -> Result<Vec<NetEnd>> {
        let mut ends = Vec::with_capacity(self.pending.len());
        for p in self.pending {
            let peer = ep.describe(p.key.peer);
            let (token, sockets) = match p.awaiting {
                Awaiting::Sockets { token, sockets } => (token, sockets),
                Awaiting::Ib(mut end) => {
                    let key = &p.key;
                    let sender: IbAddr = ep.recv(
                        key,
                        tags::gpu_net_answer(key),
                        "answer this rank's IB offer",
                    )?;
                    let params = ib_for(ep, key.peer).map(|ib| &ib.params).ok_or_else(|| {
                        Error::Internal("an IB connection without IB devices".into())
                    })?;
                    end.connect(&sender, params)
                        .map_err(|e| Error::Remote(e.to_string()))?;
                    let link = Link::Recv(end);
                    ends.push(NetEnd::new(p.key, p.fifo, link, Path::GpuNetIb));
                    continue;
                }
            };
            let (net, from) = (ep.net, ep.net_rank[p.key.peer]);
            let gave_up = || {
                net.try_recv(from, ep.comm_tag, tags::failure_notice())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            };
            let what = format!("{peer} (channel {})", p.key.channel);
            let collect = tcp::Collect {
                listener: ep.listener,
                token,
                sockets,
                peer: &peer,
                what: &what,
                deadline: ep.deadline,
                abort: ep.abort,
                gave_up: &gave_up,
                silent: ep.net.silent_link(),
            };
            // SAFETY: the slots lie in `p.fifo`, which the returned end keeps; the proxy drops
            // the TCP end first (`NetEnd::proxy_conn`), and the kernel reads a slot only after
            // `tail` says it arrived and frees it (`head`) before the end may fill it again.
            let slots = unsafe { Slots::borrowed(slots_of(&p.fifo)) };
            let end = tcp::collect(&collect, ep.slot_bytes, 0, slots)?;
            let link = Link::Recv(Box::new(end));
            ends.push(NetEnd::new(p.key, p.fifo, link, Path::GpuNet));
        }
        Ok(ends)
    }
}

fn log_connection(ep: &GpuEndpoints<'_>, from: usize, key: &ConnKey, via: &str, over: &str) {
    tracing::info!(
        target: "rnccl::init",
        "Channel {:02}/{} : {}[{}] -> {}[{}] [send] via {via} ({over})",
        key.channel,
        key.index,
        from,
        ep.ctx.ordinal(),
        key.peer,
        ep.net_rank[key.peer],
    );
}
