//! A communicator's GPU (NCCL's `ncclComm` device side): the device and its primary context,
//! the connections the step-interpreter kernels use (every channel's ring neighbours, and every
//! peer for point-to-point work), the host-mapped abort flag and error report the kernels
//! share, and the launch of one kernel per operation on the caller's stream.
//!
//! Nothing here waits for the GPU. Failures after a launch (a peer that stopped, a timeout)
//! are reported by the kernel and read back by [`GpuComm::async_error`], NCCL's
//! `ncclCommGetAsyncError`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, sys};
use rustc_hash::FxHashMap;

use crate::bootstrap::{BootstrapNet, Deadline};
use crate::coll::Rings;
use crate::conn::ConnKey;
use crate::device::cuda::{DeviceAlloc, DeviceInfo, Interp, PinnedHost, context, probe};
use crate::error::{Error, Result};
use crate::exec::gpu::ll::{LL_MAX_RANKS, LlOp};
use crate::exec::gpu::program::{Control, DevConn, Part, REPORT_BYTES, Status, conn_order};
use crate::exec::gpu::spread::p2p_channels;
use crate::stats::{Direction, LinkSnapshot, Path};
use crate::transport::gpu::{EndCounts, GpuEndpoints, GpuRecv, GpuSend, connect};
use crate::transport::gpu_net::proxy::{Proxy, ProxyControl};
use crate::transport::tcp::listener::DataListener;

/// Byte offset of the kernel's report in the control block (its own cache line).
const REPORT_OFF: usize = 64;
/// Byte offset of the operation words, `u64[2]` (kernels/program.cuh, operation tracking), in
/// the control block (their own cache line).
const OPS_OFF: usize = 128;
const _: () = assert!(REPORT_OFF + REPORT_BYTES <= OPS_OFF);

/// A communicator's GPU and its connections.
pub(crate) struct GpuComm {
    /// The device's primary context.
    pub ctx: Arc<CudaContext>,
    /// The device.
    pub info: DeviceInfo,
    /// `[abort: u32][..][Report at 64][..][operations started, finished: u64 at 128]`,
    /// host-mapped.
    control: PinnedHost,
    /// 16 bytes of device memory: the claim the first failing block takes and the count of a
    /// kernel's blocks that finished (`u32` each), and the last operation reported finished
    /// (`u64`).
    claim: DeviceAlloc,
    /// The operations launched that the GPU has not finished.
    pub ops: super::gpu_ops::GpuOps,
    /// Set once a caller was told of a kernel's failure: from then on the operation it stopped
    /// is failed in the rank's history (until then it shows in flight, as a stuck rank's).
    pub failure_told: AtomicBool,
    /// The job's status a kernel's timeout carries, made once (callers poll the async error;
    /// making it asks every rank and writes to their logs).
    pub hang_report: std::sync::OnceLock<String>,
    sends: FxHashMap<ConnKey, GpuSend>,
    recvs: FxHashMap<ConnKey, GpuRecv>,
    /// Longest wait of a kernel for a peer.
    timeout: Duration,
    /// This rank.
    rank: usize,
    /// Bytes per FIFO slot.
    slot_bytes: usize,
    /// Where compiled kernels are kept (`RNCCL_KERNEL_CACHE`; None: not on disk).
    pub kernel_cache: Option<std::path::PathBuf>,
    /// The one-shot LL all-reduce's areas, when every rank is on this host and there are
    /// at most [`LL_MAX_RANKS`].
    ll: Option<LlPeers>,
    /// Point-to-point connections per peer (each way).
    p2p_channels: usize,
    /// Device programs launched so far (the thread driving the communicator locks it).
    pub programs: std::sync::Mutex<crate::exec::gpu::Programs>,
    /// This communicator's place in the per-GPU count of the process.
    _sharing: Sharing,
    /// The proxy thread carrying the connections to other hosts (None: every peer is on
    /// this host). Stopped in `drop` before the FIFOs it reads and writes are freed.
    proxy: Option<Proxy>,
    /// Connection ends a kernel waited on at the last reading of the traffic, and since when
    /// (as first seen by a reading).
    stalls: std::sync::Mutex<FxHashMap<(ConnKey, Direction), Instant>>,
}

/// Where a rank's one-shot LL all-reduce stores and finds lines (`kernels/ll.cuh`), per rank
/// (0 for itself), and its epoch in device memory.
struct LlPeers {
    /// `u32` last epoch used, `u32` blocks finished, `u64` last operation reported finished.
    state: DeviceAlloc,
    /// Per rank, its LL area for this rank's lines.
    out: Vec<u64>,
    /// Per rank, this rank's LL area for its lines.
    inp: Vec<u64>,
    /// Per rank, the (step, live) counters of the send end of the connection with it.
    out_counts: Vec<(u64, u64)>,
    /// The same for the receive end.
    inp_counts: Vec<(u64, u64)>,
}

/// GPU communicators of this process per device ordinal (see [`GpuComm::new`]).
fn sharing() -> &'static std::sync::Mutex<FxHashMap<usize, usize>> {
    static SHARING: std::sync::OnceLock<std::sync::Mutex<FxHashMap<usize, usize>>> =
        std::sync::OnceLock::new();
    SHARING.get_or_init(Default::default)
}

/// Counts this process's communicators on GPU `ordinal` while alive.
struct Sharing(usize);

impl Sharing {
    fn join(ordinal: usize) -> Sharing {
        *sharing()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(ordinal)
            .or_default() += 1;
        Sharing(ordinal)
    }

    /// Whether another communicator of this process uses the same GPU.
    fn shared(&self) -> bool {
        sharing()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&self.0)
            .is_some_and(|&n| n > 1)
    }
}

impl Drop for Sharing {
    fn drop(&mut self) {
        if let Some(n) = sharing()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&self.0)
        {
            *n -= 1;
        }
    }
}

/// What [`GpuComm::new`] needs from the communicator being built.
pub(crate) struct GpuSetup<'a> {
    /// The CUDA device ordinal.
    pub ordinal: usize,
    /// The bootstrap network.
    pub net: &'a BootstrapNet,
    /// The communicator's message namespace.
    pub comm_tag: u64,
    /// This rank and the ranks' bootstrap numbers.
    pub rank: usize,
    /// Communicator rank → bootstrap rank.
    pub net_rank: &'a [usize],
    /// The channels.
    pub rings: &'a Rings,
    /// Bytes per FIFO slot.
    pub slot_bytes: usize,
    /// NCCL_P2P_DISABLE.
    pub p2p_disable: bool,
    /// Bound on connecting and on every kernel wait.
    pub timeout: Duration,
    /// Raised to interrupt connecting, and to stop the proxy thread.
    pub abort: &'a Arc<AtomicBool>,
    /// This rank's TCP data listener (peers on other hosts connect to it).
    pub listener: &'a DataListener,
    /// Data sockets per connection to another host.
    pub sockets: usize,
    /// The communicator's knobs (`RNCCL_KERNEL_CACHE`).
    pub knobs: &'a crate::config::Config,
    /// This rank's usable IB ports, for peers on other hosts.
    pub ib: Option<&'a crate::transport::ib::IbNet>,
}

/// The connections a GPU communicator opens at init: on every channel, a send to the ring's
/// next rank and a receive from its previous one (with more than one rank); with every rank,
/// itself included (a Send to oneself is legal in nccl.h), `p2p` point-to-point connections
/// each way (large point-to-point steps are cut over them,
/// [`crate::exec::gpu::spread`]).
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
/// each point-to-point connection carries one after its FIFO. `None` otherwise: the one-shot
/// kernel stores straight into peers' memory, which ranks on other hosts do not share.
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
    for r in (0..n).filter(|&r| r != s.rank) {
        let key = ConnKey::p2p(r);
        let (Some(send), Some(recv)) = (sends.get(&key), recvs.get(&key)) else {
            return Ok(None);
        };
        match (send.ll_area(s.slot_bytes), recv.ll_area(s.slot_bytes)) {
            (Some(o), Some(i)) => (out[r], inp[r]) = (o, i),
            _ => return Ok(None),
        }
        let (sc, rc) = (send.dev_conn(), recv.dev_conn());
        out_counts[r] = (sc.step, sc.bytes);
        inp_counts[r] = (rc.step, rc.bytes);
    }
    Ok(Some(LlPeers {
        state: DeviceAlloc::zeroed(ctx, 16)?,
        out,
        inp,
        out_counts,
        inp_counts,
    }))
}

impl GpuComm {
    /// Binds the communicator to GPU `s.ordinal` and connects it to its peers (every peer must
    /// do the same at about the same time).
    ///
    /// Errors: [`Error::Cuda`] when the driver, device or memory fails (the message says why
    /// GPUs cannot be used here); connection errors as [`crate::transport::gpu::connect`].
    pub(crate) fn new(s: GpuSetup<'_>) -> Result<GpuComm> {
        let kernel_cache = crate::device::cuda::compile::cache::cache_dir(s.knobs)?;
        let cuda = probe()?;
        let ctx = context(cuda, s.ordinal)?;
        let info = cuda.devices[s.ordinal].clone();
        let control = PinnedHost::zeroed(&ctx, OPS_OFF + 16)?;
        let claim = DeviceAlloc::zeroed(&ctx, 16)?;
        // Pinned now, before any kernel runs: pinning later would serialise the streams.
        let programs = std::sync::Mutex::new(crate::exec::gpu::Programs::new(&ctx)?);
        let p2p = p2p_channels(s.p2p_disable);
        let staged = super::gpu_staging::staged_peers(&s, &info.bus_id)?;
        let (send_keys, recv_keys) = keys(s.rank, s.net_rank.len(), s.rings, p2p);
        let ep = GpuEndpoints {
            net: s.net,
            comm_tag: s.comm_tag,
            net_rank: s.net_rank,
            rank: s.rank,
            ctx: &ctx,
            listener: s.listener,
            sockets: s.sockets,
            slot_bytes: s.slot_bytes,
            staged: &staged,
            deadline: Deadline::after(s.timeout),
            abort: s.abort,
            ib: s.ib,
        };
        let sharing = Sharing::join(s.ordinal);
        let made = connect(&ep, &send_keys, &recv_keys)?;
        let (sends, recvs) = (made.sends, made.recvs);
        // Ranks sharing a GPU in one process (a test set-up; NCCL refuses it): a kernel module
        // loaded while the other rank's kernel waits for this one would wait for that kernel
        // (module loads serialise the GPU), so every data type's kernels are loaded now.
        if sharing.shared() {
            for dtype in crate::DataType::ALL {
                Interp::get(&ctx, info.arch(), dtype, kernel_cache.as_deref())?;
            }
        }
        tracing::info!(
            target: "rnccl::init",
            "rank {} on GPU {} ({}, {}, driver {}): {} connections{}",
            s.rank,
            info.ordinal,
            info.name,
            info.bus_id,
            cuda.driver_version,
            sends.len() + recvs.len(),
            if made.net.iter().any(|c| c.ib.is_some()) {
                " via NET/IB (host-staged) and local FIFOs"
            } else if !made.net.is_empty() {
                " via NET/Socket (host-staged) and local FIFOs"
            } else if recvs.iter().any(GpuRecv::through_host) {
                " via host memory"
            } else {
                " via P2P"
            }
        );
        let sends: FxHashMap<ConnKey, GpuSend> = sends.into_iter().map(|e| (e.key(), e)).collect();
        let recvs: FxHashMap<ConnKey, GpuRecv> = recvs.into_iter().map(|e| (e.key(), e)).collect();
        let ll = ll_peers(&s, &ctx, &sends, &recvs)?;
        let proxy = if made.net.is_empty() {
            None
        } else {
            let ctl = ProxyControl {
                comm_abort: s.abort.clone(),
                kernel_abort: control.ptr() as u64,
                stall_timeout: s.timeout,
                rank: s.rank,
            };
            // SAFETY: the FIFOs are owned by `sends` and `recvs` and the abort flag by
            // `control`, all moved into the GpuComm built below, whose Drop stops the proxy
            // before they are freed; nothing fallible remains between here and that move.
            Some(unsafe { Proxy::start(made.net, ctl) }?)
        };
        Ok(GpuComm {
            ctx,
            info,
            control,
            claim,
            ops: super::gpu_ops::GpuOps::default(),
            failure_told: AtomicBool::new(false),
            hang_report: std::sync::OnceLock::new(),
            sends,
            recvs,
            ll,
            p2p_channels: p2p,
            timeout: s.timeout,
            rank: s.rank,
            slot_bytes: s.slot_bytes,
            kernel_cache,
            programs,
            _sharing: sharing,
            proxy,
            stalls: Default::default(),
        })
    }

    /// The header fields every program of this communicator carries.
    pub(crate) fn control(&self) -> Control {
        let base = self.control.ptr() as u64;
        Control {
            report: base + REPORT_OFF as u64,
            abort: base,
            claim: self.claim.ptr(),
            timeout_ns: self.timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
            ops: base + OPS_OFF as u64,
            finished: self.claim.ptr() + 4,
            rank: self.rank as u32,
            slot_bytes: self.slot_bytes as u64,
        }
    }

    /// Point-to-point connections this communicator opened with every peer (each way): the
    /// most pieces a point-to-point step is cut into ([`crate::exec::gpu::spread`]).
    pub(crate) fn p2p_channels(&self) -> usize {
        self.p2p_channels
    }

    /// The one-shot LL all-reduce of `bytes` bytes per rank from `src` into `dst` (device
    /// addresses), when this communicator has LL areas with every peer.
    pub(crate) fn ll_op(&self, src: u64, dst: u64, bytes: usize) -> Option<LlOp> {
        self.ll.as_ref().map(|l| LlOp {
            src,
            dst,
            bytes,
            state: l.state.ptr(),
            out: l.out.clone(),
            inp: l.inp.clone(),
            out_counts: l.out_counts.clone(),
            inp_counts: l.inp_counts.clone(),
        })
    }

    /// The connection ends a program of `parts` uses, in [`conn_order`].
    ///
    /// Errors: [`Error::Internal`] when a plan names a connection this communicator did not
    /// open (a planning bug: GPU plans use ring neighbours and point-to-point connections).
    pub(crate) fn conns_of(&self, parts: &[Part<'_>]) -> Result<Vec<DevConn>> {
        conn_order(parts)
            .into_iter()
            .map(|(key, send)| {
                let c = if send {
                    self.sends.get(&key).map(GpuSend::dev_conn)
                } else {
                    self.recvs.get(&key).map(GpuRecv::dev_conn)
                };
                c.ok_or_else(|| {
                    Error::Internal(format!(
                        "a GPU plan uses {} {key:?}, which the communicator did not open",
                        if send { "send" } else { "recv" }
                    ))
                })
            })
            .collect()
    }

    /// Raises the abort flag every kernel of this communicator polls: waiting kernels return
    /// within about a microsecond, leaving their stream free.
    pub(crate) fn raise_abort(&self) {
        // SAFETY: the control block's first 4 bytes are the flag (aligned); kernels read it
        // with volatile loads, and a volatile store of a whole u32 is what they expect.
        unsafe { self.control.ptr().cast::<u32>().write_volatile(1) };
    }

    /// What the kernels said of the operations so far: the last started and finished, and
    /// whether one failed (once a caller was told, see `failure_told`).
    pub(crate) fn device_ops(&self) -> super::gpu_ops::DeviceOps {
        let w = self.control.ptr().wrapping_add(OPS_OFF).cast::<u64>();
        // SAFETY: the operation words are two aligned u64 at OPS_OFF inside the control block
        // and the report's code an aligned u32 at REPORT_OFF; kernels store them whole. The
        // kernels order nothing between the two words, so started is taken as at least
        // finished.
        let (finished, started, code) = unsafe {
            let finished = w.add(1).read_volatile();
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            let started = w.read_volatile();
            let code = self
                .control
                .ptr()
                .wrapping_add(REPORT_OFF)
                .cast::<u32>()
                .read_volatile();
            (finished, started, code)
        };
        super::gpu_ops::DeviceOps {
            started: started.max(finished),
            finished,
            failed: (code != 0 || self.proxy.as_ref().is_some_and(Proxy::failed))
                && self.failure_told.load(std::sync::atomic::Ordering::Acquire),
        }
    }

    /// What the kernels reported, if anything went wrong after a launch
    /// (`ncclCommGetAsyncError`): `Ok` while nothing did.
    ///
    /// Errors: [`Error::Timeout`] naming the peer and channel a kernel waited for,
    /// [`Error::Aborted`] after an abort, [`Error::Remote`] when a peer sent a slot of the
    /// wrong size; the proxy thread's error, naming the peer and channel, when a connection to
    /// another host failed (it comes first: it is why the kernels stopped).
    pub(crate) fn async_error(&self, describe: impl Fn(usize) -> String) -> Result<()> {
        if let Some(e) = self.proxy.as_ref().and_then(Proxy::failure) {
            return Err(e);
        }
        let r = self.control.ptr().wrapping_add(REPORT_OFF).cast::<u32>();
        // SAFETY: the report is 32 bytes at REPORT_OFF inside the control block, 4-byte
        // aligned; the kernel writes `code` last, after a system fence, so a nonzero code
        // means the other fields are complete.
        let (code, lane, peer, channel, step, waiting) = unsafe {
            let code = r.read_volatile();
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            (
                code,
                r.add(1).read_volatile(),
                r.add(2).read_volatile(),
                r.add(3).read_volatile(),
                r.add(4).cast::<u64>().read_volatile(),
                r.add(6).cast::<u64>().read_volatile(),
            )
        };
        let what = if waiting == 2 { "a free slot" } else { "data" };
        let gone = self
            .proxy
            .as_ref()
            .is_some_and(|p| p.closed_without_goodbye(peer as usize));
        let peer = describe(peer as usize);
        let note = if gone {
            format!(
                "; {peer} closed its network connection without a goodbye (its process exited \
                 or was killed)"
            )
        } else {
            String::new()
        };
        match Status::from_code(code) {
            None => Ok(()),
            Some(Status::Timeout) => Err(Error::Timeout {
                what: format!(
                    "in a GPU kernel (GPU {}, lane {lane}, channel {channel}) waiting for {what} \
                     (slot {step}){note}",
                    self.info.ordinal
                ),
                waited_for: peer,
                after: self.timeout,
            }),
            Some(Status::Aborted) => Err(Error::Aborted(format!(
                "a GPU kernel stopped on channel {channel} while waiting for {peer}"
            ))),
            Some(Status::BadSize) => Err(Error::Remote(format!(
                "{peer} posted a slot of the wrong size on channel {channel}: the ranks run \
                 different operations; check that every rank calls the same collectives in \
                 the same order"
            ))),
        }
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

impl Drop for GpuComm {
    fn drop(&mut self) {
        // Peers' kernels may still write into this rank's FIFOs and this rank's kernels read
        // them: let the device finish before the memory goes.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the context is current.
            let _ = unsafe { sys::cuCtxSynchronize() };
        }
        // The kernels are done with the FIFOs; the proxy goes before them (it says goodbye to
        // the peers on other hosts, which then know this rank left on purpose).
        if let Some(p) = &mut self.proxy {
            p.stop();
        }
    }
}
