//! Launching a group: plan every operation, open the connections the plans need (on all the
//! group's communicators together, so one thread can drive several), then run phase by phase.
//!
//! Each collective is its own phase, so collectives on one communicator complete in the order
//! they were queued; all Send/Recv operations of a communicator form one phase and run
//! concurrently (as NCCL fuses them). Phase `i` of every communicator in the group runs at the
//! same time.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::group::{Queued, describe_op};
use super::{Communicator, State};
use crate::coll::{Algo, CollArgs, Func, LaneKey};
use crate::device::cpu::reduce::ReduceSpec;
use crate::device::cpu::stream::{STREAM_THRESHOLD, fence};
use crate::error::{Error, Result};
use crate::exec::direct::{DirectArgs, DirectOp, Fallback, Progress};
use crate::exec::{self, Execution, OpBuffers, Segment, WaitPolicy, Waiter};
use crate::transport::setup::{ConnKey, ConnectJob, Endpoints};

/// One communicator's share of a group.
struct CommWork<'g> {
    comm: &'g Communicator,
    phases: Vec<Phase>,
}

struct Phase {
    ops: Vec<OpBuffers>,
    lanes: Vec<(LaneKey, Vec<Segment>)>,
    label: Label,
    /// A collective's bytes and slot-store choice, to report its time to
    /// [`crate::exec::SlotStores`] (Send/Recv phases fuse several operations and report nothing).
    timed: Option<(usize, bool)>,
    /// How the phase meets ranks that use windows.
    sync: Sync,
}

/// How a collective coordinates with window-using peers ([`crate::exec::direct`]).
enum Sync {
    /// The communicator has no direct windows: nothing to say.
    None,
    /// Announce collective `seq` runs through the FIFO plan.
    Fifo(u64),
    /// Try the direct path; fall back to the FIFO plan if any rank announces it.
    Direct(Box<DirectArgs>),
}

/// A phase in flight: a FIFO plan, or a direct operation that may turn into one.
enum Running {
    Fifo(Execution),
    Direct(Box<DirectOp>),
}

/// How an operation (or a fused group of Send/Recv) is named in errors; formatted only when an
/// error is reported, never on the fast path.
#[derive(Debug, Clone, Copy)]
struct Label {
    args: CollArgs,
    seq: u64,
    algo: Algo,
    /// Operations fused into the phase.
    ops: usize,
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let one = describe_op(&self.args, self.seq, self.algo.nccl_name());
        if self.ops > 1 {
            write!(f, "group of {} Send/Recv ({one} …)", self.ops)
        } else {
            f.write_str(&one)
        }
    }
}

pub(crate) fn run_group(ops: Vec<Queued<'_>>) -> Result<()> {
    if ops.is_empty() {
        return Ok(());
    }
    let mut works: Vec<CommWork<'_>> = Vec::new();
    for q in &ops {
        if !works.iter().any(|w| std::ptr::eq(w.comm, q.comm)) {
            works.push(CommWork {
                comm: q.comm,
                phases: Vec::new(),
            });
        }
    }
    let mut states = Vec::with_capacity(works.len());
    for w in &works {
        let st = w.comm.state.try_borrow_mut().map_err(|_| {
            Error::invalid_usage("a communicator is already running an operation on this thread")
        })?;
        if let Some(why) = &st.failed {
            return Err(Error::invalid_usage(format!(
                "this communicator is unusable after an earlier failure ({why}); drop it and create a new one"
            )));
        }
        if w.comm.core.abort.load(Ordering::SeqCst) {
            return Err(Error::Aborted("the communicator was aborted".into()));
        }
        states.push(st);
    }
    for (w, st) in works.iter_mut().zip(states.iter_mut()) {
        w.phases = plan_phases(w.comm, &ops, st)?;
    }
    let result = connect_all(&works, &mut states).and_then(|()| execute(&mut works, &mut states));
    if let Err(e) = &result {
        for (w, st) in works.iter().zip(states.iter_mut()) {
            if st.failed.is_none() {
                w.comm.core.notify_failure(&st.conns, &e.to_string());
            }
            st.failed.get_or_insert_with(|| e.to_string());
        }
    }
    result
}

fn plan_phases(comm: &Communicator, ops: &[Queued<'_>], st: &mut State) -> Result<Vec<Phase>> {
    let core = &comm.core;
    let n = core.nranks;
    let mut phases: Vec<Phase> = Vec::new();
    let mut p2p_phase: Option<usize> = None;
    for q in ops.iter().filter(|q| std::ptr::eq(q.comm, comm)) {
        let a = q.args;
        let plan = st.plans.get(core, &a)?;
        st.ops += 1;
        let bytes = q.input_len.max(q.output_len);
        let stream_slots = st.slot_stores.choose(bytes);
        let buffers = OpBuffers {
            input: q.input,
            input_len: q.input_len,
            output: q.output,
            output_len: q.output_len,
            scratch: vec![0; plan.scratch_bytes],
            spec: ReduceSpec::new(a.dtype, a.op.lower(a.dtype, n)),
            snapshot_input: a.in_place && a.func == Func::AllToAll,
            snapshot: Vec::new(),
            stream_output: q.output_len >= STREAM_THRESHOLD,
            stream_slots,
        };
        let label = Label {
            args: a,
            seq: st.ops,
            algo: plan.algo,
            ops: 1,
        };
        let sync = direct_sync(comm, st, q, &buffers);
        let idx = match (a.func, p2p_phase) {
            (Func::Send | Func::Recv, Some(i)) => i,
            _ => {
                phases.push(Phase {
                    ops: Vec::new(),
                    lanes: Vec::new(),
                    label,
                    timed: (!matches!(a.func, Func::Send | Func::Recv))
                        .then_some((bytes, stream_slots)),
                    sync,
                });
                if matches!(a.func, Func::Send | Func::Recv) {
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
fn direct_sync(comm: &Communicator, st: &mut State, q: &Queued<'_>, b: &OpBuffers) -> Sync {
    let a = q.args;
    if matches!(a.func, Func::Send | Func::Recv) {
        return Sync::None;
    }
    st.colls += 1;
    if !st.windows.announces() {
        return Sync::None;
    }
    let seq = st.colls;
    let eligible = a.count * a.dtype.size() >= crate::exec::direct::DIRECT_MIN_BYTES
        && matches!(
            a.func,
            Func::AllReduce
                | Func::ReduceScatter
                | Func::AllGather
                | Func::Broadcast
                | Func::Reduce
                | Func::Gather
                | Func::Scatter
        );
    let send = st.windows.place(q.input, q.input_len);
    let recv = st.windows.place(q.output.cast_const(), q.output_len);
    let (Some(send), Some(recv), true) = (send, recv, eligible) else {
        return Sync::Fifo(seq);
    };
    // Peers read this rank's output back as they read FIFO slots: learn per size whether
    // streaming it is faster, as for slots.
    let streamed = st.direct_stores.choose(q.input_len.max(q.output_len));
    Sync::Direct(Box::new(DirectArgs {
        rank: comm.core.rank,
        seq,
        func: a.func,
        count: a.count,
        esize: a.dtype.size(),
        root: a.root,
        signature: signature(&a),
        spec: b.spec,
        send,
        recv,
        stream_output: b.stream_output || streamed,
    }))
}

/// What every rank of a direct operation must agree on: function, type, operation, root.
fn signature(a: &CollArgs) -> u64 {
    use crate::redop::{RedOp, Scalar};
    let (op, scalar) = match a.op {
        RedOp::Sum => (0, 0),
        RedOp::Prod => (1, 0),
        RedOp::Max => (2, 0),
        RedOp::Min => (3, 0),
        RedOp::Avg => (4, 0),
        RedOp::PreMulSum(Scalar::Int(v)) => (5, v as u64),
        RedOp::PreMulSum(Scalar::Uint(v)) => (6, v),
        RedOp::PreMulSum(Scalar::Float(v)) => (7, v.to_bits()),
    };
    let head = a.func as u64 | (a.dtype as u64) << 8 | op << 16 | (a.root as u64) << 24;
    crate::bootstrap::host::fnv1a(&[head.to_le_bytes(), scalar.to_le_bytes()].concat())
}

/// A Send whose input overlaps a Recv's output in the same phase reads a snapshot, so an
/// in-place send/recv exchange sends the data the buffer held when the group started.
fn snapshot_overlapping_sends(ops: &mut [OpBuffers]) {
    let outputs: Vec<(usize, usize)> = ops
        .iter()
        .filter(|o| o.output_len > 0)
        .map(|o| (o.output as usize, o.output_len))
        .collect();
    for op in ops
        .iter_mut()
        .filter(|o| o.input_len > 0 && o.output_len == 0)
    {
        let (a, la) = (op.input as usize, op.input_len);
        if outputs.iter().any(|&(b, lb)| a < b + lb && b < a + la) {
            op.snapshot_input = true;
        }
    }
}

/// Opens every connection the group's plans need and this rank does not have yet, on all
/// communicators at once (offers first, then attach, then finish).
fn connect_all(works: &[CommWork<'_>], states: &mut [std::cell::RefMut<'_, State>]) -> Result<()> {
    let mut jobs = Vec::new();
    for (w, st) in works.iter().zip(states.iter()) {
        let (mut sends, mut recvs) = (BTreeSet::new(), BTreeSet::new());
        for seg in w
            .phases
            .iter()
            .flat_map(|ph| ph.lanes.iter().flat_map(|(_, s)| s))
        {
            sends.extend(seg.plan.send_keys.iter().filter(|k| !st.conns.has_send(k)));
            recvs.extend(seg.plan.recv_keys.iter().filter(|k| !st.conns.has_recv(k)));
        }
        if sends.is_empty() && recvs.is_empty() {
            jobs.push(None);
            continue;
        }
        let sends: Vec<ConnKey> = sends.into_iter().collect();
        let recvs: Vec<ConnKey> = recvs.into_iter().collect();
        jobs.push(Some(ConnectJob::start(&endpoints(w.comm), &sends, &recvs)?));
    }
    for (w, job) in works.iter().zip(jobs.iter_mut()) {
        if let Some(j) = job {
            j.attach(&endpoints(w.comm))?;
        }
    }
    for ((w, st), job) in works.iter().zip(states.iter_mut()).zip(jobs) {
        if let Some(j) = job {
            let (sends, recvs) = j.finish(&endpoints(w.comm))?;
            for (k, c, kind) in sends {
                st.conns.add_send(k, c, kind);
            }
            for (k, c, kind) in recvs {
                st.conns.add_recv(k, c, kind);
            }
        }
    }
    Ok(())
}

fn endpoints(comm: &Communicator) -> Endpoints<'_> {
    let core = &comm.core;
    Endpoints {
        net: &core.net,
        comm_tag: core.tag,
        rank: core.rank,
        net_rank: &core.net_rank,
        params: core.params,
        slot_bytes: core.geo.slot_bytes,
        deadline: core.deadline(),
        abort: &core.abort,
    }
}

fn execute(works: &mut [CommWork<'_>], states: &mut [std::cell::RefMut<'_, State>]) -> Result<()> {
    let nphases = works.iter().map(|w| w.phases.len()).max().unwrap_or(0);
    let mut queues: Vec<std::vec::IntoIter<Phase>> = works
        .iter_mut()
        .map(|w| std::mem::take(&mut w.phases).into_iter())
        .collect();
    for _ in 0..nphases {
        let mut running: Vec<(usize, Running, Label)> = Vec::new();
        let mut timed = Vec::new();
        for (ci, q) in queues.iter_mut().enumerate() {
            if let Some(ph) = q.next() {
                let st = &states[ci];
                let run = match ph.sync {
                    Sync::Direct(args) => {
                        let rank = args.rank;
                        Running::Direct(Box::new(DirectOp::new(
                            *args,
                            st.windows.controls(),
                            st.windows.views(rank),
                            Fallback {
                                ops: ph.ops,
                                lanes: ph.lanes,
                            },
                        )))
                    }
                    sync => {
                        if let Sync::Fifo(seq) = sync {
                            st.windows.announce_fifo(works[ci].comm.core.rank, seq);
                        }
                        Running::Fifo(Execution::new(ph.ops, ph.lanes, &st.conns)?)
                    }
                };
                running.push((ci, run, ph.label));
                timed.push((ci, ph.timed));
            }
        }
        let start = std::time::Instant::now();
        drive(works, states, &mut running)?;
        fence();
        let elapsed = start.elapsed();
        for ((ci, t), (_, run, _)) in timed.into_iter().zip(&running) {
            let Some((bytes, slots)) = t else { continue };
            match run {
                Running::Direct(d) => {
                    states[ci]
                        .direct_stores
                        .record(bytes, d.streams_output(), elapsed)
                }
                Running::Fifo(_) => states[ci].slot_stores.record(bytes, slots, elapsed),
            }
        }
    }
    Ok(())
}

/// Progresses every running execution until all are done.
fn drive(
    works: &[CommWork<'_>],
    states: &mut [std::cell::RefMut<'_, State>],
    running: &mut [(usize, Running, Label)],
) -> Result<()> {
    let policy = works
        .iter()
        .map(|w| w.comm.core.policy)
        .min_by_key(|p| p.timeout)
        .expect("at least one communicator");
    // With only sockets involved, spin briefly: past the spin phase the waiter blocks in
    // poll(2), and each spin costs system calls that return nothing.
    let tcp_only = running
        .iter()
        .all(|(ci, ex, _)| !ex.uses_memory(&states[*ci].conns));
    let policy = if tcp_only {
        WaitPolicy {
            spins: policy.spins.min(64),
            ..policy
        }
    } else {
        policy
    };
    let mut waiter = Waiter::new(policy);
    loop {
        let mut moved = false;
        let mut all_done = true;
        for (ci, ex, what) in running.iter_mut() {
            let core = &works[*ci].comm.core;
            let conns = &mut states[*ci].conns;
            if ex.done(conns) {
                continue;
            }
            all_done = false;
            moved |= ex.progress(conns, core, what)?;
            if ex.done(conns) {
                moved = true;
            }
        }
        if all_done {
            return Ok(());
        }
        if moved {
            waiter.reset();
            continue;
        }
        for (ci, _, what) in running.iter() {
            if works[*ci].comm.core.abort.load(Ordering::SeqCst) {
                return Err(Error::Aborted(format!(
                    "{what} interrupted: the communicator was aborted"
                )));
            }
        }
        let check = || -> Result<()> {
            for (ci, ex, what) in running.iter() {
                let core = &works[*ci].comm.core;
                let notice = |r| core.failure_notice(r);
                let what = || what.to_string();
                ex.liveness(&states[*ci].conns, core, &what, &notice)?;
            }
            Ok(())
        };
        let on_timeout = || {
            let (ci, ex, what) = running
                .iter()
                .find(|(ci, ex, _)| !ex.done(&states[*ci].conns))
                .expect("a running execution");
            let core = &works[*ci].comm.core;
            ex.timeout(&what.to_string(), waiter_timeout(works), core)
        };
        // Block in poll(2) on the sockets when every connection involved is TCP; memory FIFOs
        // can only be polled, so any of them keeps the waiter yielding instead.
        let block = |limit: std::time::Duration| -> bool {
            let mut interest = Vec::new();
            for (ci, ex, _) in running.iter() {
                let conns = &states[*ci].conns;
                if ex.done(conns) {
                    continue;
                }
                if ex.uses_memory(conns) {
                    return false;
                }
                interest.extend(ex.poll_interest(conns));
            }
            exec::block_on(&interest, limit)
        };
        waiter.idle_or_block(check, on_timeout, block)?;
    }
}

fn waiter_timeout(works: &[CommWork<'_>]) -> std::time::Duration {
    works
        .iter()
        .map(|w| w.comm.core.timeout)
        .min()
        .unwrap_or_default()
}

impl Running {
    fn done(&self, conns: &crate::exec::Connections) -> bool {
        match self {
            Running::Fifo(ex) => ex.done(conns),
            Running::Direct(d) => d.done(),
        }
    }

    /// Moves the phase on; a direct operation that finds a rank on the FIFO plan becomes that plan.
    fn progress(
        &mut self,
        conns: &mut crate::exec::Connections,
        core: &super::Core,
        what: &Label,
    ) -> Result<bool> {
        match self {
            Running::Fifo(ex) => ex.progress(conns).map_err(|f| {
                let notice = |r| core.failure_notice(r);
                exec::link_error(&what.to_string(), &f, &|r| core.describe(r), &notice)
            }),
            Running::Direct(d) => match d
                .progress()
                .map_err(|e| Error::Remote(format!("{what}: {e}")))?
            {
                Progress::Moved(m) => Ok(m),
                Progress::Fallback(f) => {
                    *self = Running::Fifo(Execution::new(f.ops, f.lanes, conns)?);
                    Ok(true)
                }
            },
        }
    }

    fn uses_memory(&self, conns: &crate::exec::Connections) -> bool {
        match self {
            Running::Fifo(ex) => ex.uses_memory(conns),
            Running::Direct(_) => true,
        }
    }

    fn poll_interest(
        &self,
        conns: &crate::exec::Connections,
    ) -> Vec<(std::os::fd::RawFd, nix::poll::PollFlags)> {
        match self {
            Running::Fifo(ex) => ex.poll_interest(conns),
            Running::Direct(_) => Vec::new(),
        }
    }

    /// An error when a rank this phase waits on is gone.
    fn liveness(
        &self,
        conns: &crate::exec::Connections,
        core: &super::Core,
        what: &dyn Fn() -> String,
        notice: &dyn Fn(usize) -> Option<String>,
    ) -> Result<()> {
        match self {
            Running::Fifo(ex) => exec::liveness(ex, conns, what, &|r| core.describe(r), notice),
            Running::Direct(d) => {
                let Some((p, _)) = d.waiting_for() else {
                    return Ok(());
                };
                let peers = core.net.peers();
                let (me, peer) = (&peers[core.net_rank[core.rank]], &peers[core.net_rank[p]]);
                if peer.pid_ns == me.pid_ns && !crate::transport::fifo::process_alive(peer.pid) {
                    return Err(Error::Remote(format!(
                        "{}: {} exited (process gone) during a direct collective",
                        what(),
                        core.describe(p)
                    )));
                }
                Ok(())
            }
        }
    }

    fn timeout(&self, what: &str, after: std::time::Duration, core: &super::Core) -> Error {
        match self {
            Running::Fifo(ex) => exec::timeout(ex, what, after, &|r| core.describe(r)),
            Running::Direct(d) => Error::Timeout {
                what: format!("{what} (direct, over windows)"),
                waited_for: d
                    .waiting_for()
                    .map(|(p, why)| format!("{} {why}", core.describe(p)))
                    .unwrap_or_else(|| "nobody (a bug: please report it)".into()),
                after,
            },
        }
    }
}
