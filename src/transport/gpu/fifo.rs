//! One GPU connection's ends: FIFOs the step-interpreter kernel reads and writes itself, with
//! no host thread in the data path (NCCL's P2P transport, internals §A.3 of gpu-backend.md).
//!
//! The receiving end owns the FIFO — `[tail][sizes][slots]` — in its GPU's memory when the
//! sender's GPU can store into it (the same GPU, or peer access over NVLink/PCIe), and in
//! pinned host memory mapped into both GPUs otherwise, when `NCCL_P2P_DISABLE=1`, or when the
//! GPUs are farther apart than `NCCL_P2P_LEVEL` allows (NCCL's SHM
//! transport: both kernels load and store over PCIe). The sending end owns `head`, where the
//! receiver frees slots. Each end keeps its persistent slot and byte counts in its own device
//! memory and a host-mapped copy of the bytes for live counters.
//!
//! Connecting is one exchange through the bootstrap per connection: the receiver offers its
//! FIFO's addresses, the sender replies with `head`'s. Offers go out before any wait, so every
//! rank connecting its neighbours at the same time cannot deadlock. An address is only
//! meaningful inside its process, so each message also carries a CUDA IPC handle of the
//! device memory it names: a peer in another process maps the memory through it
//! ([`crate::device::cuda::ipc`]). A host-staged FIFO between processes is a POSIX
//! shared-memory segment both register with their driver
//! ([`crate::device::cuda::host_shared`]), with `head` in the same segment; its name is
//! unlinked as soon as the sender has mapped it.
//!
//! A peer on another host (a different `host_hash`: `NCCL_HOSTID`, or host name and boot id)
//! is reached over the network instead ([`super::net`]): each end keeps a FIFO of the same
//! layout in its own pinned host memory, and the communicator's proxy thread carries the slots
//! between them over TCP.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use cudarc::driver::{CudaContext, sys};

use super::net::NetJob;
use super::proxy::NetConn;
use crate::bootstrap::{BootstrapNet, Deadline, tags};
use crate::conn::{ConnKey, NSLOTS};
use crate::device::cuda::abi::{
    DIRECT_AREA_BYTES, DevConn, HEAD_OFF, LL_AREA_BYTES, SIZES_OFF, SLOTS_OFF,
};
use crate::device::cuda::host_shared::HostShared;
use crate::device::cuda::ipc::{self, Imported};
use crate::device::cuda::{DeviceAlloc, PinnedHost, check, cuda_error};
use crate::error::{Error, Result};
use crate::stats::Path;
use crate::transport::ib::IbNet;
use crate::transport::tcp::listener::DataListener;

/// Bytes of the FIFO allocation of connection `key`: the flags, the slots and, on a
/// peer's first point-to-point connection, the LL area after them (`kernels/ll.cuh`: the
/// peer's lines of a one-shot LL all-reduce land there; collectives' connections do not need
/// one) followed, in GPU memory (`on_gpu`), by the direct area (`kernels/direct.cuh`: the
/// peer's shards of the direct kernels, which run only over peer access).
fn fifo_bytes(key: &ConnKey, slot_bytes: usize, on_gpu: bool) -> usize {
    let direct = if on_gpu { DIRECT_AREA_BYTES } else { 0 };
    SLOTS_OFF
        + NSLOTS * slot_bytes
        + if has_ll_area(key) {
            LL_AREA_BYTES + direct
        } else {
            0
        }
}

/// Whether `key` carries the LL area: the first point-to-point connection with its peer.
fn has_ll_area(key: &ConnKey) -> bool {
    *key == ConnKey::p2p(key.peer)
}

/// The LL area of connection `key` whose FIFO allocation starts at `base`.
fn ll_area(key: &ConnKey, base: u64, slot_bytes: usize) -> Option<u64> {
    has_ll_area(key).then_some(base + (SLOTS_OFF + NSLOTS * slot_bytes) as u64)
}

/// Memory a FIFO (or a `head`) lives in.
enum FifoMem {
    /// GPU memory.
    Device(DeviceAlloc),
    /// Pinned host memory mapped into every GPU of this process.
    Host(PinnedHost),
    /// Shared memory registered by this process and by the peer's.
    Shared(HostShared),
}

impl FifoMem {
    /// Bytes of GPU memory it is (0 for host memory).
    fn device_bytes(&self) -> usize {
        match self {
            FifoMem::Device(d) => d.len(),
            FifoMem::Host(_) | FifoMem::Shared(_) => 0,
        }
    }

    fn addr(&self) -> u64 {
        match self {
            FifoMem::Device(d) => d.ptr(),
            FifoMem::Host(h) => h.ptr() as u64,
            FifoMem::Shared(s) => s.dev_ptr(),
        }
    }

    /// The CUDA IPC handle of device memory (host memory has none).
    fn handle(&self) -> Result<Option<Vec<u8>>> {
        match self {
            FifoMem::Device(d) => ipc::export(d).map(Some),
            FifoMem::Host(_) | FifoMem::Shared(_) => Ok(None),
        }
    }

    /// The shared segment's name, for the peer to open.
    fn shm_name(&self) -> Option<String> {
        match self {
            FifoMem::Shared(s) => Some(s.name().to_string()),
            _ => None,
        }
    }

    /// Whether the memory is on the host (the FIFO is staged through it).
    fn on_host(&self) -> bool {
        !matches!(self, FifoMem::Device(_))
    }
}

/// The far end's memory mapped into this process, held for the connection's life.
enum Far {
    /// Another process's GPU memory, through its IPC handle (unmapped on drop).
    Ipc { _mapping: Imported },
    /// Another process's shared segment, registered here (unregistered on drop).
    Shm { _segment: HostShared },
}

/// The far end's device memory as this process reaches it: its own address (same process), or
/// a mapping of its IPC handle (another process).
///
/// Errors: [`Error::Remote`] when a peer in another process sent no handle; as
/// [`Imported::open`].
fn far_device(
    ctx: &Arc<CudaContext>,
    same_process: bool,
    addr: u64,
    handle: Option<&[u8]>,
    what: impl FnOnce() -> String,
) -> Result<(u64, Option<Far>)> {
    if same_process {
        return Ok((addr, None));
    }
    let Some(h) = handle else {
        return Err(Error::Remote(format!(
            "{} sent GPU memory without an IPC handle from another process",
            what()
        )));
    };
    let m = Imported::open(ctx, h)?;
    Ok((m.ptr(), Some(Far::Ipc { _mapping: m })))
}

/// What every end keeps: its counts in device memory and their host-mapped copy.
#[derive(Debug)]
struct Counts {
    /// `u64[2]`: slots and bytes moved (device memory).
    state: DeviceAlloc,
    /// `u64[3]`: slots and bytes moved, and 1 while a kernel's wait on this end outlasts its
    /// first round of polls, written by the kernel (host-mapped).
    mirror: PinnedHost,
}

impl Counts {
    fn new(ctx: &Arc<CudaContext>) -> Result<Counts> {
        Ok(Counts {
            state: DeviceAlloc::zeroed(ctx, 16)?,
            mirror: PinnedHost::zeroed(ctx, 24)?,
        })
    }

    /// (slots, bytes) this end has moved so far, as the kernel last published them, and
    /// whether a kernel waits on it now.
    fn read(&self) -> EndCounts {
        let p = self.mirror.ptr().cast::<u64>();
        // SAFETY: the allocation holds three aligned u64s; the kernel stores each whole with a
        // volatile 8-byte store, so volatile reads see old or new values, never a mix.
        let (slots, bytes, waiting) = unsafe {
            (
                p.read_volatile(),
                p.add(1).read_volatile(),
                p.add(2).read_volatile(),
            )
        };
        EndCounts {
            slots,
            bytes,
            waiting: waiting != 0,
        }
    }
}

/// What a connection end's counters say now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndCounts {
    /// Slots moved so far.
    pub slots: u64,
    /// Bytes moved so far.
    pub bytes: u64,
    /// A kernel waits on this end (for data on a receive end, a free slot on a send end) past
    /// its first round of polls.
    pub waiting: bool,
}

/// Where a connection's FIFO is, as the receiver offers it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Offer {
    /// The FIFO's CUDA IPC handle, for a sender in another process (device memory only).
    handle: Option<Vec<u8>>,
    /// The FIFO's shared segment, for a sender in another process (host staging only).
    shm: Option<String>,
    /// The receiver's GPU.
    gpu: u32,
    /// Whether the FIFO is in pinned host memory.
    host: bool,
    /// The FIFO's base: tail at +0, (head at +128,) sizes at +256, slots at +512.
    base: u64,
    /// Bytes per slot.
    slot_bytes: u64,
}

/// The sender's reply: where the receiver frees slots.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Ack {
    /// `head` is in the FIFO's shared segment (at +128), not in the sender's memory.
    head_in_fifo: bool,
    /// `head`'s CUDA IPC handle, for a receiver in another process (device memory only).
    handle: Option<Vec<u8>>,
    /// The sender's GPU.
    gpu: u32,
    /// `head`'s address (in pinned host memory when the FIFO is).
    head: u64,
}

/// The receiving end of a GPU connection.
pub(crate) struct GpuRecv {
    key: ConnKey,
    fifo: FifoMem,
    counts: Counts,
    /// The sender's `head` (its memory, or the FIFO's shared segment).
    head: u64,
    /// The sender's memory mapped into this process, when it lives in another.
    _far: Option<Far>,
    /// The sender is on another host: the proxy fills this FIFO from a socket.
    net: Option<Path>,
}

/// The sending end of a GPU connection.
pub(crate) struct GpuSend {
    key: ConnKey,
    /// `head`, written by the receiver (None: in the FIFO's shared segment).
    _head_mem: Option<FifoMem>,
    /// `head`'s address.
    head: u64,
    /// Whether the FIFO is staged through host memory.
    host: bool,
    counts: Counts,
    /// The receiver's FIFO base.
    base: u64,
    /// The receiver's memory mapped into this process, when it lives in another.
    _far: Option<Far>,
    /// The receiver is on another host: the FIFO is this rank's, drained by the proxy over
    /// this path.
    net: Option<Path>,
}

/// How a connection end's bytes move, for its live counters.
fn path(net: Option<Path>, host: bool) -> Path {
    match (net, host) {
        (Some(p), _) => p,
        (None, true) => Path::GpuHost,
        (None, false) => Path::GpuP2p,
    }
}

impl GpuRecv {
    /// GPU memory this end holds, bytes: its FIFO when in GPU memory, its counters.
    pub(crate) fn device_bytes(&self) -> usize {
        self.fifo.device_bytes() + self.counts.state.len()
    }

    /// The end as the kernel sees it.
    pub(crate) fn dev_conn(&self) -> DevConn {
        let base = self.fifo.addr();
        DevConn {
            fifo: base + SLOTS_OFF as u64,
            sizes: base + SIZES_OFF as u64,
            tail: base,
            head: self.head,
            step: self.counts.state.ptr(),
            bytes: self.counts.mirror.ptr() as u64,
            peer: self.key.peer as u32,
            channel: self.key.channel,
            pad: 0,
        }
    }

    /// This rank's LL area for the peer's lines (point-to-point connections on this host;
    /// `slot_bytes` as connected). A network FIFO has none: the peer cannot store into it.
    pub(crate) fn ll_area(&self, slot_bytes: usize) -> Option<u64> {
        ll_area(&self.key, self.fifo.addr(), slot_bytes).filter(|_| self.net.is_none())
    }

    /// Slots and bytes received so far, and whether a kernel waits for data.
    pub(crate) fn counts(&self) -> EndCounts {
        self.counts.read()
    }

    /// Whether the FIFO is staged through host memory.
    pub(crate) fn through_host(&self) -> bool {
        self.fifo.on_host()
    }

    /// The connection, named from this rank's side.
    pub(crate) fn key(&self) -> ConnKey {
        self.key
    }

    /// How the bytes move.
    pub(crate) fn path(&self) -> Path {
        path(self.net, self.through_host())
    }
}

impl GpuSend {
    /// GPU memory this end holds, bytes: the head word when in GPU memory, its counters.
    pub(crate) fn device_bytes(&self) -> usize {
        self._head_mem.as_ref().map_or(0, FifoMem::device_bytes) + self.counts.state.len()
    }

    /// The end as the kernel sees it.
    pub(crate) fn dev_conn(&self) -> DevConn {
        DevConn {
            fifo: self.base + SLOTS_OFF as u64,
            sizes: self.base + SIZES_OFF as u64,
            tail: self.base,
            head: self.head,
            step: self.counts.state.ptr(),
            bytes: self.counts.mirror.ptr() as u64,
            peer: self.key.peer as u32,
            channel: self.key.channel,
            pad: 0,
        }
    }

    /// The connection, named from this rank's side.
    pub(crate) fn key(&self) -> ConnKey {
        self.key
    }

    /// How the bytes move.
    pub(crate) fn path(&self) -> Path {
        path(self.net, self.host)
    }

    /// The peer's LL area for this rank's lines (point-to-point connections on this host;
    /// `slot_bytes` as connected); its direct area follows it.
    pub(crate) fn ll_area(&self, slot_bytes: usize) -> Option<u64> {
        ll_area(&self.key, self.base, slot_bytes).filter(|_| self.net.is_none())
    }

    /// Whether the peer's FIFO (and its areas) is in host memory.
    pub(crate) fn through_host(&self) -> bool {
        self.host
    }

    /// Slots and bytes sent so far, and whether a kernel waits for a free slot.
    pub(crate) fn counts(&self) -> EndCounts {
        self.counts.read()
    }
}

/// What connecting needs from the communicator.
pub(crate) struct GpuEndpoints<'a> {
    /// The bootstrap network.
    pub net: &'a BootstrapNet,
    /// The communicator's message namespace.
    pub comm_tag: u64,
    /// Communicator rank → bootstrap rank.
    pub net_rank: &'a [usize],
    /// This rank.
    pub rank: usize,
    /// This rank's GPU context.
    pub ctx: &'a Arc<CudaContext>,
    /// This rank's TCP data listener (connections to other hosts).
    pub listener: &'a DataListener,
    /// Data sockets per connection to another host
    /// (`NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD`).
    pub sockets: usize,
    /// The congestion control of those sockets (None: the kernel's default; `RNCCL_SOCKET_CC`).
    pub congestion: Option<&'a str>,
    /// Bytes per FIFO slot.
    pub slot_bytes: usize,
    /// Per communicator rank: stage the FIFOs received from it through host memory
    /// (`NCCL_P2P_DISABLE`, or a path beyond `NCCL_P2P_LEVEL`: [`super::staging`]).
    pub staged: &'a [bool],
    /// Bound on every wait.
    pub deadline: Deadline,
    /// Raised to interrupt every wait.
    pub abort: &'a AtomicBool,
    /// This rank's usable IB ports (peers on other hosts on the same fabric are reached over
    /// IB).
    pub ib: Option<&'a IbNet>,
}

impl GpuEndpoints<'_> {
    /// "rank 3 (host b, pid 812)" for a communicator rank.
    pub(super) fn describe(&self, rank: usize) -> String {
        self.net.describe(self.net_rank[rank])
    }

    /// Whether `rank` runs on another host (its FIFOs are reached over the network).
    fn other_host(&self, rank: usize) -> bool {
        let peers = self.net.peers();
        peers[self.net_rank[self.rank]].host_hash != peers[self.net_rank[rank]].host_hash
    }

    /// Whether `rank` lives in this process (addresses are shared).
    fn same_process(&self, rank: usize) -> bool {
        let peers = self.net.peers();
        let (me, p) = (
            &peers[self.net_rank[self.rank]],
            &peers[self.net_rank[rank]],
        );
        me.host_hash == p.host_hash && me.pid_ns == p.pid_ns && me.pid == p.pid
    }

    /// Sends `body` to `key`'s peer under `tag`.
    pub(super) fn send<T: serde::Serialize>(
        &self,
        key: &ConnKey,
        tag: u64,
        body: &T,
    ) -> Result<()> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| Error::Internal(format!("encoding a GPU connection message: {e}")))?;
        self.net.send(
            self.net_rank[key.peer],
            self.comm_tag,
            tag,
            &bytes,
            self.deadline,
        )
    }

    /// Waits for `key`'s peer's message under `tag` (`what` it was to do, for messages).
    pub(super) fn recv<T: serde::de::DeserializeOwned>(
        &self,
        key: &ConnKey,
        tag: u64,
        what: &str,
    ) -> Result<T> {
        let what = format!(
            "waiting for {} to {what} on channel {}",
            self.describe(key.peer),
            key.channel
        );
        let body = self.net.recv_abortable(
            self.net_rank[key.peer],
            self.comm_tag,
            tag,
            self.deadline,
            &what,
            self.abort,
        )?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::Remote(format!(
                "{} sent a malformed GPU connection message: {e}",
                self.describe(key.peer)
            ))
        })
    }
}

/// Whether `ctx`'s GPU can store into GPU `peer`'s memory; enables that access once.
///
/// Errors: [`Error::Cuda`] when the driver fails to answer or to enable access.
fn reach(ctx: &Arc<CudaContext>, peer: usize) -> Result<bool> {
    if ctx.ordinal() == peer {
        return Ok(true);
    }
    let mut can = 0;
    // SAFETY: writes one int; both ordinals exist (the peer's came from a live context).
    let r = unsafe { sys::cuDeviceCanAccessPeer(&mut can, ctx.cu_device(), peer as i32) };
    check(r, || {
        format!("asking whether GPU {} reaches GPU {peer}", ctx.ordinal())
    })?;
    if can == 0 {
        return Ok(false);
    }
    let other = CudaContext::new(peer)
        .map_err(|e| cuda_error(e, format!("retaining GPU {peer}'s context")))?;
    ctx.bind_to_thread()
        .map_err(|e| cuda_error(e, format!("binding GPU {}", ctx.ordinal())))?;
    // SAFETY: both are primary contexts of distinct devices; `ctx` is current.
    let r = unsafe { sys::cuCtxEnablePeerAccess(other.cu_ctx(), 0) };
    if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
        check(r, || {
            format!("enabling GPU {} → GPU {peer} access", ctx.ordinal())
        })?;
    }
    Ok(true)
}

/// The error for GPUs of one process that cannot store into each other's memory.
fn no_peer_access(ctx: &Arc<CudaContext>, peer_gpu: u32, peer: &str) -> Error {
    Error::invalid_usage(format!(
        "GPU {} cannot reach GPU {peer_gpu} of {peer} (no peer access); set NCCL_P2P_DISABLE=1 \
         on every rank to stage through host memory",
        ctx.ordinal()
    ))
}

/// What [`connect`] made: the ends the kernels use, and the connections to other hosts the
/// communicator's proxy thread must drive ([`super::proxy::Proxy`]).
pub(crate) struct Connected {
    /// Sending ends (each knows its key).
    pub sends: Vec<GpuSend>,
    /// Receiving ends (each knows its key).
    pub recvs: Vec<GpuRecv>,
    /// The ends to peers on other hosts, as the proxy sees them (their FIFOs are owned by
    /// `sends` and `recvs`, which must outlive the proxy).
    pub net: Vec<NetConn>,
}

/// Connects this rank's `sends` and `recvs` (keys named from this rank's side); every peer
/// must connect the mirror keys at about the same time. Peers on other hosts are connected
/// over TCP or IB ([`super::net`]); the others through memory both GPUs reach.
///
/// Errors: [`Error::InvalidUsage`] for GPUs of one process without peer access;
/// [`Error::Timeout`] / [`Error::Aborted`] naming the peer that did not answer;
/// [`Error::Cuda`] for allocation, IPC or registration failures; [`Error::System`] when
/// `/dev/shm` refuses a segment or a data socket fails; [`Error::Remote`] when a peer on
/// another host cannot be reached.
pub(crate) fn connect(
    ep: &GpuEndpoints<'_>,
    sends: &[ConnKey],
    recvs: &[ConnKey],
) -> Result<Connected> {
    let ctx = ep.ctx;
    let (net_sends, sends): (Vec<ConnKey>, Vec<ConnKey>) =
        sends.iter().partition(|k| ep.other_host(k.peer));
    let (net_recvs, recvs): (Vec<ConnKey>, Vec<ConnKey>) =
        recvs.iter().partition(|k| ep.other_host(k.peer));
    // Phase 1: every receiving end offers its FIFO: in its GPU's memory, or staged through
    // host memory (NCCL_P2P_DISABLE): pinned memory for a sender of this process, a shared
    // segment for one of another; for a sender on another host, a FIFO in pinned memory and
    // this rank's data listener.
    let net_job = NetJob::offer(ep, &net_recvs)?;
    let mut pending = Vec::with_capacity(recvs.len());
    for key in &recvs {
        let bytes = fifo_bytes(key, ep.slot_bytes, !ep.staged[key.peer]);
        let fifo = match (ep.staged[key.peer], ep.same_process(key.peer)) {
            (false, _) => FifoMem::Device(DeviceAlloc::zeroed(ctx, bytes)?),
            (true, true) => FifoMem::Host(PinnedHost::zeroed(ctx, bytes)?),
            (true, false) => FifoMem::Shared(HostShared::create(ctx, bytes)?),
        };
        let offer = Offer {
            handle: fifo.handle()?,
            shm: fifo.shm_name(),
            gpu: ctx.ordinal() as u32,
            host: fifo.on_host(),
            base: fifo.addr(),
            slot_bytes: ep.slot_bytes as u64,
        };
        ep.send(key, tags::gpu_offer(key), &offer)?;
        pending.push((*key, fifo));
    }
    // Phase 2: every sending end maps the offered FIFO, places head and replies.
    let mut made_sends = Vec::with_capacity(sends.len() + net_sends.len());
    for key in &sends {
        let offer: Offer = ep.recv(key, tags::gpu_offer(key), "offer its GPU FIFO")?;
        let same = ep.same_process(key.peer);
        if offer.slot_bytes != ep.slot_bytes as u64 {
            return Err(Error::Remote(format!(
                "{} offered {}-byte slots where this rank uses {}: the ranks disagree on \
                 NCCL_BUFFSIZE",
                ep.describe(key.peer),
                offer.slot_bytes,
                ep.slot_bytes
            )));
        }
        // Another process's ordinals may differ (CUDA_VISIBLE_DEVICES): there the driver checks
        // reachability when it maps the handle.
        if same && !offer.host && !reach(ctx, offer.gpu as usize)? {
            return Err(no_peer_access(ctx, offer.gpu, &ep.describe(key.peer)));
        }
        let (base, far, head_mem, head) = match (&offer.shm, offer.host) {
            (Some(name), _) => {
                let seg = HostShared::open(ctx, name)?;
                let base = seg.dev_ptr();
                (
                    base,
                    Some(Far::Shm { _segment: seg }),
                    None,
                    base + HEAD_OFF as u64,
                )
            }
            (None, true) => {
                let h = FifoMem::Host(PinnedHost::zeroed(ctx, 128)?);
                let a = h.addr();
                (offer.base, None, Some(h), a)
            }
            (None, false) => {
                let (base, far) =
                    far_device(ctx, same, offer.base, offer.handle.as_deref(), || {
                        ep.describe(key.peer)
                    })?;
                let h = FifoMem::Device(DeviceAlloc::zeroed(ctx, 128)?);
                let a = h.addr();
                (base, far, Some(h), a)
            }
        };
        let ack = Ack {
            head_in_fifo: head_mem.is_none(),
            handle: match &head_mem {
                Some(h) => h.handle()?,
                None => None,
            },
            gpu: ctx.ordinal() as u32,
            head,
        };
        ep.send(key, tags::gpu_ack(key), &ack)?;
        made_sends.push(GpuSend {
            key: *key,
            _head_mem: head_mem,
            head,
            host: offer.host,
            counts: Counts::new(ctx)?,
            base,
            _far: far,
            net: None,
        });
    }
    let mut net = Vec::new();
    for mut end in net_job.attach(ep, &net_sends)? {
        let via = end.path();
        net.push(end.proxy_conn(ep.slot_bytes, ep.describe(end.key.peer))?);
        let base = end.fifo.ptr() as u64;
        made_sends.push(GpuSend {
            key: end.key,
            _head_mem: Some(FifoMem::Host(end.fifo)),
            head: base + HEAD_OFF as u64,
            host: true,
            counts: Counts::new(ctx)?,
            base,
            _far: None,
            net: Some(via),
        });
    }
    // Phase 3: every receiving end learns where to free slots; a shared segment's name goes
    // once its sender has mapped it.
    let mut made_recvs = Vec::with_capacity(recvs.len() + net_recvs.len());
    for (key, mut fifo) in pending {
        let ack: Ack = ep.recv(&key, tags::gpu_ack(&key), "attach to its GPU FIFO")?;
        let same = ep.same_process(key.peer);
        let (head, far) = if ack.head_in_fifo {
            (fifo.addr() + HEAD_OFF as u64, None)
        } else {
            // The receiver stores into the sender's head, so its GPU must reach the sender's.
            if same && !fifo.on_host() && !reach(ctx, ack.gpu as usize)? {
                return Err(no_peer_access(ctx, ack.gpu, &ep.describe(key.peer)));
            }
            far_device(ctx, same, ack.head, ack.handle.as_deref(), || {
                ep.describe(key.peer)
            })?
        };
        if let FifoMem::Shared(s) = &mut fifo {
            s.unlink();
        }
        made_recvs.push(GpuRecv {
            key,
            fifo,
            counts: Counts::new(ctx)?,
            head,
            _far: far,
            net: None,
        });
    }
    for mut end in net_job.finish(ep)? {
        let via = end.path();
        net.push(end.proxy_conn(ep.slot_bytes, ep.describe(end.key.peer))?);
        let fifo = FifoMem::Host(end.fifo);
        made_recvs.push(GpuRecv {
            key: end.key,
            head: fifo.addr() + HEAD_OFF as u64,
            fifo,
            counts: Counts::new(ctx)?,
            _far: None,
            net: Some(via),
        });
    }
    Ok(Connected {
        sends: made_sends,
        recvs: made_recvs,
        net,
    })
}
