//! The connections a GPU communicator opens at init ([`GpuConns`]): on every channel a send to
//! the ring's next rank and a receive from its previous one, and with every rank (itself
//! included) [`p2p_channels`] point-to-point connections each way; the one-shot LL areas when
//! every rank is on this host; and the proxy thread carrying the connections to other hosts.
//! Their live counters come from the kernels' host-mapped words ([`GpuConns::traffic`]).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::CudaContext;
use rustc_hash::FxHashMap;

use super::fifo::{EndCounts, GpuRecv, GpuSend, connect};
use super::proxy::{Proxy, ProxyControl};
use super::staging::staged_peers;
use crate::bootstrap::{BootstrapNet, Deadline};
use crate::coll::Rings;
use crate::conn::ConnKey;
use crate::device::cuda::DeviceAlloc;
use crate::device::cuda::abi::{DevConn, LL_MAX_RANKS, LL_STATE_BYTES};
use crate::error::{Error, Result};
use crate::stats::{Direction, LinkSnapshot, Path};
use crate::transport::ib::IbNet;
use crate::transport::tcp::listener::DataListener;

/// Point-to-point connections a GPU rank opens with every peer (each way) over peer access:
/// the most thread blocks one peer's traffic runs on (`crate::exec::gpu::spread`).
pub(crate) const P2P_CHANNELS: usize = 16;
/// The same through host memory (NCCL_P2P_DISABLE), where PCIe, not the blocks, bounds the
/// bandwidth and every connection costs 4 MiB of pinned or /dev/shm memory.
pub(crate) const P2P_CHANNELS_HOST: usize = 4;

/// Point-to-point connections per peer for GPU ranks whose FIFOs are `host_staged` or not.
pub(crate) fn p2p_channels(host_staged: bool) -> usize {
    if host_staged {
        P2P_CHANNELS_HOST
    } else {
        P2P_CHANNELS
    }
}

/// What opening a GPU communicator's connections needs from the communicator being built.
pub(crate) struct GpuSetup<'a> {
    /// The device's PCI bus id (told to the ranks of this host, for `NCCL_P2P_LEVEL`).
    pub bus_id: &'a str,
    /// The bootstrap network.
    pub net: &'a BootstrapNet,
    /// The communicator's message namespace.
    pub comm_tag: u64,
    /// This rank.
    pub rank: usize,
    /// Communicator rank → bootstrap rank.
    pub net_rank: &'a [usize],
    /// The channels.
    pub rings: &'a Rings,
    /// Bytes per FIFO slot.
    pub slot_bytes: usize,
    /// NCCL_P2P_DISABLE.
    pub p2p_disable: bool,
    /// Bound on connecting, and on a proxy's connection that stops moving.
    pub timeout: Duration,
    /// Raised to interrupt connecting, and to stop the proxy thread.
    pub abort: &'a Arc<AtomicBool>,
    /// This rank's TCP data listener (peers on other hosts connect to it).
    pub listener: &'a DataListener,
    /// Data sockets per connection to another host.
    pub sockets: usize,
    /// The congestion control of those sockets (None: the kernel's default; `RNCCL_SOCKET_CC`).
    pub congestion: Option<&'a str>,
    /// The communicator's knobs (`NCCL_TOPO_FILE`, `NCCL_P2P_LEVEL`).
    pub knobs: &'a crate::config::Config,
    /// This rank's usable IB ports, for peers on other hosts.
    pub ib: Option<&'a IbNet>,
}

/// Where a rank's one-shot LL all-reduce stores and finds lines (`kernels/ll.cuh`), per rank
/// (0 for itself), and its epoch in device memory.
pub(crate) struct LlPeers {
    /// `u32` last epoch used, `u32` blocks finished, `u64` last operation reported finished;
    /// from word `DIRECT_ROUNDS_WORD`, the direct kernel's round count per block; from word
    /// `SYM_COUNT_WORD`, the symmetric kernels' operation count per block
    /// ([`LL_STATE_BYTES`] in all).
    pub state: DeviceAlloc,
    /// Whether every area is in GPU memory (peers reached over P2P), where the direct
    /// all-reduce (`kernels/direct.cuh`) runs at link speed; through host memory it would not.
    pub direct: bool,
    /// Per rank, its LL area for this rank's lines.
    pub out: Vec<u64>,
    /// Per rank, this rank's LL area for its lines.
    pub inp: Vec<u64>,
    /// Per rank, the (step, live) counters of the send end of the connection with it.
    pub out_counts: Vec<(u64, u64)>,
    /// The same for the receive end.
    pub inp_counts: Vec<(u64, u64)>,
}

/// A GPU communicator's connections.
pub(crate) struct GpuConns {
    sends: FxHashMap<ConnKey, GpuSend>,
    recvs: FxHashMap<ConnKey, GpuRecv>,
    /// The one-shot LL all-reduce's areas, when every rank is on this host and there are at
    /// most [`LL_MAX_RANKS`].
    ll: Option<LlPeers>,
    /// Point-to-point connections per peer (each way).
    p2p_channels: usize,
    /// The proxy thread carrying the connections to other hosts (None: every peer is on
    /// this host). Stopped in `drop` before the FIFOs it reads and writes are freed.
    proxy: Option<Proxy>,
    /// Connection ends a kernel waited on at the last reading of the traffic, and since when
    /// (as first seen by a reading).
    stalls: Mutex<FxHashMap<(ConnKey, Direction), Instant>>,
    /// How many connections, and how their bytes move.
    summary: String,
}

/// The connections a GPU communicator opens at init (see the module's header).
fn keys(rank: usize, nranks: usize, rings: &Rings, p2p: usize) -> (Vec<ConnKey>, Vec<ConnKey>) {
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    for c in (0..rings.nchannels()).filter(|_| nranks > 1) {
        let (_, next, prev) = rings.neighbours(c, rank);
        sends.push(ConnKey::collective(next, c));
        recvs.push(ConnKey::collective(prev, c));
    }
    for peer in 0..nranks {
        for channel in 0..p2p as u16 {
            let key = ConnKey {
                channel,
                ..ConnKey::p2p(peer)
            };
            sends.push(key);
            recvs.push(key);
        }
    }
    (sends, recvs)
}

/// The LL areas of a communicator whose ranks are all on this host (2 to [`LL_MAX_RANKS`]):
/// each first point-to-point connection carries one after its FIFO. `None` otherwise: the
/// one-shot kernel stores straight into peers' memory, which ranks on other hosts do not share.
///
/// Errors: [`Error::Cuda`] when the epoch's memory cannot be allocated.
fn ll_peers(
    s: &GpuSetup<'_>,
    ctx: &Arc<CudaContext>,
    sends: &FxHashMap<ConnKey, GpuSend>,
    recvs: &FxHashMap<ConnKey, GpuRecv>,
) -> Result<Option<LlPeers>> {
    let n = s.net_rank.len();
    let peers = s.net.peers();
    let host = peers[s.net_rank[s.rank]].host_hash;
    if !(2..=LL_MAX_RANKS).contains(&n) || s.net_rank.iter().any(|&b| peers[b].host_hash != host) {
        return Ok(None);
    }
    let (mut out, mut inp) = (vec![0; n], vec![0; n]);
    let (mut out_counts, mut inp_counts) = (vec![(0, 0); n], vec![(0, 0); n]);
    let mut direct = true;
    for r in (0..n).filter(|&r| r != s.rank) {
        let key = ConnKey::p2p(r);
        let (Some(send), Some(recv)) = (sends.get(&key), recvs.get(&key)) else {
            return Ok(None);
        };
        match (send.ll_area(s.slot_bytes), recv.ll_area(s.slot_bytes)) {
            (Some(o), Some(i)) => (out[r], inp[r]) = (o, i),
            _ => return Ok(None),
        }
        direct &= !send.through_host() && !recv.through_host();
        let (sc, rc) = (send.dev_conn(), recv.dev_conn());
        out_counts[r] = (sc.step, sc.bytes);
        inp_counts[r] = (rc.step, rc.bytes);
    }
    Ok(Some(LlPeers {
        state: DeviceAlloc::zeroed(ctx, LL_STATE_BYTES)?,
        direct,
        out,
        inp,
        out_counts,
        inp_counts,
    }))
}

impl GpuConns {
    /// Device memory its connections hold, bytes: FIFOs in GPU memory (the one-shot areas
    /// are inside them), every end's counters, the one-shot areas' state.
    pub(crate) fn device_bytes(&self) -> usize {
        self.sends
            .values()
            .map(GpuSend::device_bytes)
            .sum::<usize>()
            + self
                .recvs
                .values()
                .map(GpuRecv::device_bytes)
                .sum::<usize>()
            + self.ll.as_ref().map_or(0, |l| l.state.len())
    }

    /// Opens this rank's connections on `ctx`'s GPU (every peer does the same at about the same
    /// time) and starts the proxy for those to other hosts, which raises the kernels' abort
    /// flag at `kernel_abort` (a host-mapped `u32`) when a connection fails.
    ///
    /// Errors: as [`connect`] and [`staged_peers`]; [`Error::Cuda`] when device memory cannot be
    /// allocated; [`Error::System`] when the proxy thread cannot start.
    ///
    /// # Safety
    /// `kernel_abort` stays a live, 4-byte aligned `u32` that others access only atomically
    /// until the returned value is dropped.
    pub(crate) unsafe fn open(
        s: &GpuSetup<'_>,
        ctx: &Arc<CudaContext>,
        kernel_abort: u64,
    ) -> Result<GpuConns> {
        let p2p = p2p_channels(s.p2p_disable);
        let staged = staged_peers(s)?;
        let (send_keys, recv_keys) = keys(s.rank, s.net_rank.len(), s.rings, p2p);
        let ep = super::fifo::GpuEndpoints {
            net: s.net,
            comm_tag: s.comm_tag,
            net_rank: s.net_rank,
            rank: s.rank,
            ctx,
            listener: s.listener,
            sockets: s.sockets,
            congestion: s.congestion,
            slot_bytes: s.slot_bytes,
            staged: &staged,
            deadline: Deadline::after(s.timeout),
            abort: s.abort,
            ib: s.ib,
        };
        let made = connect(&ep, &send_keys, &recv_keys)?;
        let over_ib = made.sends.iter().any(|e| e.path() == Path::GpuNetIb)
            || made.recvs.iter().any(|e| e.path() == Path::GpuNetIb);
        let via = if over_ib {
            " via NET/IB (host-staged) and local FIFOs"
        } else if !made.net.is_empty() {
            " via NET/Socket (host-staged) and local FIFOs"
        } else if made.recvs.iter().any(GpuRecv::through_host) {
            " via host memory"
        } else {
            " via P2P"
        };
        let summary = format!("{} connections{via}", made.sends.len() + made.recvs.len());
        let sends: FxHashMap<ConnKey, GpuSend> =
            made.sends.into_iter().map(|e| (e.key(), e)).collect();
        let recvs: FxHashMap<ConnKey, GpuRecv> =
            made.recvs.into_iter().map(|e| (e.key(), e)).collect();
        let ll = ll_peers(s, ctx, &sends, &recvs)?;
        let proxy = if made.net.is_empty() {
            None
        } else {
            let ctl = ProxyControl {
                comm_abort: s.abort.clone(),
                kernel_abort,
                stall_timeout: s.timeout,
                rank: s.rank,
            };
            // SAFETY: the FIFOs are owned by `sends` and `recvs`, moved into the GpuConns built
            // below, whose Drop stops the proxy before they are freed; the abort flag is the
            // caller's contract; nothing fallible remains between here and that move.
            Some(unsafe { Proxy::start(made.net, ctl) }?)
        };
        Ok(GpuConns {
            sends,
            recvs,
            ll,
            p2p_channels: p2p,
            proxy,
            stalls: Mutex::default(),
            summary,
        })
    }

    /// "32 connections via P2P", for the communicator's init line.
    pub(crate) fn summary(&self) -> &str {
        &self.summary
    }

    /// Point-to-point connections this communicator opened with every peer (each way): the
    /// most pieces a point-to-point step is cut into.
    pub(crate) fn p2p_channels(&self) -> usize {
        self.p2p_channels
    }

    /// The one-shot LL all-reduce's areas, when this communicator has them with every peer.
    pub(crate) fn ll(&self) -> Option<&LlPeers> {
        self.ll.as_ref()
    }

    /// The end of connection `key` as the kernel sees it (`send` or receive side), if opened.
    pub(crate) fn dev_conn(&self, key: &ConnKey, send: bool) -> Option<DevConn> {
        if send {
            self.sends.get(key).map(GpuSend::dev_conn)
        } else {
            self.recvs.get(key).map(GpuRecv::dev_conn)
        }
    }

    /// The proxy's failure (it is why the kernels stopped), if a connection to another host
    /// failed.
    ///
    /// Errors returned: as [`Proxy::failure`].
    pub(crate) fn proxy_failure(&self) -> Option<Error> {
        self.proxy.as_ref().and_then(Proxy::failure)
    }

    /// Whether a connection to another host failed (cheaper than [`GpuConns::proxy_failure`]).
    pub(crate) fn proxy_failed(&self) -> bool {
        self.proxy.as_ref().is_some_and(Proxy::failed)
    }

    /// Whether `peer` closed a connection to another host without a goodbye (its process
    /// exited or was killed).
    pub(crate) fn closed_without_goodbye(&self, peer: usize) -> bool {
        self.proxy
            .as_ref()
            .is_some_and(|p| p.closed_without_goodbye(peer))
    }

    /// Every connection end's traffic so far, as the kernels published it. An end a kernel
    /// waits on counts as stalled since the first reading that saw the wait (readings come
    /// every 100 ms from the counter page, and with each status query); the kernels keep no
    /// total of their waits (`wait_ns` is 0).
    pub(crate) fn traffic(&self) -> Vec<LinkSnapshot> {
        let now = Instant::now();
        let mut stalls = self.stalls.lock().unwrap_or_else(|p| p.into_inner());
        let mut snap = |key: &ConnKey, direction, transport: Path, c: EndCounts| {
            let stalled_ns = if c.waiting {
                let since = *stalls.entry((*key, direction)).or_insert(now);
                now.duration_since(since).as_nanos().max(1) as u64
            } else {
                stalls.remove(&(*key, direction));
                0
            };
            LinkSnapshot {
                peer: key.peer,
                channel: key.channel,
                index: key.index,
                direction,
                transport,
                bytes: c.bytes,
                slots: c.slots,
                wait_ns: 0,
                stalled_ns,
            }
        };
        let mut v = Vec::with_capacity(self.sends.len() + self.recvs.len());
        for (k, s) in &self.sends {
            v.push(snap(k, Direction::Send, s.path(), s.counts()));
        }
        for (k, r) in &self.recvs {
            v.push(snap(k, Direction::Recv, r.path(), r.counts()));
        }
        v.sort_by_key(|l| (l.peer, l.channel, l.index, l.direction as u8));
        v
    }
}

impl Drop for GpuConns {
    fn drop(&mut self) {
        // The proxy goes before the FIFOs it reads and writes (it says goodbye to the peers on
        // other hosts, which then know this rank left on purpose). The owner synchronised the
        // device first, so no kernel uses them any more.
        if let Some(p) = &mut self.proxy {
            p.stop();
        }
    }
}
