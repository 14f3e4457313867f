//! [`Pending`]: a group that was enqueued (planned and connected) and runs when waited on.

use std::marker::PhantomData;

use super::State;
use super::enqueue::{CommWork, Phase, States, Sync};
use super::label::Label;
use crate::error::{Error, Result};
use crate::exec::direct::{DirectOp, Fallback};
use crate::exec::{Connections, Driven, Execution, Running, SlotStores, drive};

/// Operations launched by [`super::Group::enqueue`], borrowing their buffers (`'a`) and their
/// communicators until [`Pending::wait`] returns. A group dropped before it is waited on is
/// abandoned: its communicators become unusable and their peers are told why, so nobody waits
/// for operations that will never run.
#[must_use = "a pending group does nothing until it is waited on"]
pub struct Pending<'a> {
    works: Vec<CommWork<'a>>,
    states: States<'a>,
    finished: bool,
    _buffers: PhantomData<&'a mut [u8]>,
}

impl<'a> Pending<'a> {
    pub(super) fn new(works: Vec<CommWork<'a>>, states: States<'a>) -> Pending<'a> {
        Pending {
            works,
            states,
            finished: false,
            _buffers: PhantomData,
        }
    }

    /// The communicators' work and borrowed states.
    pub(super) fn parts(&mut self) -> (&[CommWork<'a>], &mut States<'a>) {
        (&self.works, &mut self.states)
    }

    /// Runs every operation to completion (the wait half of `ncclGroupEnd`).
    ///
    /// Errors: the first failure of any operation ([`Error::Remote`], [`Error::Timeout`],
    /// [`Error::Aborted`]…); the communicators involved are unusable afterwards.
    pub fn wait(mut self) -> Result<()> {
        let result = self.run().map_err(|e| match (&e, self.works.first()) {
            (Error::Timeout { .. }, Some(w)) => w.comm.core.with_hang_report(e),
            _ => e,
        });
        if let Err(e) = &result {
            self.fail(e);
        }
        self.finished = true;
        result
    }

    /// Marks every communicator of the group failed and tells their peers why.
    pub(super) fn fail(&mut self, e: &Error) {
        for (w, st) in self.works.iter().zip(self.states.iter_mut()) {
            if st.failed.is_none() {
                // Peers with connections, and those the group was still connecting to.
                let mut peers = st.conns.peers();
                peers.extend(
                    w.phases
                        .as_slice()
                        .iter()
                        .flat_map(|ph| ph.lanes.iter().flat_map(|(_, s)| s))
                        .flat_map(|seg| seg.plan.send_keys.iter().chain(&seg.plan.recv_keys))
                        .map(|k| k.peer),
                );
                peers.sort_unstable();
                peers.dedup();
                w.comm.core.notify_failure(&peers, &e.to_string());
                // The communicator is unusable now: close its connections without a clean
                // shutdown, so peers blocked on this rank see it gone and fail fast.
                st.conns = Connections::default();
            }
            st.failed.get_or_insert_with(|| e.to_string());
            w.comm.core.stats.op().fail();
        }
        self.finished = true;
    }

    /// Runs phase `i` of every communicator at once, for every `i`.
    fn run(&mut self) -> Result<()> {
        loop {
            let mut running: Vec<Driven<'_, Tag<'_>>> = Vec::with_capacity(self.works.len());
            for (w, st) in self.works.iter_mut().zip(self.states.iter_mut()) {
                let Some(ph) = w.phases.next() else {
                    continue;
                };
                let core = &w.comm.core;
                let st: &mut State = st;
                let Phase {
                    ops,
                    lanes,
                    label,
                    timed,
                    sync,
                } = ph;
                let run = match (sync, st.windows.controls()) {
                    (Sync::Direct(args), Some(controls)) => {
                        let reads = core.stats.window_reads(core.nranks);
                        let op = DirectOp::new(
                            *args,
                            controls.clone(),
                            st.windows.views(),
                            Fallback { ops, lanes },
                            reads,
                        );
                        Running::Direct(Box::new(op))
                    }
                    (sync, controls) => {
                        if let (Sync::Fifo(seq), Some(c)) = (sync, controls) {
                            c.announce_fifo(core.rank, seq);
                        }
                        Running::Fifo(Execution::new(ops, lanes, &st.conns)?)
                    }
                };
                let (total, _, _) = run.steps();
                let direct = matches!(run, Running::Direct(_));
                core.stats.op().begin(label.info(direct), total);
                running.push(Driven {
                    peers: &**core,
                    conns: &mut st.conns,
                    run,
                    label: Tag {
                        label,
                        timed,
                        slot_stores: &mut st.slot_stores,
                        direct_stores: &mut st.direct_stores,
                    },
                    progress: core.stats.op(),
                });
            }
            if running.is_empty() {
                return Ok(());
            }
            // Only operations large enough to tune their slot stores are timed: the clock is a
            // measurable share of a small operation's latency.
            let start = running
                .iter()
                .any(|d| d.label.timed.is_some())
                .then(std::time::Instant::now);
            drive(&mut running)?;
            let elapsed = start.map(|s| s.elapsed()).unwrap_or_default();
            for d in &mut running {
                d.progress.end();
                let Some((bytes, slots)) = d.label.timed else {
                    continue;
                };
                match &d.run {
                    Running::Direct(op) => {
                        d.label
                            .direct_stores
                            .record(bytes, op.streams_output(), elapsed)
                    }
                    Running::Fifo(_) => d.label.slot_stores.record(bytes, slots, elapsed),
                }
            }
        }
    }
}

/// A running phase's name, with where its time is learned from.
struct Tag<'s> {
    label: Label,
    /// A collective's bytes and slot-store choice (see [`Phase::timed`]).
    timed: Option<(usize, bool)>,
    slot_stores: &'s mut SlotStores,
    direct_stores: &'s mut SlotStores,
}

impl std::fmt::Display for Tag<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.label.fmt(f)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let e = Error::invalid_usage(
                "a pending group was dropped before it was waited on; its operations never ran",
            );
            self.fail(&e);
        }
    }
}
