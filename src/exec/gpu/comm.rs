//! A GPU communicator's shared side (NCCL's `ncclComm` device side): the device and its
//! primary context, the host-mapped control block its kernels poll and report into (abort
//! flag, error report, operation words; `crate::device::cuda::abi`), the operations launched
//! and not yet settled, the device programs cached so far, and its connections
//! ([`GpuConns`]). Watchers read it from any thread ([`crate::exec::Watch`]).
//!
//! Nothing here waits for the GPU. Failures after a launch (a peer that stopped, a timeout)
//! are reported by the kernel and read back by [`GpuComm::async_error`], NCCL's
//! `ncclCommGetAsyncError`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use cudarc::driver::{CudaContext, sys};

use super::ll::LlOp;
use super::program::{Control, Part, conn_order};
use super::windows::{SymKernels, SymWindows};
use crate::device::cuda::abi::{
    CONTROL_BYTES, DevConn, DirectMode, OPS_OFF, REPORT_OFF, RMA_STATE_BYTES, Status,
};
use crate::device::cuda::compile::entry::{COMBINES, FP8_MIN_ARCH};
use crate::device::cuda::{DeviceAlloc, DeviceInfo, Interp, PinnedHost, context, probe};
use crate::error::{Error, Result};
use crate::exec::Core;
use crate::stats::LinkSnapshot;
use crate::transport::gpu::{GpuConns, GpuSetup};

/// A communicator's GPU and its connections.
pub(crate) struct GpuComm {
    /// Its connections; dropped (the proxy stopped) before the control block whose abort flag
    /// the proxy raises.
    pub conns: GpuConns,
    /// The device's primary context.
    pub ctx: Arc<CudaContext>,
    /// The device.
    pub info: DeviceInfo,
    /// `[abort: u32][..][Report at REPORT_OFF][..][operations started, finished: u64 at
    /// OPS_OFF]`, host-mapped.
    control: PinnedHost,
    /// 16 bytes of device memory: the claim the first failing block takes and the count of a
    /// kernel's blocks that finished (`u32` each), and the last operation reported finished
    /// (`u64`).
    claim: DeviceAlloc,
    /// The operations launched that the GPU has not finished.
    pub ops: super::ops::GpuOps,
    /// Set once a caller was told of a kernel's failure: from then on the operation it stopped
    /// is failed in the rank's history (until then it shows in flight, as a stuck rank's).
    pub failure_told: AtomicBool,
    /// The job's status a kernel's timeout carries, made once (callers poll the async error;
    /// making it asks every rank and writes to their logs).
    pub hang_report: std::sync::OnceLock<String>,
    /// Longest wait of a kernel for a peer.
    timeout: Duration,
    /// This rank.
    pub(crate) rank: usize,
    /// Ranks of the communicator.
    pub(crate) nranks: usize,
    /// The one-sided operations' state (`RMA_STATE_BYTES` of device memory: signals consumed
    /// per rank, the rank's signal word for itself; kernels/rma.cuh).
    pub(crate) rma_state: DeviceAlloc,
    /// Bytes per FIFO slot.
    slot_bytes: usize,
    /// Where compiled kernels are kept (`RNCCL_KERNEL_CACHE`; None: not on disk).
    pub kernel_cache: Option<std::path::PathBuf>,
    /// Device programs launched so far (the thread driving the communicator locks it).
    pub programs: std::sync::Mutex<super::Programs>,
    /// The thread that launches this communicator's kernels when one thread ends a group over
    /// several GPUs, started on first use ([`super::launcher`]).
    launcher: std::sync::OnceLock<super::launcher::Launcher>,
    /// The symmetric windows registered and not yet released.
    pub(crate) windows: SymWindows,
    /// Which symmetric kernels may run over them, and on how many blocks.
    sym: SymKernels,
    /// The symmetric kernels whose first run the log told already: a bit per
    /// [`SymKernels::kernel`] place on windows, three places up on a group's buffers, bit 6
    /// for a group's direct send/receive and bit 7 for its all-to-all or broadcast.
    sym_told: AtomicU8,
    /// Whether kernels may take the peers' own buffers when one thread's group holds every
    /// rank ([`super::group_buffers`]): `NCCL_P2P_DIRECT_DISABLE` off.
    pub(crate) direct_pointers: bool,
    /// The most ranks of this communicator on one GPU of one process ([`ranks_per_gpu`]).
    ranks_per_gpu: usize,
    /// The most blocks of a direct kernel, from the knobs at creation
    /// ([`super::choice::direct_block_bound`]).
    pub(crate) direct_bound: usize,
    /// Buffers registered with `ncclCommRegister`: this rank's and its peers'.
    pub(crate) registered: super::registered::Registrations,
    /// Set once the log told of the first registered kernel.
    reg_told: AtomicBool,
}

/// The most ranks of `core`'s communicator that run on one GPU in one process (as the ranks'
/// PCI bus ids, hosts and process ids say): 1 when every rank has its own GPU; above 1 in a
/// test set-up NCCL refuses. Every rank computes the same number. Other communicators on the
/// same GPU (a parent beside its child, PyTorch's process groups) do not count.
fn ranks_per_gpu(core: &Core) -> usize {
    let peers = core.net.peers();
    most_on_one_gpu((0..core.nranks).map(|r| &peers[core.net_rank[r]]))
}

/// The most of `ranks` that share one GPU (bus id) in one process (host, PID namespace, PID),
/// at least 1; ranks without a GPU count for none.
fn most_on_one_gpu<'a>(ranks: impl Iterator<Item = &'a crate::bootstrap::PeerInfo>) -> usize {
    let mut gpus = std::collections::HashMap::new();
    for p in ranks {
        if let Some(bus) = &p.gpu_bus {
            *gpus
                .entry((p.host_hash, p.pid_ns, p.pid, bus))
                .or_insert(0usize) += 1;
        }
    }
    gpus.into_values().max().unwrap_or(1)
}

impl GpuComm {
    /// Binds the communicator whose core is `core` to GPU `ordinal` and connects it to its
    /// peers (every peer must do the same at about the same time).
    ///
    /// Errors: [`Error::Cuda`] when the driver, device or memory fails (the message says why
    /// GPUs cannot be used here); [`Error::InvalidUsage`] for a symmetric-kernel knob or
    /// `NCCL_P2P_DIRECT_DISABLE` that does not parse; connection errors as [`GpuConns::open`].
    pub(crate) fn new(core: &Core, ordinal: usize) -> Result<GpuComm> {
        let kernel_cache = crate::device::cuda::compile::cache::cache_dir(&core.knobs)?;
        let sym = SymKernels::from_config(&core.knobs)?;
        let direct_pointers = !core
            .knobs
            .flag("NCCL_P2P_DIRECT_DISABLE")
            .map_err(|e| Error::invalid_usage(e.to_string()))?;
        let cuda = probe()?;
        let ctx = context(cuda, ordinal)?;
        let info = cuda.devices[ordinal].clone();
        let control = PinnedHost::zeroed(&ctx, CONTROL_BYTES)?;
        let claim = DeviceAlloc::zeroed(&ctx, 16)?;
        let rma_state = DeviceAlloc::zeroed(&ctx, RMA_STATE_BYTES)?;
        // Pinned now, before any kernel runs: pinning later would serialise the streams.
        let programs = std::sync::Mutex::new(super::Programs::new(&ctx)?);
        let setup = GpuSetup {
            bus_id: &info.bus_id,
            net: &core.net,
            comm_tag: core.tag,
            rank: core.rank,
            net_rank: &core.net_rank,
            rings: &core.rings,
            slot_bytes: core.geo.slot_bytes,
            p2p_disable: core.params.p2p_disable,
            timeout: core.timeout,
            abort: &core.abort,
            listener: &core.listener,
            sockets: core.params.sockets,
            congestion: core.params.congestion.name.as_deref(),
            knobs: &core.knobs,
            ib: core.params.ib.as_deref(),
        };
        // SAFETY: the abort flag is the control block's first u32 (aligned), which the
        // GpuComm built below keeps until after its connections (declared first) are dropped.
        let conns = unsafe { GpuConns::open(&setup, &ctx, control.ptr() as u64) }?;
        // Ranks of this communicator sharing a GPU in one process (a test set-up; NCCL refuses
        // it): a kernel module loaded while the other rank's kernel waits for this one would
        // wait for that kernel (module loads serialise the GPU), so every module is loaded now
        // (FP8's only from sm_90, where its kernels exist).
        let ranks_per_gpu = ranks_per_gpu(core);
        if ranks_per_gpu > 1 {
            let keys: Vec<_> = crate::dtype::DataType::ALL
                .into_iter()
                .filter(|d| d.fp8().is_none() || info.arch() >= FP8_MIN_ARCH)
                .flat_map(|d| COMBINES.map(|c| (d, c)))
                .collect();
            let per_sm = Interp::preload(&ctx, info.arch(), &keys, kernel_cache.as_deref())?;
            tracing::info!(target: "rnccl::init",
                "rank {}: {ranks_per_gpu} ranks of this communicator share a GPU, so the \
                 kernels that wait for their peers' blocks run on no more blocks than stay \
                 resident for all: {} or more by data type ({per_sm} or more per \
                 multiprocessor × {} ÷ {ranks_per_gpu})",
                core.rank, per_sm.saturating_mul(info.sms as usize) / ranks_per_gpu, info.sms);
        }
        tracing::info!(
            target: "rnccl::init",
            "rank {} on GPU {} ({}, {}, driver {}): {}",
            core.rank,
            info.ordinal,
            info.name,
            info.bus_id,
            cuda.driver_version,
            conns.summary(),
        );
        Ok(GpuComm {
            conns,
            ctx,
            info,
            control,
            claim,
            ops: super::ops::GpuOps::default(),
            failure_told: AtomicBool::new(false),
            hang_report: std::sync::OnceLock::new(),
            timeout: core.timeout,
            rank: core.rank,
            nranks: core.nranks,
            rma_state,
            slot_bytes: core.geo.slot_bytes,
            kernel_cache,
            programs,
            launcher: std::sync::OnceLock::new(),
            windows: SymWindows::default(),
            sym,
            sym_told: AtomicU8::new(0),
            direct_pointers,
            ranks_per_gpu,
            direct_bound: super::choice::direct_block_bound(&core.knobs),
            registered: Default::default(),
            reg_told: AtomicBool::new(false),
        })
    }

    /// This communicator's launcher thread, started on first use.
    ///
    /// Errors: [`Error::Internal`] when the system refuses another thread.
    pub(crate) fn launcher(&self) -> Result<&super::launcher::Launcher> {
        if let Some(l) = self.launcher.get() {
            return Ok(l);
        }
        let l = super::launcher::Launcher::start(self.info.ordinal)?;
        // Another thread may have started one meanwhile: that one stays, this one stops.
        Ok(self.launcher.get_or_init(|| l))
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

    /// The direct kernel's `mode` from `src` into `dst` (device addresses; `bytes` as
    /// [`LlOp::bytes`]), when this communicator has direct areas in GPU memory with every peer.
    /// Nothing here depends on the buffers (every rank must choose alike, and a peer's buffers
    /// are not known): the kernel moves 16-byte packs where they are 16-byte aligned and whole
    /// elements where not.
    pub(crate) fn direct_op(
        &self,
        mode: DirectMode,
        root: u32,
        src: u64,
        dst: u64,
        bytes: usize,
    ) -> Option<LlOp> {
        self.conns
            .ll()
            .filter(|l| l.direct)
            .and_then(|_| self.ll_op(src, dst, bytes))
            .map(|op| LlOp { mode, root, ..op })
    }

    /// The one-shot LL all-reduce of `bytes` bytes per rank from `src` into `dst` (device
    /// addresses), when this communicator has LL areas with every peer.
    pub(crate) fn ll_op(&self, src: u64, dst: u64, bytes: usize) -> Option<LlOp> {
        self.conns.ll().map(|l| LlOp {
            src,
            dst,
            bytes,
            mode: DirectMode::AllReduce,
            root: 0,
            state: l.state.ptr(),
            out: l.out.clone(),
            inp: l.inp.clone(),
            out_counts: l.out_counts.clone(),
            inp_counts: l.inp_counts.clone(),
            peer_src: Vec::new(),
            peer_dst: Vec::new(),
            send_bytes: Vec::new(),
            recv_bytes: Vec::new(),
        })
    }

    /// The symmetric kernel for `func` from `input` into `output` (device address and bytes;
    /// `bytes` as [`LlOp::bytes`]), with its split over blocks: when the knobs allow one, the
    /// communicator has direct areas with every peer (peer access), and every rank's buffers
    /// are known: `group`, every rank's (input, output) of a group that drives them all
    /// ([`super::group_buffers`]), else both buffers lie in symmetric windows (see
    /// [`super::windows`] for what every rank then assumes). An all-to-all and a broadcast
    /// (from `root`) run as `SendRecv_ST` on a group's buffers only
    /// ([`super::group_sends::GroupSends::all_to_all`], [`super::group_sends::GroupSends::broadcast`]).
    /// It runs on at most `max_blocks` blocks ([`GpuComm::block_cap`]).
    #[allow(clippy::too_many_arguments)] // a collective's own arguments, and where it runs
    pub(crate) fn sym_op(
        &self,
        func: crate::func::Func,
        root: usize,
        input: (u64, usize),
        output: (u64, usize),
        bytes: usize,
        group: Option<&[(u64, u64)]>,
        max_blocks: usize,
    ) -> Option<(LlOp, super::ll::DirectPlan)> {
        use super::group_sends::GroupSends;
        let sends = match func {
            crate::func::Func::AllToAll => {
                Some(GroupSends::all_to_all(self.rank, input.0, bytes, group?))
            }
            crate::func::Func::Broadcast => Some(GroupSends::broadcast(
                self.rank, root, input.0, bytes, group?,
            )),
            _ => None,
        };
        if let Some((sends, srcs)) = sends {
            let name = if func == crate::func::Func::Broadcast {
                "Broadcast_ST"
            } else {
                "AllToAll_ST"
            };
            let (op, plan) = self.send_recv_op(&sends, max_blocks, name, 7)?;
            return Some((
                LlOp {
                    peer_src: srcs,
                    ..op
                },
                plan,
            ));
        }
        let (kernel, mode, name) = self.sym.kernel(func)?;
        let (peer_src, peer_dst, whose) = match group {
            Some(rows) => (
                rows.iter().map(|r| r.0).collect(),
                rows.iter().map(|r| r.1).collect(),
                "the group's own buffers (one thread drives every rank; NCCL_P2P_DIRECT_DISABLE=1 \
                 turns this off)",
            ),
            None => (
                self.windows.place(input.0, input.1)?,
                self.windows.place(output.0, output.1)?,
                "buffers in symmetric windows",
            ),
        };
        let op = self.direct_op(mode, 0, input.0, output.0, bytes)?;
        let plan = super::ll::sym_plan(mode, bytes, self.nranks, &self.sym, max_blocks);
        let bit = 1u8 << (kernel + 3 * usize::from(group.is_some()));
        if self.sym_told.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            tracing::info!(target: "rnccl::coll",
                "rank {}: {} on {whose} ({} blocks for {bytes} bytes; told once per kernel)",
                self.rank, name, plan.blocks);
        }
        Some((
            LlOp {
                peer_src,
                peer_dst,
                ..op
            },
            plan,
        ))
    }

    /// The direct send/receive (`SendRecv_ST`, kernels/symmetric.cuh) of this rank's part
    /// `sends` of a group ([`super::group_sends`]), with its split over at most `max_blocks`
    /// blocks ([`GpuComm::block_cap`]): its sends' sources are left 0 for the launch to fill
    /// in (`peer_src`, per receiving rank). `None` without direct areas with every peer.
    pub(crate) fn sends_op(
        &self,
        sends: &super::group_sends::GroupSends,
        max_blocks: usize,
    ) -> Option<(LlOp, super::ll::DirectPlan)> {
        self.send_recv_op(sends, max_blocks, "SendRecv_ST", 6)
    }

    /// `SendRecv_ST` for `sends` on at most `max_blocks` blocks, its sources left 0; the log
    /// names it as `name` the first time (bit `told` of [`GpuComm::sym_told`]).
    fn send_recv_op(
        &self,
        sends: &super::group_sends::GroupSends,
        max_blocks: usize,
        name: &str,
        told: u8,
    ) -> Option<(LlOp, super::ll::DirectPlan)> {
        let op = self.direct_op(DirectMode::SymSendRecv, 0, 0, 0, sends.largest)?;
        let plan = super::ll::sym_plan(
            DirectMode::SymSendRecv,
            sends.largest,
            self.nranks,
            &self.sym,
            max_blocks,
        );
        let bit = 1u8 << told;
        if self.sym_told.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            tracing::info!(target: "rnccl::coll",
                "rank {}: {name} on the group's own buffers: sends go straight into the receive \
                 buffers (one thread drives every rank; {} blocks for a largest send of {} \
                 bytes; NCCL_P2P_DIRECT_DISABLE=1 turns this off; told once)",
                self.rank, plan.blocks, sends.largest);
        }
        Some((sends.kernel_op(op), plan))
    }

    /// Whether this communicator has direct areas in GPU memory with every peer, which the
    /// direct and symmetric kernels need.
    pub(crate) fn direct_areas(&self) -> bool {
        self.conns.ll().is_some_and(|l| l.direct)
    }

    /// The registered kernel (kernels/registered.cuh) for `func` from `input` into `output`
    /// (device address and bytes; `bytes` as [`LlOp::bytes`]): when the communicator has direct
    /// areas with every peer, the symmetric kernel for `func` is allowed, and both buffers lie
    /// in ranges of this rank's registered with every peer ([`super::registered`]). Its
    /// argument lists carry this rank's buffers as each peer maps them; with it the direct
    /// plan (on at most `direct_bound` blocks) the kernel falls back on, and the symmetric
    /// plan (on at most `max_blocks`, [`GpuComm::block_cap`]).
    pub(crate) fn reg_op(
        &self,
        func: crate::func::Func,
        input: (u64, usize),
        output: (u64, usize),
        bytes: usize,
        direct_bound: usize,
        max_blocks: usize,
    ) -> Option<(LlOp, super::ll::DirectPlan, super::ll::DirectPlan)> {
        let (_, sym_mode, name) = self.sym.kernel(func)?;
        let mode = match func {
            crate::func::Func::AllReduce => DirectMode::AllReduce,
            crate::func::Func::ReduceScatter => DirectMode::ReduceScatter,
            crate::func::Func::AllGather => DirectMode::AllGather,
            _ => return None,
        };
        let op = self.direct_op(mode, 0, input.0, output.0, bytes)?;
        let peer_src = self.registered.place(input.0, input.1)?;
        let peer_dst = self.registered.place(output.0, output.1)?;
        let direct = super::ll::direct_plan(mode, bytes, self.nranks, direct_bound);
        let sym = super::ll::sym_plan(sym_mode, bytes, self.nranks, &self.sym, max_blocks);
        if !self.reg_told.swap(true, Ordering::Relaxed) {
            tracing::info!(target: "rnccl::coll",
                "rank {}: registered buffers: {name} where every rank's buffers are registered \
                 ({} blocks for {bytes} bytes), the direct kernel where not; told once",
                self.rank, sym.blocks);
        }
        Some((
            LlOp {
                peer_src,
                peer_dst,
                ..op
            },
            direct,
            sym,
        ))
    }

    /// The most blocks a kernel that waits for its peers' blocks (LL, direct, symmetric) may
    /// run on for an operation of `spec`: unbounded when every rank has its own GPU. When
    /// ranks share one GPU, every rank's blocks must be resident at once (a block waits for
    /// the same block of every peer, and blocks that cannot start behind resident waiting ones
    /// would hang them), so the blocks the GPU keeps resident of the kernels' module
    /// ([`Interp::peer_blocks_per_sm`] × multiprocessors) ÷ the ranks on it. Every rank of a
    /// communicator on one GPU model gets the same number.
    ///
    /// Errors: as [`Interp::get`], when ranks share a GPU (their modules are loaded already).
    pub(crate) fn block_cap(&self, spec: &crate::device::ReduceSpec) -> Result<usize> {
        if self.ranks_per_gpu <= 1 {
            return Ok(usize::MAX);
        }
        let interp = Interp::get(
            &self.ctx,
            self.info.arch(),
            spec.dtype,
            spec.combine,
            self.kernel_cache.as_deref(),
        )?;
        let resident = interp.peer_blocks_per_sm() * self.info.sms as usize;
        Ok((resident / self.ranks_per_gpu).max(1))
    }

    /// The connection ends a program of `parts` uses, in [`conn_order`].
    ///
    /// Errors: [`Error::Internal`] when a plan names a connection this communicator did not
    /// open (a planning bug: GPU plans use ring neighbours and point-to-point connections).
    pub(crate) fn conns_of(&self, parts: &[Part<'_>]) -> Result<Vec<DevConn>> {
        conn_order(parts)
            .into_iter()
            .map(|(key, send)| {
                self.conns.dev_conn(&key, send).ok_or_else(|| {
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

    /// Lowers the abort flag [`GpuComm::raise_abort`] raised, once no kernel runs: a shrink with
    /// `NCCL_SHRINK_ABORT` waits for them to leave, then lowers it, as NCCL's does.
    pub(crate) fn lower_abort(&self) {
        // SAFETY: as in `raise_abort`.
        unsafe { self.control.ptr().cast::<u32>().write_volatile(0) };
    }

    /// What the kernels said of the operations so far: the last started and finished, and
    /// whether one failed (once a caller was told, see `failure_told`).
    pub(crate) fn device_ops(&self) -> super::ops::DeviceOps {
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
        super::ops::DeviceOps {
            started: started.max(finished),
            finished,
            failed: (code != 0 || self.conns.proxy_failed())
                && self.failure_told.load(std::sync::atomic::Ordering::Acquire),
        }
    }

    /// The operation still running on the GPU, if any: one that started and neither finished
    /// nor failed. A kernel that fails (aborted, timed out) claims the report and leaves
    /// without saying its operation finished; its blocks then stop within microseconds, since
    /// every wait polls the abort flag.
    pub(crate) fn in_flight(&self) -> Option<u64> {
        let ops = self.device_ops();
        // SAFETY: the report's code is an aligned u32 at REPORT_OFF inside the control block,
        // written whole by the kernel.
        let code = unsafe {
            self.control
                .ptr()
                .wrapping_add(REPORT_OFF)
                .cast::<u32>()
                .read_volatile()
        };
        (ops.finished < ops.started && code == 0).then_some(ops.finished + 1)
    }

    /// What the kernels reported, if anything went wrong after a launch
    /// (`ncclCommGetAsyncError`): `Ok` while nothing did.
    ///
    /// Errors: [`Error::Timeout`] naming the peer and channel a kernel waited for,
    /// [`Error::Aborted`] after an abort, [`Error::Remote`] when a peer sent a slot of the
    /// wrong size; the proxy thread's error, naming the peer and channel, when a connection to
    /// another host failed (it comes first: it is why the kernels stopped).
    pub(crate) fn async_error(&self, describe: impl Fn(usize) -> String) -> Result<()> {
        if let Some(e) = self.conns.proxy_failure() {
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
        // The common case, every launch: nothing to report, and nothing to describe.
        let Some(status) = Status::from_code(code) else {
            return Ok(());
        };
        let what = match waiting {
            2 => "a free slot",
            3 => "signals (ncclWaitSignal; the slot is the signal count waited for)",
            _ => "data",
        };
        let gone = self.conns.closed_without_goodbye(peer as usize);
        let peer = describe(peer as usize);
        let note = if gone {
            format!(
                "; {peer} closed its network connection without a goodbye (its process exited \
                 or was killed)"
            )
        } else {
            String::new()
        };
        match status {
            Status::Timeout => Err(Error::Timeout {
                what: format!(
                    "in a GPU kernel (GPU {}, lane {lane}, channel {channel}) waiting for {what} \
                     (slot {step}){note}",
                    self.info.ordinal
                ),
                waited_for: peer,
                after: self.timeout,
            }),
            Status::Aborted => Err(Error::Aborted(format!(
                "a GPU kernel stopped on channel {channel} while waiting for {peer}"
            ))),
            Status::BadSize => Err(Error::Remote(format!(
                "{peer} posted a slot of the wrong size on channel {channel}: the ranks run \
                 different operations; check that every rank calls the same collectives in \
                 the same order"
            ))),
        }
    }

    /// Device memory held while the communicator lives, bytes: the kernels' claim word, the
    /// one-sided state and its connections' (see [`GpuConns::device_bytes`]).
    pub(crate) fn persistent_bytes(&self) -> usize {
        self.claim.len() + self.rma_state.len() + self.conns.device_bytes()
    }

    /// Every connection end's traffic so far (see [`GpuConns::traffic`]).
    pub(crate) fn traffic(&self) -> Vec<LinkSnapshot> {
        self.conns.traffic()
    }
}

impl Drop for GpuComm {
    fn drop(&mut self) {
        // Peers' kernels may still write into this rank's FIFOs and this rank's kernels read
        // them: let the device finish before the memory goes (the connections, dropped next,
        // stop the proxy first).
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the context is current.
            let _ = unsafe { sys::cuCtxSynchronize() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::PeerInfo;

    fn rank(host_hash: u64, pid: u32, bus: Option<&str>) -> PeerInfo {
        PeerInfo {
            rank: 0,
            hostname: "vm".into(),
            host_hash,
            pid,
            pid_ns: 1,
            shm_dev: 1,
            bootstrap: "127.0.0.1:1".parse().unwrap(),
            iface: "lo".into(),
            ib_fabric: None,
            gpu_bus: bus.map(str::to_string),
            version: "test".into(),
            status: None,
        }
    }

    #[test]
    fn ranks_share_a_gpu_only_in_one_process_of_one_host() {
        let (a, b) = (Some("0000:19:00.0"), Some("0000:3b:00.0"));
        let most = |ranks: &[PeerInfo]| most_on_one_gpu(ranks.iter());
        // One rank per GPU, or one GPU in two processes or on two hosts: nobody shares.
        assert_eq!(most(&[rank(1, 10, a), rank(1, 10, b)]), 1);
        assert_eq!(most(&[rank(1, 10, a), rank(1, 11, a)]), 1);
        assert_eq!(most(&[rank(1, 10, a), rank(2, 10, a)]), 1);
        // CPU ranks have no GPU to share.
        assert_eq!(most(&[rank(1, 10, None), rank(1, 10, None)]), 1);
        assert_eq!(most(&[]), 1);
        // `-g 2 --ranks 3`: two ranks on one GPU, one on the other; the most counts.
        assert_eq!(most(&[rank(1, 10, a), rank(1, 10, b), rank(1, 10, a)]), 2);
        assert_eq!(
            most(&[
                rank(1, 10, a),
                rank(1, 10, a),
                rank(1, 10, a),
                rank(1, 10, a)
            ]),
            4
        );
    }
}
