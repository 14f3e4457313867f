//! Launching a group's operations on GPU memory: per communicator, every collective becomes
//! one kernel (its plan encoded as a device program, or the LL or direct kernel over the
//! peers' areas), and all Send/Recv of the group become
//! one fused kernel — a block per peer and direction — so a rank's sends and receives progress
//! together as NCCL's group semantics require. Kernels go on the callers' streams in group
//! order; nothing waits for them. Each kernel carries its operation's number, which it
//! reports as it starts and finishes (kernels/program.cuh, operation tracking; [`super::ops`]).

use cudarc::driver::sys;

use super::GpuEngine;
use super::comm::GpuComm;
use super::group_buffers::{GroupBuffers, group_size, is_collective};
use super::ll::{self, LlOp};
use super::program::{Control, DevBuffers, Part, encode};
use super::programs::Recipe;
use crate::coll::{Func, Plan};
use crate::device::cuda::abi::{DirectMode, THREADS};
use crate::device::cuda::{Interp, PeerKernel, check, cuda_error};
use crate::device::{ReduceSpec, Region};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::exec::plans::{PlanCache, gpu_direct, gpu_ll, gpu_sym};
use crate::exec::{Core, Op};
use crate::redop::RedOp;
use crate::stats::OpInfo;

/// One operation's launch: its work (a kernel, a copy or nothing), the reduction and the
/// stream, and the operation.
struct Launch {
    work: Work,
    spec: ReduceSpec,
    stream: sys::CUstream,
    op: OpInfo,
}

/// What a launch runs.
enum Work {
    /// The step interpreter over its parts (an operation's plan and buffers each).
    Program(Vec<(std::sync::Arc<Plan>, DevBuffers)>),
    /// The one-shot LL all-reduce on that many blocks.
    Ll(LlOp, u32),
    /// The direct kernel (all-reduce, reduce-scatter, all-gather, broadcast or all-to-all, or
    /// a symmetric kernel: [`ll::LlOp::mode`]) with its split over blocks.
    Direct(LlOp, ll::DirectPlan),
    /// The registered kernel (kernels/registered.cuh): the direct kernel's mode with its plan,
    /// and the symmetric plan it runs where every rank's buffers are registered.
    Registered(LlOp, ll::DirectPlan, ll::DirectPlan),
    /// A copy of `bytes` bytes from `src` to `dst` (device addresses) without a kernel: a
    /// collective on one rank, as NCCL runs it (`cudaMemcpyAsync`, nothing when in place).
    Copy { src: u64, dst: u64, bytes: usize },
    /// Nothing: the operation moves no data (no kernel is launched).
    Nothing,
}

impl Work {
    /// Whether a kernel runs it and reports its start and finish.
    fn reports(&self) -> bool {
        matches!(
            self,
            Work::Program(_) | Work::Ll(..) | Work::Direct(..) | Work::Registered(..)
        )
    }
}

impl GpuEngine {
    /// Launches every operation of `ops` (all on this communicator's GPU memory) on their
    /// streams; `seq` counts the communicator's operations, `plans` caches their plans, and
    /// `group` holds every rank's buffers of the collectives the symmetric kernels may run on
    /// them in place ([`super::group_buffers`]).
    ///
    /// Errors: [`Error::InvalidUsage`] for fused Send/Recv on different streams; planning
    /// errors; [`Error::Cuda`] when a launch fails (the caller marks the communicator
    /// unusable).
    pub(crate) fn launch(
        &mut self,
        core: &Core,
        seq: &mut u64,
        plans: &mut PlanCache,
        ops: &[Op],
        group: &GroupBuffers,
    ) -> Result<()> {
        let gpu = &*self.comm;
        // One thread may drive several GPUs (ncclCommInitAll): every driver call below
        // (scratch, input snapshots, LL launches) belongs to this communicator's context.
        gpu.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {}", gpu.info.ordinal)))?;
        launch_all(core, gpu, &mut self.scratch, seq, plans, ops, group)
    }
}

fn launch_all(
    core: &Core,
    gpu: &GpuComm,
    scratch: &mut super::scratch::GpuScratch,
    seq: &mut u64,
    plans: &mut PlanCache,
    ops: &[Op],
    group: &GroupBuffers,
) -> Result<()> {
    let n = core.nranks;
    let plans = ops
        .iter()
        .map(|q| plans.get(core, &q.args))
        .collect::<Result<Vec<_>>>()?;
    // Scratch for the group: each operation's plan scratch, and a snapshot of every input a
    // kernel of the group overwrites before reading it all (in-place AlltoAll; a Send from a
    // buffer a Recv of the group fills), each in its own 256-byte aligned piece.
    let snapshot = |q: &Op| {
        (q.args.in_place && q.args.func == Func::AllToAll)
            || (q.args.func == Func::Send
                && ops
                    .iter()
                    .any(|r| r.args.func == Func::Recv && overlaps(q.input, r.output)))
    };
    let piece = |b: usize| b.next_multiple_of(256);
    let total: usize = ops
        .iter()
        .zip(&plans)
        .map(|(q, p)| piece(p.scratch_bytes) + if snapshot(q) { piece(q.input.len) } else { 0 })
        .sum();
    let mut next = match total {
        0 => 0,
        t => scratch.get(&gpu.ctx, t, ops[0].stream)?,
    };
    let mut take = |b: usize| {
        let at = next;
        next += piece(b) as u64;
        at
    };
    let mut launches: Vec<Launch> = Vec::new();
    let mut p2p: Option<usize> = None;
    // Collectives so far, the place of the next in `group`.
    let mut colls = 0;
    for (q, plan) in ops.iter().zip(plans) {
        let a = q.args;
        *seq += 1;
        let peers = match is_collective(q) {
            true => {
                colls += 1;
                group.of(colls - 1)
            }
            false => None,
        };
        let op = OpInfo {
            seq: *seq,
            func: a.func,
            count: a.count,
            dtype: a.dtype,
            fused: 1,
            algo: plan.algo.nccl_name(),
            nchannels: plan.nchannels,
            direct: false,
        };
        if let Some(sends) = group.sends().filter(|_| a.func.p2p()) {
            // The group's sends go straight into the receive buffers: one kernel on every rank,
            // even one whose operations move no bytes, since its barriers pair with all.
            let input = match snapshot(q) {
                true => snapshot_input(q, take(q.input.len))?,
                false => q.input.ptr as u64,
            };
            let i = match p2p {
                Some(i) => i,
                None => {
                    let spec =
                        ReduceSpec::new(DataType::Uint8, RedOp::Sum.lower(DataType::Uint8, n));
                    let cap = gpu.block_cap(&spec)?;
                    let (kernel, split) = gpu.sends_op(sends, cap).ok_or_else(|| {
                        Error::Internal(
                            "a group's direct send/receive on a communicator without direct \
                             areas"
                                .into(),
                        )
                    })?;
                    launches.push(Launch {
                        work: Work::Direct(kernel, split),
                        spec,
                        stream: q.stream,
                        op: OpInfo {
                            algo: "Direct",
                            nchannels: split.blocks as usize,
                            direct: true,
                            fused: 0,
                            ..op
                        },
                    });
                    p2p = Some(launches.len() - 1);
                    launches.len() - 1
                }
            };
            let l = &mut launches[i];
            if l.stream != q.stream {
                return Err(shared_stream_error());
            }
            l.op.fused += 1;
            if let (Func::Send, Work::Direct(kernel, _)) = (a.func, &mut l.work) {
                kernel.peer_src[a.root] = input;
            }
            continue;
        }
        if plan.lanes.is_empty() {
            launches.push(Launch {
                work: Work::Nothing,
                spec: ReduceSpec::new(a.dtype, a.op.lower(a.dtype, n)),
                stream: q.stream,
                op,
            });
            continue;
        }
        let mut input = (q.input.ptr as u64, q.input.len);
        if snapshot(q) {
            input.0 = snapshot_input(q, take(q.input.len))?;
        }
        let scratch = match plan.scratch_bytes {
            0 => (0, 0),
            b => (take(b), b),
        };
        let bufs = DevBuffers {
            input,
            output: (q.output.ptr as u64, q.output.len),
            scratch,
        };
        if a.func.p2p() {
            // Send/Recv only move bytes: one byte-wise kernel for all of them.
            let spec = ReduceSpec::new(DataType::Uint8, RedOp::Sum.lower(DataType::Uint8, n));
            match p2p.map(|i| &mut launches[i]) {
                Some(l) => {
                    if l.stream != q.stream {
                        return Err(shared_stream_error());
                    }
                    if let Work::Program(parts) = &mut l.work {
                        parts.push((plan, bufs));
                    }
                    l.op.fused += 1;
                }
                None => {
                    p2p = Some(launches.len());
                    launches.push(Launch {
                        work: Work::Program(vec![(plan, bufs)]),
                        spec,
                        stream: q.stream,
                        op,
                    });
                }
            }
            continue;
        }
        let dtype = kernel_dtype(a.func, a.dtype);
        let spec = ReduceSpec::new(dtype, a.op.lower(dtype, n));
        let plain = spec.pre.is_none() && spec.post_div.is_none_or(|d| d == 1);
        if n == 1 && plain && input.1 == bufs.output.1 {
            launches.push(Launch {
                work: Work::Copy {
                    src: input.0,
                    dst: bufs.output.0,
                    bytes: input.1,
                },
                spec,
                stream: q.stream,
                op,
            });
            continue;
        }
        // The LL and direct kernels reduce every rank's input with this rank's scalars; a
        // PreMulSum scalar belongs to its rank (each rank scales its own input, and the scalars
        // may differ), so those operations take the plan, which applies it where the input is.
        let own_scalar = matches!(a.op, RedOp::PreMulSum(_));
        // Ranks sharing a GPU run these kernels on no more blocks than stay resident for all.
        let cap = gpu.block_cap(&spec)?;
        let ll = (!own_scalar && gpu_ll(core, a.func, input.1))
            .then(|| gpu.ll_op(input.0, bufs.output.0, input.1))
            .flatten();
        let (out, total) = (bufs.output, input.1.max(bufs.output.1));
        let mode = match a.func {
            Func::AllGather => Some((DirectMode::AllGather, input.1)),
            Func::ReduceScatter => Some((DirectMode::ReduceScatter, out.1)),
            Func::AllReduce => Some((DirectMode::AllReduce, input.1)),
            Func::Broadcast => Some((DirectMode::Broadcast, out.1)),
            Func::AllToAll => Some((DirectMode::AllToAll, out.1 / n)),
            _ => None,
        };
        // Every rank's buffers in this group, or buffers in symmetric windows: the symmetric
        // kernel loads and stores them in place.
        let sym = mode
            .filter(|_| !own_scalar && ll.is_none() && gpu_sym(core, a.func, total))
            .and_then(|(_, bytes)| gpu.sym_op(a.func, a.root, input, out, bytes, peers, cap));
        let direct = mode
            .filter(|_| {
                !own_scalar && ll.is_none() && sym.is_none() && gpu_direct(core, a.func, total)
            })
            .and_then(|(mode, bytes)| gpu.direct_op(mode, a.root as u32, input.0, out.0, bytes));
        // The direct kernel's most blocks.
        let bound = gpu.direct_bound.min(cap);
        // Where the direct kernel would run an all-reduce, reduce-scatter or all-gather,
        // buffers this rank registered with every peer take the registered kernel, which finds
        // out whether every rank's are. The peers' news of their registrations is read here
        // (never waiting), so operations that cannot take it pay nothing.
        let eligible = direct.is_some()
            && peers.is_none()
            && matches!(
                a.func,
                Func::AllReduce | Func::ReduceScatter | Func::AllGather
            )
            && group_size(a.func, total, n)
            && gpu_sym(core, a.func, total);
        if eligible {
            gpu.registered.poll(core, &gpu.ctx)?;
        }
        let registered = mode
            .filter(|_| eligible)
            .and_then(|(_, bytes)| gpu.reg_op(a.func, input, out, bytes, bound, cap));
        // The LL, symmetric and direct kernels store straight into the peers' memory, without
        // the plan.
        let work = match (ll, sym, direct, registered) {
            (Some(op), ..) => {
                let blocks = ll::blocks(op.bytes, THREADS as usize, cap);
                Work::Ll(op, blocks)
            }
            (None, Some((op, plan)), ..) => Work::Direct(op, plan),
            (None, None, Some(_), Some((op, direct, sym))) => Work::Registered(op, direct, sym),
            (None, None, Some(op), None) => {
                let plan = ll::direct_plan(op.mode, op.bytes, n, bound);
                Work::Direct(op, plan)
            }
            (None, None, None, _) => Work::Program(vec![(plan, bufs)]),
        };
        let op = match &work {
            Work::Ll(..) => OpInfo {
                algo: "Direct",
                nchannels: 1,
                direct: true,
                ..op
            },
            Work::Direct(_, plan) | Work::Registered(_, plan, _) => OpInfo {
                algo: "Direct",
                nchannels: plan.blocks as usize,
                direct: true,
                ..op
            },
            _ => op,
        };
        launches.push(Launch {
            work,
            spec,
            stream: q.stream,
            op,
        });
    }
    let ctl = gpu.control();
    for l in launches {
        launch_one(gpu, &ctl, &l)?;
        // Readers settle what they read; a launch only now and then (see gpu_ops).
        if gpu.ops.launched(l.op, l.work.reports()) {
            gpu.ops.settle(gpu.device_ops(), core.stats.op());
        }
    }
    Ok(())
}

/// Copies `q`'s input into the scratch at `copy` (device address, `q.input.len` bytes) on its
/// stream and returns `copy`: the group writes memory the input occupies before it has all been
/// read, so the kernel reads it from a copy taken first.
///
/// Errors: [`Error::Cuda`] when the copy cannot be queued.
fn snapshot_input(q: &Op, copy: u64) -> Result<u64> {
    // SAFETY: both ranges are q.input.len bytes of this GPU's memory (the caller's contract for
    // the input; the scratch piece was sized for it), and the copy is ordered on the
    // operation's stream before its kernel.
    let r = unsafe { sys::cuMemcpyDtoDAsync_v2(copy, q.input.ptr as u64, q.input.len, q.stream) };
    check(r, || {
        format!("copying the input of {}", q.args.func.nccl_name())
    })?;
    Ok(copy)
}

/// The error for a group whose Send/Recv on one communicator name different streams.
fn shared_stream_error() -> Error {
    Error::invalid_usage(
        "the Send/Recv operations of one group on one communicator must share a stream",
    )
}

/// The data type whose kernels run a collective of `func` on `dtype` data. A function that only
/// moves data (AllGather, Broadcast, AllToAll, Gather, Scatter) runs the byte (`uint8`)
/// kernels, as Send/Recv do: the plan counts bytes and the same bytes move. So a type whose
/// collectives only move data never costs its module's NVRTC compile (PyTorch DDP's first
/// int64 collective is its shape check's AllGather: 13 s of a 14 s DDP run on a fresh 4×H200
/// host), and FP8 data moves on GPUs before sm_90, where FP8's own kernels (for reductions, as
/// NCCL's FP8 arithmetic) do not exist.
fn kernel_dtype(func: Func, dtype: DataType) -> DataType {
    if func.reduces() {
        dtype
    } else {
        DataType::Uint8
    }
}

/// Launches the kernel of `l`, telling it its operation's number, or its copy, or nothing.
///
/// Errors: [`Error::Cuda`] when the kernel cannot be built or launched, or the copy fails;
/// encoding errors.
fn launch_one(gpu: &GpuComm, ctl: &Control, l: &Launch) -> Result<()> {
    let seq = l.op.seq;
    let interp = || {
        Interp::get(
            &gpu.ctx,
            gpu.info.arch(),
            l.spec.dtype,
            l.spec.combine,
            gpu.kernel_cache.as_deref(),
        )
    };
    // The LL or direct kernel on `blocks` blocks; a direct kernel's block moves `unit` bytes a
    // round, and a registered one's symmetric plan is `reg`.
    let peers = |op: &LlOp, kernel, blocks, unit: Option<usize>, reg: Option<&ll::DirectPlan>| {
        let interp = interp()?;
        let mut args = ll::encode(op, seq, &l.spec, ctl)?;
        if let Some(unit) = unit {
            args.unit = unit as u64;
            args.direct_blocks = blocks;
        }
        let mut launched = blocks;
        if let Some(sym) = reg {
            args.reg_blocks = sym.blocks;
            args.reg_unit = sym.unit as u64;
            launched = blocks.max(sym.blocks);
        }
        // SAFETY: the arguments name this communicator's LL and direct areas, epoch, round
        // counts and control words (alive as long as it is) and the caller's buffers (valid
        // until the stream runs the kernel, the contract of Group::push_device); the stream is
        // the caller's.
        unsafe { interp.launch_peers(kernel, launched, l.stream, &mut args) }
    };
    let parts = match &l.work {
        Work::Program(parts) => parts,
        Work::Ll(op, blocks) => return peers(op, PeerKernel::Ll, *blocks, None, None),
        Work::Direct(op, plan) => {
            return peers(op, PeerKernel::Direct, plan.blocks, Some(plan.unit), None);
        }
        Work::Registered(op, direct, sym) => {
            let (blocks, unit) = (direct.blocks, Some(direct.unit));
            return peers(op, PeerKernel::Direct, blocks, unit, Some(sym));
        }
        &Work::Copy { src, dst, bytes } => {
            if src == dst || bytes == 0 {
                return Ok(());
            }
            // SAFETY: both ranges are `bytes` bytes of this GPU's memory (the caller's contract
            // for the buffers, Group::push_device), ordered on the caller's stream.
            let r = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, l.stream) };
            return check(r, || {
                format!("copying {bytes} bytes on GPU {}", gpu.info.ordinal)
            });
        }
        Work::Nothing => return Ok(()),
    };
    let interp = interp()?;
    let recipe = Recipe {
        parts: parts.clone(),
        spec: l.spec,
    };
    let encode = |r: &Recipe| {
        let parts: Vec<Part<'_>> = r
            .parts
            .iter()
            .map(|(plan, bufs)| Part { plan, bufs: *bufs })
            .collect();
        let conns = gpu.conns_of(&parts)?;
        encode(&parts, &conns, &r.spec, ctl)
    };
    let mut programs = gpu.programs.lock().unwrap_or_else(|p| p.into_inner());
    programs.run(recipe, l.stream, encode, |addr, nlanes| {
        // SAFETY: the program was encoded from this communicator's connections and control
        // words (alive as long as the communicator) and the caller's buffers (valid until the
        // stream runs the kernel, the contract of Group::push_device); the stream is the
        // caller's.
        unsafe { interp.launch(nlanes, l.stream, addr, seq) }
    })
}

/// Whether two regions share a byte.
fn overlaps(a: Region, b: Region) -> bool {
    let (a0, b0) = (a.ptr as usize, b.ptr as usize);
    a.len > 0 && b.len > 0 && a0 < b0 + b.len && b0 < a0 + a.len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reductions_run_their_types_kernels() {
        for dtype in DataType::ALL {
            for func in [Func::AllReduce, Func::Reduce, Func::ReduceScatter] {
                assert_eq!(kernel_dtype(func, dtype), dtype, "{func:?} {dtype}");
            }
            for func in [
                Func::AllGather,
                Func::Broadcast,
                Func::AllToAll,
                Func::Gather,
                Func::Scatter,
            ] {
                assert_eq!(
                    kernel_dtype(func, dtype),
                    DataType::Uint8,
                    "{func:?} {dtype}"
                );
            }
        }
    }
}
