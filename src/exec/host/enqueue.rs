//! Enqueueing a group's host operations: plan every operation, and open the connections the
//! plans need (on all the group's communicators together, so one thread can drive several).
//! What comes back is a [`Running`] group that [`Running::run`] runs phase by phase.
//!
//! Each collective is its own phase, so collectives on one communicator complete in the order
//! they were queued; all Send/Recv operations of a communicator form one phase and run
//! concurrently (as NCCL fuses them). Phase `i` of every communicator in the group runs at the
//! same time.

use std::collections::BTreeSet;

use super::direct::{DIRECT_MIN_BYTES, DirectArgs, has_direct_form};
use super::label::Label;
use super::run::{Running, Work};
use super::{HostEngine, OpBuffers, Segment, SlotStores};
use crate::coll::{CollArgs, Func, LaneKey};
use crate::conn::ConnKey;
use crate::device::ReduceSpec;
use crate::device::cpu::stream::STREAM_THRESHOLD;
use crate::error::{Error, Result};
use crate::exec::{Core, Op, Share, State};
use crate::redop::{RedOp, Scalar};
use crate::transport::setup::{ConnectJob, Endpoints};

/// Operations of one communicator that run together.
pub(super) struct Phase {
    pub ops: Vec<OpBuffers>,
    pub lanes: Vec<(LaneKey, Vec<Segment>)>,
    pub label: Label,
    /// A collective's bytes and slot-store choice, to report its time to [`SlotStores`] when it
    /// is large enough to be tuned (Send/Recv phases fuse several operations and report
    /// nothing).
    pub timed: Option<(usize, bool)>,
    /// How the phase meets ranks that use windows.
    pub sync: Sync,
}

/// How a collective coordinates with window-using peers ([`super::direct`]).
pub(super) enum Sync {
    /// The communicator has no direct windows: nothing to say.
    None,
    /// Announce collective `seq` runs through the FIFO plan.
    Fifo(u64),
    /// Try the direct path; fall back to the FIFO plan if any rank announces it.
    Direct(Box<DirectArgs>),
}

/// Plans every share's operations and opens the connections they need, on all communicators at
/// once.
///
/// Errors: planning errors (nothing is marked failed: no operation started); connection
/// errors, which leave the communicators involved unusable.
pub(crate) fn enqueue(shares: Vec<Share<'_>>) -> Result<Running<'_>> {
    let mut works = Vec::with_capacity(shares.len());
    for Share {
        core,
        mut state,
        ops,
    } in shares
    {
        let phases = plan_phases(core, &mut state, &ops)?;
        works.push(Work {
            core,
            state,
            phases: phases.into_iter(),
        });
    }
    let mut running = Running::new(works);
    running.connect()?;
    Ok(running)
}

fn plan_phases(core: &Core, st: &mut State, ops: &[Op]) -> Result<Vec<Phase>> {
    let n = core.nranks;
    let mut phases: Vec<Phase> = Vec::new();
    let mut p2p_phase: Option<usize> = None;
    for q in ops {
        let a = q.args;
        if let RedOp::PreMulSum(Scalar::Device(at)) = a.op {
            return Err(Error::InvalidUsage(format!(
                "{}: the PreMulSum scalar is in GPU memory ({at:#x}), which only the kernels of \
                 operations on GPU buffers read; pass its value (Scalar::Int/Uint/Float) for \
                 buffers in host memory",
                a.func.nccl_name()
            )));
        }
        let plan = st.plans.get(core, &a)?;
        st.ops += 1;
        let seq = st.ops;
        let host = st.engine.host();
        let bytes = q.input.len.max(q.output.len);
        let stream_slots = host.slot_stores.choose(bytes);
        let spec = ReduceSpec::new(a.dtype, a.op.lower(a.dtype, n));
        // SAFETY: the group borrows the buffers behind `q` for its whole lifetime, which
        // outlives the Running group these buffers go into (the caller's Pending carries the
        // same lifetime).
        let buffers = unsafe { OpBuffers::new(q.input, q.output, plan.scratch_bytes, spec) }?
            .snapshot_input(a.in_place && a.func == Func::AllToAll)
            .stream_output(q.output.len >= STREAM_THRESHOLD)
            .stream_slots(stream_slots);
        let label = Label {
            args: a,
            seq,
            algo: plan.algo,
            nchannels: plan.nchannels,
            ops: 1,
        };
        let sync = direct_sync(core, host, q, &buffers);
        let idx = match (a.func.p2p(), p2p_phase) {
            (true, Some(i)) => i,
            (p2p, _) => {
                phases.push(Phase {
                    ops: Vec::new(),
                    lanes: Vec::new(),
                    label,
                    timed: (!p2p && SlotStores::tuned(bytes)).then_some((bytes, stream_slots)),
                    sync,
                });
                if p2p {
                    p2p_phase = Some(phases.len() - 1);
                }
                phases.len() - 1
            }
        };
        let ph = &mut phases[idx];
        let op = ph.ops.len();
        ph.label.ops = op + 1;
        ph.ops.push(buffers);
        for (lane, (key, _)) in plan.lanes.iter().enumerate() {
            let seg = Segment {
                op,
                plan: plan.clone(),
                lane,
            };
            match ph.lanes.iter_mut().find(|(k, _)| k == key) {
                Some((_, segs)) => segs.push(seg),
                None => ph.lanes.push((*key, vec![seg])),
            }
        }
    }
    if let Some(i) = p2p_phase {
        snapshot_overlapping_sends(&mut phases[i].ops);
    }
    Ok(phases)
}

/// Whether and how collective `q` meets window-using peers; counts collectives.
fn direct_sync(core: &Core, host: &mut HostEngine, q: &Op, b: &OpBuffers) -> Sync {
    let a = q.args;
    if a.func.p2p() {
        return Sync::None;
    }
    host.colls += 1;
    if host.windows.controls().is_none() {
        return Sync::None;
    }
    let seq = host.colls;
    // PreMulSum scales each rank's input by that rank's own scalar (NCCL: "locally"), which
    // ranks may choose apart; the direct path reduces every rank's input with this rank's
    // transform, so it runs the FIFO plan, whose reductions scale only the local input.
    let eligible = a.count * a.dtype.size() >= DIRECT_MIN_BYTES
        && has_direct_form(a.func)
        && !matches!(a.op, RedOp::PreMulSum(_));
    let send = host.windows.place(q.input.ptr, q.input.len);
    let recv = host.windows.place(q.output.ptr, q.output.len);
    let (Some(send), Some(recv), true) = (send, recv, eligible) else {
        return Sync::Fifo(seq);
    };
    // Peers read this rank's output back as they read FIFO slots: learn per size whether
    // streaming it is faster, as for slots.
    let streamed = host.direct_stores.choose(q.input.len.max(q.output.len));
    Sync::Direct(Box::new(DirectArgs {
        rank: core.rank,
        seq,
        func: a.func,
        count: a.count,
        root: a.root,
        signature: signature(&a),
        spec: b.spec(),
        backend: b.backend(),
        send,
        recv,
        stream_output: b.streams_output() || streamed,
    }))
}

/// What every rank of a direct operation must agree on: function, type, operation, root
/// (PreMulSum never runs direct: see [`direct_sync`]).
fn signature(a: &CollArgs) -> u64 {
    let op = match a.op {
        RedOp::Sum => 0,
        RedOp::Prod => 1,
        RedOp::Max => 2,
        RedOp::Min => 3,
        RedOp::Avg => 4,
        RedOp::PreMulSum(_) => 5,
    };
    let head = a.func as u64 | (a.dtype as u64) << 8 | op << 16 | (a.root as u64) << 24;
    crate::hash::fnv1a(&head.to_le_bytes())
}

/// A Send whose input overlaps a Recv's output in the same phase reads a snapshot, so an
/// in-place send/recv exchange sends the data the buffer held when the group started.
fn snapshot_overlapping_sends(ops: &mut Vec<OpBuffers>) {
    let outputs: Vec<(usize, usize)> = ops
        .iter()
        .filter(|o| o.output().len > 0)
        .map(|o| (o.output().ptr as usize, o.output().len))
        .collect();
    for op in std::mem::take(ops) {
        let (i, o) = (op.input(), op.output());
        let (a, la) = (i.ptr as usize, i.len);
        let overlaps =
            la > 0 && o.len == 0 && outputs.iter().any(|&(b, lb)| a < b + lb && b < a + la);
        ops.push(if overlaps {
            op.snapshot_input(true)
        } else {
            op
        });
    }
}

impl Running<'_> {
    /// Opens every connection the group's plans need and its ranks do not have yet, on all
    /// communicators at once (offers first, then attach, then finish).
    ///
    /// Errors: connection errors naming the peer; the group is then failed.
    fn connect(&mut self) -> Result<()> {
        let result = self.connect_all();
        if let Err(e) = &result {
            self.fail(e);
        }
        result
    }

    fn connect_all(&mut self) -> Result<()> {
        let works = self.works_mut();
        // Repeated operations find every connection open: no job to set up.
        let missing = works.iter().any(|w| {
            let conns = &w.state.engine.host_ref().conns;
            w.segments().any(|seg| {
                seg.plan.send_keys.iter().any(|k| !conns.has_send(k))
                    || seg.plan.recv_keys.iter().any(|k| !conns.has_recv(k))
            })
        });
        if !missing {
            return Ok(());
        }
        let mut jobs = Vec::new();
        for w in works.iter() {
            let conns = &w.state.engine.host_ref().conns;
            let (mut sends, mut recvs) = (BTreeSet::new(), BTreeSet::new());
            for seg in w.segments() {
                sends.extend(seg.plan.send_keys.iter().filter(|k| !conns.has_send(k)));
                recvs.extend(seg.plan.recv_keys.iter().filter(|k| !conns.has_recv(k)));
            }
            if sends.is_empty() && recvs.is_empty() {
                jobs.push(None);
                continue;
            }
            let sends: Vec<ConnKey> = sends.into_iter().collect();
            let recvs: Vec<ConnKey> = recvs.into_iter().collect();
            jobs.push(Some(ConnectJob::start(&endpoints(w.core), &sends, &recvs)?));
        }
        for (w, job) in works.iter().zip(jobs.iter_mut()) {
            if let Some(j) = job {
                j.attach(&endpoints(w.core))?;
            }
        }
        for (w, job) in works.iter_mut().zip(jobs) {
            if let Some(j) = job {
                let (sends, recvs) = j.finish(&endpoints(w.core))?;
                let stats = &w.core.stats;
                let conns = &mut w.state.engine.host().conns;
                for (k, c, kind) in sends {
                    conns.add_send(k, c, kind, stats);
                }
                for (k, c, kind) in recvs {
                    conns.add_recv(k, c, kind, stats);
                }
            }
        }
        Ok(())
    }
}

/// What connecting needs of a communicator.
fn endpoints(core: &Core) -> Endpoints<'_> {
    Endpoints {
        net: &core.net,
        listener: &core.listener,
        comm_tag: core.tag,
        rank: core.rank,
        net_rank: &core.net_rank,
        params: core.params.clone(),
        slot_bytes: core.geo.slot_bytes,
        deadline: core.deadline(),
        abort: &core.abort,
    }
}
