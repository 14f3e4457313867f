//! [`Running`]: a group's host operations, planned and connected, run phase by phase when
//! driven (the wait half of `ncclGroupEnd`).

use std::cell::RefMut;

use super::direct::{DirectOp, Fallback};
use super::enqueue::{Phase, Sync};
use super::label::Label;
use super::{Connections, Driven, Execution, InFlight, Segment, SlotStores, drive};
use crate::error::{Error, Result};
use crate::exec::{Core, State};

/// One communicator's share of a running group: its phases still to run, in order.
pub(crate) struct Work<'g> {
    /// The communicator.
    pub core: &'g Core,
    /// Its state, borrowed for the group's life.
    pub state: RefMut<'g, State>,
    /// Its phases.
    pub phases: std::vec::IntoIter<Phase>,
}

impl Work<'_> {
    /// Every segment of the phases still to run.
    pub(super) fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.phases
            .as_slice()
            .iter()
            .flat_map(|ph| ph.lanes.iter().flat_map(|(_, s)| s))
    }
}

/// A group's host operations, with every communicator's state borrowed until they ran. A
/// group dropped before it ran (or was failed) is abandoned: its communicators become unusable
/// and their peers are told why, so nobody waits for operations that will never run.
#[derive(Default)]
pub(crate) struct Running<'g> {
    works: Vec<Work<'g>>,
    finished: bool,
}

impl<'g> Running<'g> {
    /// The group of `works`, not started.
    pub(super) fn new(works: Vec<Work<'g>>) -> Running<'g> {
        Running {
            works,
            finished: false,
        }
    }

    /// The communicators' work.
    pub(super) fn works_mut(&mut self) -> &mut Vec<Work<'g>> {
        &mut self.works
    }

    /// The first communicator of the group, which names the job in reports.
    pub(crate) fn first_core(&self) -> Option<&'g Core> {
        self.works.first().map(|w| w.core)
    }

    /// Runs phase `i` of every communicator at once, for every `i`, until all are done. On an
    /// error the caller fails the group ([`Running::fail`]) with what it reports.
    ///
    /// Errors: the first failure of any operation ([`Error::Remote`], [`Error::Timeout`],
    /// [`Error::Aborted`]…).
    pub(crate) fn run(&mut self) -> Result<()> {
        loop {
            let mut running: Vec<Driven<'_, Tag<'_>>> = Vec::with_capacity(self.works.len());
            for w in &mut self.works {
                let Some(ph) = w.phases.next() else {
                    continue;
                };
                let core = w.core;
                let host = w.state.engine.host();
                let Phase {
                    ops,
                    lanes,
                    label,
                    timed,
                    sync,
                } = ph;
                let run = match (sync, host.windows.controls()) {
                    (Sync::Direct(args), Some(controls)) => {
                        let reads = core.stats.window_reads(core.nranks);
                        let op = DirectOp::new(
                            *args,
                            controls.clone(),
                            host.windows.views(),
                            Fallback { ops, lanes },
                            reads,
                        );
                        InFlight::Direct(Box::new(op))
                    }
                    (sync, controls) => {
                        if let (Sync::Fifo(seq), Some(c)) = (sync, controls) {
                            c.announce_fifo(core.rank, seq);
                        }
                        InFlight::Fifo(Execution::new(ops, lanes, &host.conns)?)
                    }
                };
                let (total, _, _) = run.steps();
                let direct = matches!(run, InFlight::Direct(_));
                core.stats.op().begin(label.info(direct), total);
                running.push(Driven {
                    peers: core,
                    conns: &mut host.conns,
                    run,
                    label: Tag {
                        label,
                        timed,
                        slot_stores: &mut host.slot_stores,
                        direct_stores: &mut host.direct_stores,
                    },
                    progress: core.stats.op(),
                });
            }
            if running.is_empty() {
                self.finished = true;
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
                    InFlight::Direct(op) => {
                        d.label
                            .direct_stores
                            .record(bytes, op.streams_output(), elapsed)
                    }
                    InFlight::Fifo(_) => d.label.slot_stores.record(bytes, slots, elapsed),
                }
            }
        }
    }

    /// Marks every communicator of the group failed with `e` and tells their peers why.
    pub(crate) fn fail(&mut self, e: &Error) {
        for w in &mut self.works {
            if w.state.failed.is_none() {
                // Peers with connections, and those the group was still connecting to.
                let mut peers = w.state.engine.host_ref().conns.peers();
                peers.extend(
                    w.segments()
                        .flat_map(|seg| seg.plan.send_keys.iter().chain(&seg.plan.recv_keys))
                        .map(|k| k.peer),
                );
                peers.sort_unstable();
                peers.dedup();
                w.core.notify_failure(&peers, &e.to_string());
                // The communicator is unusable now: close its connections without a clean
                // shutdown, so peers blocked on this rank see it gone and fail fast.
                w.state.engine.host().conns = Connections::default();
            }
            w.state.failed.get_or_insert_with(|| e.to_string());
            w.core.stats.op().fail();
        }
        self.finished = true;
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

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let e = Error::invalid_usage(
                "a pending group was dropped before it was waited on; its operations never ran",
            );
            self.fail(&e);
        }
    }
}
