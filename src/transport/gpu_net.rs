//! GPU connections between hosts (NCCL's NET transport over sockets, with host staging): each
//! end keeps its own FIFO in pinned host memory mapped into its GPU, laid out as every GPU FIFO
//! is (`[tail][head @128][sizes @256][slots @512]`), so the step-interpreter kernel reads and
//! writes it as it would a peer's FIFO on the same host: its connection (`DevConn`) is local
//! on both sides. The communicator's proxy thread ([`proxy`]) carries the slots over TCP
//! between the two FIFOs.
//!
//! Connecting follows the other transports' three phases: the receiving end allocates its
//! FIFO and offers its rank's TCP data listener with a fresh token through the bootstrap
//! (never waiting); the sending end allocates its FIFO and opens
//! `NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD` data sockets (as many as the receiver's
//! offer says) to that listener, each greeting with the token; the receiving end collects
//! them. The listener sits on the interface the bootstrap chose (`NCCL_SOCKET_IFNAME`,
//! `NCCL_SOCKET_FAMILY`). Every wait has the communicator's deadline and stops on its abort
//! flag, naming the peer and channel.

pub(crate) mod proxy;
#[cfg(test)]
mod tests;

use std::net::{SocketAddr, TcpStream};

use super::gpu::{GpuEndpoints, HEAD_OFF, SIZES_OFF, SLOTS_OFF};
use super::tcp::listener;
use super::tcp::prepare_socket;
use crate::bootstrap::tags;
use crate::conn::{ConnKey, NSLOTS};
use crate::device::cuda::PinnedHost;
use crate::error::{Error, Result};
use proxy::{FifoAddrs, NetConn, Side};

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

/// One connected end: its FIFO (in this process's pinned memory) and its sockets.
pub(crate) struct NetEnd {
    /// The connection, named from this rank's side.
    pub key: ConnKey,
    /// The FIFO segment.
    pub fifo: PinnedHost,
    /// Connected, non-blocking data sockets in stream order.
    pub socks: Vec<TcpStream>,
}

impl NetEnd {
    /// What the proxy drives for this end; `peer_name` names the peer in errors.
    pub(crate) fn proxy_conn(
        &mut self,
        side: Side,
        slot_bytes: usize,
        peer_name: String,
    ) -> NetConn {
        NetConn {
            side,
            fifo: segment_addrs(self.fifo.ptr() as u64, slot_bytes),
            socks: std::mem::take(&mut self.socks),
            peer: self.key.peer,
            peer_name,
            channel: self.key.channel,
        }
    }
}

/// Receiving ends offered and waiting for their sockets.
struct Pending {
    key: ConnKey,
    fifo: PinnedHost,
    token: u64,
    sockets: usize,
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
            let offer = NetOffer {
                addr: ep.listener.addr(),
                token,
                sockets: ep.sockets as u32,
                slot_bytes: ep.slot_bytes as u64,
            };
            ep.send(key, tags::gpu_net_offer(key), &offer)?;
            pending.push(Pending {
                key: *key,
                fifo,
                token,
                sockets: ep.sockets,
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
            let socks = listener::connect(
                offer.addr,
                &format!("{peer} (channel {})", key.channel),
                ep.net.magic(),
                offer.token,
                offer.sockets as usize,
                ep.net.retry(),
                ep.deadline,
            )?;
            prepare(&socks, ep.net.silent_link())?;
            log_connection(ep, ep.rank, key, offer.sockets as usize);
            ends.push(NetEnd {
                key: *key,
                fifo,
                socks,
            });
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
            let (net, from) = (ep.net, ep.net_rank[p.key.peer]);
            let gave_up = || {
                net.try_recv(from, ep.comm_tag, tags::failure_notice())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            };
            let socks = ep.listener.accept(
                p.token,
                p.sockets,
                &format!("{peer} (channel {})", p.key.channel),
                ep.deadline,
                ep.abort,
                &gave_up,
            )?;
            prepare(&socks, ep.net.silent_link())?;
            ends.push(NetEnd {
                key: p.key,
                fifo: p.fifo,
                socks,
            });
        }
        Ok(ends)
    }
}

/// Makes data sockets non-blocking, without Nagle's delay.
///
/// Errors: [`Error::System`] when a socket option cannot be set.
fn prepare(socks: &[TcpStream], silent: Option<std::time::Duration>) -> Result<()> {
    for s in socks {
        prepare_socket(s, silent).map_err(|e| Error::system("configuring a GPU data socket", e))?;
    }
    Ok(())
}

fn log_connection(ep: &GpuEndpoints<'_>, from: usize, key: &ConnKey, sockets: usize) {
    tracing::info!(
        target: "rnccl::init",
        "Channel {:02}/{} : {}[{}] -> {}[{}] [send] via NET/Socket/GPU host staging ({} sockets)",
        key.channel,
        key.index,
        from,
        ep.ctx.ordinal(),
        key.peer,
        ep.net_rank[key.peer],
        sockets
    );
}
