//! GPU ranks of the benchmark: device buffers allocated once for the largest point, inputs
//! generated on the host and uploaded, operations launched on the rank's own stream with NCCL's
//! stream semantics (a group returns before the data moves; timing ends when the streams are
//! done), the timed iterations captured into CUDA graphs for `-G`, and the result check on the
//! device (`kernels/check.cu`). Every device call is ordered on the rank's stream, so nothing
//! here waits for the GPU but [`GpuRank::sync`] and the end of a check.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaGraph, CudaStream, sys};

use super::data::{self, DataSpec};
use super::gpu_check::DeviceCheck;
use super::ranks::{Region, input_region, is_sendrecv, output_region};
use super::{BenchOptions, Counts, grouped};
use crate::coll::{CollArgs, Func};
use crate::comm::{BufferRegistration, Communicator, DeviceWindow, Group, group_start};
use crate::device::cuda::{DeviceAlloc, Interp, check, cuda_error, relaxed_capture};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::Combine;

/// One rank on a GPU, with device buffers sized for the largest point.
pub(super) struct GpuRank<'c> {
    comm: &'c Communicator,
    /// The GPU's ordinal, for messages.
    gpu: usize,
    stream: Arc<CudaStream>,
    /// `-R 2`: `send` and `recv` registered as symmetric windows (released before the buffers).
    windows: Vec<DeviceWindow>,
    /// `-R 1`: `send` and `recv` registered with `ncclCommRegister` (released on drop).
    registered: Vec<BufferRegistration>,
    send: DeviceAlloc,
    recv: DeviceAlloc,
    /// Bytes of `send` and `recv` (and of the check's expected output).
    bytes: usize,
    /// The result check (`-c`).
    check: Option<DeviceCheck>,
    /// Host memory where inputs and expected outputs are generated before their upload.
    staging: Vec<u8>,
}

/// Adds what to do to an out-of-memory error of the benchmark buffers.
fn buffers_error(e: Error) -> Error {
    match e {
        Error::Cuda(m) => Error::Cuda(format!(
            "{m} (benchmark buffers: lower the largest size, -e/--maxbytes)"
        )),
        e => e,
    }
}

impl<'c> GpuRank<'c> {
    /// A stream on `comm`'s GPU, send and receive buffers of `bytes` bytes there and, when
    /// `opts.check` is on, the check kernels and their buffers. Every kernel the run launches
    /// is loaded here (compiled on first use): the engine's interpreter for each data type of
    /// `opts` (and bytes, for Send/Recv) as well as the check. Loading a module waits for the
    /// kernels running on its GPU, and those of ranks driven by other threads wait for this
    /// rank: nothing may be loaded once the ranks launch.
    ///
    /// Errors: [`Error::InvalidUsage`] for a communicator without a GPU; [`Error::Cuda`] when
    /// the stream, the memory or the kernels cannot be had.
    pub(super) fn new(
        comm: &'c Communicator,
        bytes: usize,
        opts: &BenchOptions,
    ) -> Result<GpuRank<'c>> {
        let (Some(ctx), Some(info)) = (comm.gpu_context(), comm.gpu_info()) else {
            return Err(Error::invalid_usage(format!(
                "rank {} has no GPU: create GPU ranks with CommConfig::device or \
                 Communicator::init_all_devices",
                comm.rank()
            )));
        };
        let gpu = info.ordinal;
        let stream = ctx
            .new_stream()
            .map_err(|e| cuda_error(e, format!("creating a stream on GPU {gpu}")))?;
        // The modules the sweep will run (and the byte module for sums, which moves data), so
        // no NVRTC compile lands in a timed operation.
        let mut modules = vec![(DataType::Uint8, Combine::Sum)];
        if opts.coll.func().reduces() {
            for &dtype in &opts.dtypes {
                for op in &opts.ops {
                    modules.push((dtype, op.lower(dtype, comm.nranks()).combine));
                }
            }
        }
        for (dtype, combine) in modules {
            Interp::get(ctx, info.arch(), dtype, combine, comm.gpu_kernel_cache())?;
        }
        let alloc = |b: usize| DeviceAlloc::zeroed(ctx, b).map_err(buffers_error);
        let check = if opts.check > 0 {
            Some(DeviceCheck::new(
                ctx,
                info.arch(),
                bytes,
                comm.gpu_kernel_cache(),
            )?)
        } else {
            None
        };
        Ok(GpuRank {
            comm,
            gpu,
            stream,
            windows: Vec::new(),
            registered: Vec::new(),
            send: alloc(bytes)?,
            recv: alloc(bytes)?,
            bytes,
            check,
            staging: Vec::new(),
        })
    }

    /// Registers the send and receive buffers of every rank of `ranks` (this thread's) as
    /// symmetric windows of their communicators (`-R 2`, nccl-tests' `ncclCommWindowRegister`
    /// with `NCCL_WIN_COLL_SYMMETRIC`): every rank's offers go out before any is collected, so
    /// one thread can register for several GPUs.
    ///
    /// Errors: as [`Communicator::device_window_start`] and
    /// [`Communicator::device_window_finish`].
    pub(super) fn register_windows(ranks: &mut [GpuRank<'_>]) -> Result<()> {
        let mut pending = Vec::new();
        for r in ranks.iter() {
            for buf in [&r.send, &r.recv] {
                pending.push(
                    r.comm
                        .device_window_start(buf.ptr(), buf.len().max(1), true)?,
                );
            }
        }
        let mut pending = pending.into_iter();
        for r in ranks.iter_mut() {
            for _ in 0..2 {
                let p = pending
                    .next()
                    .ok_or_else(|| Error::Internal("a window registration went missing".into()))?;
                let w = r.comm.device_window_finish(p)?;
                r.windows.push(w);
            }
        }
        Ok(())
    }

    /// Registers this rank's send and receive buffers with its communicator (`-R 1`,
    /// nccl-tests' `ncclCommRegister`): collectives whose buffers every rank registered load
    /// and store the peers' buffers in place.
    ///
    /// Errors: as [`Communicator::register_buffer`].
    pub(super) fn register_buffers(&mut self) -> Result<()> {
        for buf in [&self.send, &self.recv] {
            let reg = self.comm.register_buffer(buf.ptr(), buf.len().max(1))?;
            self.registered.push(reg);
        }
        Ok(())
    }

    /// The device address of `len` bytes at `off` in the receive (`in_recv`) or send buffer.
    ///
    /// Errors: [`Error::Internal`] when the range does not fit the buffer.
    fn at(&self, in_recv: bool, off: usize, len: usize) -> Result<u64> {
        if off.checked_add(len).is_none_or(|end| end > self.bytes) {
            return Err(Error::Internal(format!(
                "{len} bytes at {off} exceed the {}-byte benchmark buffer",
                self.bytes
            )));
        }
        let base = if in_recv { &self.recv } else { &self.send };
        Ok(base.ptr() + off as u64)
    }

    /// Writes this rank's input for `spec` (in the send buffer, or at its in-place position):
    /// generated on the host and copied on the stream, every element when the results are
    /// `checked`, else a generated head that device-to-device copies repeat
    /// ([`data::generated_bytes`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for an in-place layout nccl.h does not define or
    /// host memory that cannot be had; [`Error::Cuda`] when a copy fails.
    pub(super) fn fill(
        &mut self,
        args: &CollArgs,
        spec: &DataSpec,
        c: &Counts,
        checked: bool,
    ) -> Result<()> {
        let (rank, n) = (self.comm.rank(), self.comm.nranks());
        let Region { in_recv, off, len } = input_region(args, c, rank, n)?;
        let dst = self.at(in_recv, off, len)?;
        let head = data::generated_bytes(len, checked);
        let host = staging(&mut self.staging, head)?;
        data::fill_input(spec, rank, host, head / args.dtype.size());
        upload(&self.stream, self.gpu, dst, host)?;
        repeat_head(&self.stream, self.gpu, dst, head, len)
    }

    /// Queues `agg` operations of this rank into `g`, on this rank's stream: one operation,
    /// or for sendrecv a Send to the next rank and a Recv from the previous one — in place, both
    /// on the receive buffer (nccl-tests' in-place sendrecv; the engine snapshots the Send's
    /// input, as it does for host buffers).
    ///
    /// Errors: argument errors of the group.
    pub(super) fn push(&self, g: &mut Group<'c>, args: &CollArgs, agg: usize) -> Result<()> {
        let (rank, n) = (self.comm.rank(), self.comm.nranks());
        let s = self.stream.cu_stream();
        let (send, recv) = (self.send.ptr(), self.recv.ptr());
        if !is_sendrecv(args) {
            for _ in 0..agg {
                // SAFETY: both buffers are this rank's device memory on its GPU, sized for
                // the largest point (so for every operation's input and output), alive until
                // the rank is dropped, which waits for the stream first; only operations
                // ordered on this stream touch them.
                unsafe { g.push_device(self.comm, *args, send, recv, s)? };
            }
            return Ok(());
        }
        let input = if args.in_place { recv } else { send };
        let send_args = CollArgs {
            root: (rank + 1) % n,
            in_place: false,
            ..*args
        };
        let recv_args = CollArgs {
            func: Func::Recv,
            root: (rank + n - 1) % n,
            in_place: false,
            ..*args
        };
        for _ in 0..agg {
            // SAFETY: as above: this rank's buffers, alive and only used on this stream.
            unsafe {
                g.push_device(self.comm, send_args, input, 0, s)?;
                g.push_device(self.comm, recv_args, 0, recv, s)?;
            }
        }
        Ok(())
    }

    /// Waits for everything queued on this rank's stream, then asks the communicator whether
    /// its kernels reported a failure.
    ///
    /// Errors: [`Error::Cuda`] when the stream fails; the communicator's asynchronous error
    /// ([`Error::Timeout`] naming the peer a kernel waited for, [`Error::Aborted`]…).
    pub(super) fn sync(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| cuda_error(e, format!("waiting for GPU {}'s stream", self.gpu)))?;
        self.comm.async_error()
    }

    /// Wrong output elements of this rank for `spec`, counted on the device against the
    /// expected output generated here; waits for the stream.
    ///
    /// Errors: [`Error::InvalidArgument`] for an in-place layout nccl.h does not define;
    /// [`Error::Internal`] when the check was not set up; [`Error::Cuda`] when a copy or the
    /// kernel fails; the communicator's asynchronous error.
    pub(super) fn check(&mut self, args: &CollArgs, spec: &DataSpec, c: &Counts) -> Result<u64> {
        let (rank, n) = (self.comm.rank(), self.comm.nranks());
        let (off, len) = output_region(args, c, rank, n)?;
        let count = len / args.dtype.size();
        let out = self.at(true, off, len)?;
        let Some(k) = &self.check else {
            return Err(Error::Internal("the device check was not set up".into()));
        };
        let want = staging(&mut self.staging, len)?;
        if !data::expected_output(spec, rank, want, count) {
            return Ok(0);
        }
        let tol = data::tolerance(args.dtype, n);
        // SAFETY: `out` holds `count` elements of the output (range checked by `at`) in this
        // rank's receive buffer, which only this rank's stream writes.
        let wrong = unsafe { k.count(&self.stream, self.gpu, args.dtype, out, want, count, tol)? };
        self.sync()?;
        Ok(wrong)
    }
}

impl Drop for GpuRank<'_> {
    fn drop(&mut self) {
        // Kernels may still use the buffers (after an error): let the stream finish first.
        let _ = self.stream.synchronize();
        for reg in self.registered.drain(..) {
            let _ = self.comm.deregister_buffer(reg);
        }
    }
}

/// `staging` grown to at least `len` bytes, its first `len` bytes.
///
/// Errors: [`Error::InvalidArgument`] when the host memory cannot be had.
fn staging(staging: &mut Vec<u8>, len: usize) -> Result<&mut [u8]> {
    if staging.len() < len {
        staging
            .try_reserve_exact(len - staging.len())
            .map_err(|_| {
                Error::invalid_arg(format!(
                    "cannot allocate {len} bytes of host memory for the benchmark's data: lower \
                     the largest size"
                ))
            })?;
        staging.resize(len, 0);
    }
    Ok(&mut staging[..len])
}

/// Copies `src` to device address `dst` on `stream` (of GPU `gpu`).
///
/// Errors: [`Error::Cuda`] when the copy cannot be queued.
pub(super) fn upload(stream: &CudaStream, gpu: usize, dst: u64, src: &[u8]) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
    // SAFETY: callers take `dst` from `GpuRank::at` or a buffer they checked to hold `src`,
    // so `src.len()` bytes fit there; the stream is live. A copy from pageable memory has read
    // `src` by the time the call returns, and is ordered on the stream before later kernels.
    let r = unsafe {
        sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), src.len(), stream.cu_stream())
    };
    check(r, || format!("copying {} bytes to GPU {gpu}", src.len()))
}

/// Fills device bytes `dst + head .. dst + len` with copies of `dst .. dst + head` on `stream`
/// (of GPU `gpu`, bound to this thread), doubling what is copied each time.
///
/// Errors: [`Error::Cuda`] when a copy cannot be queued.
fn repeat_head(stream: &CudaStream, gpu: usize, dst: u64, head: usize, len: usize) -> Result<()> {
    let mut have = head.min(len);
    while have > 0 && have < len {
        let n = have.min(len - have);
        // SAFETY: source `dst .. dst + n` and destination `dst + have .. dst + have + n` lie
        // within the caller's `len`-byte device range (n ≤ have, have + n ≤ len) and do not
        // overlap; the copy is ordered on the stream after the upload that wrote the source.
        let r = unsafe { sys::cuMemcpyDtoDAsync_v2(dst + have as u64, dst, n, stream.cu_stream()) };
        check(r, || format!("repeating {n} bytes of input on GPU {gpu}"))?;
        have += n;
    }
    Ok(())
}

/// Queues `agg` operations of every rank of `ranks` as one group (nccl-tests `-m`), which
/// launches them on the ranks' streams and returns before they run.
///
/// Errors: argument and launch errors of the group.
pub(super) fn launch<'c>(ranks: &[GpuRank<'c>], args: &CollArgs, agg: usize) -> Result<()> {
    let mut g = group_start();
    for r in ranks {
        r.push(&mut g, args, agg)?;
    }
    g.end()
}

/// Seconds per operation of `opts.iters` iterations of `opts.agg` operations, launched back to
/// back and timed until every stream of `ranks` is done; with graph launches (`-G N`) the
/// iterations are captured into one graph per stream, the ranks meet, and the graphs are
/// launched N times.
///
/// Errors: launch, capture and stream errors; the communicators' asynchronous errors.
pub(super) fn time(
    comms: &[Communicator],
    ranks: &[GpuRank<'_>],
    args: &CollArgs,
    opts: &BenchOptions,
) -> Result<f64> {
    let ops = (opts.iters.max(1) * opts.agg.max(1)) as f64;
    if opts.graph_launches == 0 {
        let start = Instant::now();
        for _ in 0..opts.iters {
            launch(ranks, args, opts.agg)?;
        }
        ranks.iter().try_for_each(GpuRank::sync)?;
        return Ok(start.elapsed().as_secs_f64() / ops);
    }
    let graphs = capture(ranks, args, opts.iters, opts.agg)?;
    grouped::barrier(comms)?;
    let start = Instant::now();
    for _ in 0..opts.graph_launches {
        for (g, r) in graphs.iter().zip(ranks) {
            g.launch()
                .map_err(|e| cuda_error(e, format!("launching a CUDA graph on GPU {}", r.gpu)))?;
        }
    }
    ranks.iter().try_for_each(GpuRank::sync)?;
    Ok(start.elapsed().as_secs_f64() / (ops * opts.graph_launches as f64))
}

/// Captures `iters` iterations of `agg` operations into one CUDA graph per rank's stream, in
/// thread-local capture mode as nccl-tests does: the engine must then keep the calls a
/// capturing thread may not make (allocations, event queries) out of the capture itself.
/// Every capture begun is ended, also after an error.
///
/// Errors: [`Error::Cuda`] when a capture cannot begin, end or be instantiated; launch errors.
fn capture(
    ranks: &[GpuRank<'_>],
    args: &CollArgs,
    iters: usize,
    agg: usize,
) -> Result<Vec<CudaGraph>> {
    let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    let mut begun = 0;
    let mut result = Ok(());
    for r in ranks {
        if let Err(e) = r.stream.begin_capture(mode) {
            result = Err(cuda_error(
                e,
                format!("capturing a CUDA graph on GPU {}", r.gpu),
            ));
            break;
        }
        begun += 1;
    }
    if result.is_ok() {
        result = (0..iters).try_for_each(|_| launch(ranks, args, agg));
    }
    let mut graphs = Vec::with_capacity(begun);
    for r in &ranks[..begun] {
        let what = || format!("ending a CUDA graph capture on GPU {}", r.gpu);
        // Instantiating a graph is a call a thread-local capture forbids while this thread
        // still captures the next rank's stream (`-g N`): nccl-tests ends every capture before
        // instantiating any; here the instantiation runs in relaxed mode.
        match relaxed_capture(|| r.stream.end_capture(sys::CUgraphInstantiate_flags(0))) {
            Ok(Some(g)) => graphs.push(g),
            Ok(None) => {
                if result.is_ok() {
                    result = Err(Error::Cuda(format!("{}: the capture is empty", what())));
                }
            }
            Err(e) => {
                if result.is_ok() {
                    result = Err(cuda_error(e, what()));
                }
            }
        }
    }
    result.map(|()| graphs)
}
