//! Launching a group: plan every operation, open the connections the plans need (on all the
//! group's communicators together, so one thread can drive several), then run phase by phase.
//!
//! Each collective is its own phase, so collectives on one communicator complete in the order
//! they were queued; all Send/Recv operations of a communicator form one phase and run
//! concurrently (as NCCL fuses them). Phase `i` of every communicator in the group runs at the
//! same time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use super::group::{Queued, describe_op};
use super::{Communicator, State};
use crate::coll::{self, Func, LaneKey};
use crate::device::cpu::reduce::ReduceSpec;
use crate::error::{Error, Result};
use crate::exec::{self, Execution, LaneStep, OpBuffers, Waiter};
use crate::transport::setup::{ConnKey, ConnectJob, Endpoints};

/// One communicator's share of a group.
struct CommWork<'g> {
    comm: &'g Communicator,
    phases: Vec<Phase>,
}

struct Phase {
    ops: Vec<OpBuffers>,
    lanes: BTreeMap<LaneKey, Vec<LaneStep>>,
    what: String,
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
    let (rank, n) = (core.rank, core.nranks);
    let mut phases: Vec<Phase> = Vec::new();
    let mut p2p_phase: Option<usize> = None;
    for q in ops.iter().filter(|q| std::ptr::eq(q.comm, comm)) {
        let a = q.args;
        let bytes = a.input_bytes(n).max(a.output_bytes(n));
        let algo = coll::choose(
            a.func,
            bytes,
            n,
            core.algo.as_ref().map(|(raw, l)| (raw.as_str(), l)),
        )?;
        let plan = coll::plan(&a, rank, n, &core.rings, core.geo, algo)?;
        st.ops += 1;
        let what = describe_op(&a, st.ops, algo.nccl_name());
        let buffers = OpBuffers {
            input: q.input,
            input_len: q.input_len,
            output: q.output,
            output_len: q.output_len,
            scratch: vec![0; plan.scratch_bytes],
            spec: ReduceSpec::new(a.dtype, a.op.lower(a.dtype, n)),
            snapshot_input: a.in_place && a.func == Func::AllToAll,
            snapshot: Vec::new(),
        };
        let idx = match (a.func, p2p_phase) {
            (Func::Send | Func::Recv, Some(i)) => i,
            _ => {
                phases.push(Phase {
                    ops: Vec::new(),
                    lanes: BTreeMap::new(),
                    what: what.clone(),
                });
                if matches!(a.func, Func::Send | Func::Recv) {
                    p2p_phase = Some(phases.len() - 1);
                }
                phases.len() - 1
            }
        };
        let ph = &mut phases[idx];
        if ph.ops.len() == 1 {
            ph.what = format!("group of Send/Recv ({} …)", ph.what);
        }
        let op_idx = ph.ops.len();
        ph.ops.push(buffers);
        for (key, steps) in plan.lanes {
            ph.lanes
                .entry(key)
                .or_default()
                .extend(steps.into_iter().map(|step| LaneStep { op: op_idx, step }));
        }
    }
    Ok(phases)
}

/// Opens every connection the group's plans need and this rank does not have yet, on all
/// communicators at once (offers first, then attach, then finish).
fn connect_all(works: &[CommWork<'_>], states: &mut [std::cell::RefMut<'_, State>]) -> Result<()> {
    let mut jobs = Vec::new();
    for (w, st) in works.iter().zip(states.iter()) {
        let (mut sends, mut recvs) = (BTreeSet::new(), BTreeSet::new());
        for ph in &w.phases {
            for steps in ph.lanes.values() {
                for s in steps {
                    if let Some(k) = s.step.send.filter(|k| !st.conns.has_send(k)) {
                        sends.insert(k);
                    }
                    if let Some(k) = s.step.recv.filter(|k| !st.conns.has_recv(k)) {
                        recvs.insert(k);
                    }
                }
            }
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
        let mut running: Vec<(usize, Execution, String)> = Vec::new();
        for (ci, q) in queues.iter_mut().enumerate() {
            if let Some(ph) = q.next() {
                let lanes: Vec<(LaneKey, Vec<LaneStep>)> = ph.lanes.into_iter().collect();
                running.push((
                    ci,
                    Execution::new(ph.ops, lanes, &states[ci].conns)?,
                    ph.what,
                ));
            }
        }
        drive(works, states, &mut running)?;
    }
    Ok(())
}

/// Progresses every running execution until all are done.
fn drive(
    works: &[CommWork<'_>],
    states: &mut [std::cell::RefMut<'_, State>],
    running: &mut [(usize, Execution, String)],
) -> Result<()> {
    let policy = works
        .iter()
        .map(|w| w.comm.core.policy)
        .min_by_key(|p| p.timeout)
        .expect("at least one communicator");
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
            match ex.progress(conns) {
                Ok(m) => moved |= m,
                Err(f) => {
                    let notice = |r| core.failure_notice(r);
                    return Err(exec::link_error(what, &f, &|r| core.describe(r), &notice));
                }
            }
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
                exec::liveness(ex, &states[*ci].conns, what, &|r| core.describe(r), &notice)?;
            }
            Ok(())
        };
        let on_timeout = || {
            let (ci, ex, what) = running
                .iter()
                .find(|(ci, ex, _)| !ex.done(&states[*ci].conns))
                .expect("a running execution");
            let core = &works[*ci].comm.core;
            exec::timeout(ex, what, waiter_timeout(works), &|r| core.describe(r))
        };
        waiter.idle(check, on_timeout)?;
    }
}

fn waiter_timeout(works: &[CommWork<'_>]) -> std::time::Duration {
    works
        .iter()
        .map(|w| w.comm.core.timeout)
        .min()
        .unwrap_or_default()
}
