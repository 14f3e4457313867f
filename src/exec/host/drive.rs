//! The drive loop: moves every running phase of a group (one per communicator) until all are
//! done, waiting with a [`Waiter`] between rounds that moved nothing, checking peers' liveness,
//! and turning stalls into timeouts that name what each lane waits for.

use std::fmt::Display;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conns::Connections;
use super::direct::{DirectOp, Progress};
use super::execution::Execution;
use super::failure::{link_error, liveness, timeout};
use super::wait::{WaitPolicy, Waiter, block_on};
use crate::error::{Error, Result};
use crate::stats::{LinkCounters, OpProgress};
use crate::transport::PollInterest;

/// What the executor needs to know about a communicator it runs for.
pub(crate) trait PeerView {
    /// "rank 3 (host b, pid 812)" for a communicator rank.
    fn describe(&self, rank: usize) -> String;
    /// What `rank` reported when it gave up, if it left a notice.
    fn failure_notice(&self, rank: usize) -> Option<String>;
    /// Whether the communicator was aborted.
    fn aborted(&self) -> bool;
    /// How this rank waits.
    fn policy(&self) -> WaitPolicy;
    /// Whether `rank`'s process is known to be gone (same host and process namespace, and no
    /// such process any more).
    fn process_gone(&self, rank: usize) -> bool;
}

/// A phase in flight: a FIFO plan, or a direct operation that may turn into one.
pub(crate) enum InFlight {
    /// Through the connections' FIFOs.
    Fifo(Execution),
    /// Over registered windows.
    Direct(Box<DirectOp>),
}

/// One communicator's running phase, with what the loop needs around it.
pub(crate) struct Driven<'a, L: Display> {
    /// The communicator.
    pub peers: &'a dyn PeerView,
    /// Its connections.
    pub conns: &'a mut Connections,
    /// The phase.
    pub run: InFlight,
    /// How the phase is named in errors (formatted only when one is reported).
    pub label: L,
    /// Where its progress is published.
    pub progress: &'a OpProgress,
}

impl InFlight {
    /// True when the phase finished.
    pub(crate) fn done(&self, conns: &Connections) -> bool {
        match self {
            InFlight::Fifo(ex) => ex.done(conns),
            InFlight::Direct(d) => d.done(),
        }
    }

    /// Moves the phase on; a direct operation that finds a rank on the FIFO plan becomes that
    /// plan.
    fn progress(
        &mut self,
        conns: &mut Connections,
        peers: &dyn PeerView,
        what: &dyn Display,
    ) -> Result<bool> {
        match self {
            InFlight::Fifo(ex) => ex.progress(conns).map_err(|f| {
                let notice = |r| peers.failure_notice(r);
                link_error(&what.to_string(), f, &|r| peers.describe(r), &notice)
            }),
            InFlight::Direct(d) => match d
                .progress()
                .map_err(|e| Error::Remote(format!("{what}: {e}")))?
            {
                Progress::Moved(m) => Ok(m),
                Progress::Fallback(f) => {
                    *self = InFlight::Fifo(Execution::new(f.ops, f.lanes, conns)?);
                    Ok(true)
                }
            },
        }
    }

    /// Orders the phase's stores (some may bypass the caches) before whatever follows.
    fn fence(&self) {
        match self {
            InFlight::Fifo(ex) => ex.fence(),
            InFlight::Direct(d) => d.fence(),
        }
    }

    /// Steps in all and done, and bytes moved, for [`OpProgress`].
    pub(crate) fn steps(&self) -> (u64, u64, u64) {
        match self {
            InFlight::Fifo(ex) => ex.steps(),
            InFlight::Direct(d) => {
                let (total, done) = d.steps();
                (total, done, d.bytes_done() as u64)
            }
        }
    }

    fn uses_memory(&self) -> bool {
        match self {
            InFlight::Fifo(ex) => ex.uses_memory(),
            InFlight::Direct(_) => true,
        }
    }

    /// Adds the counters of the links the phase cannot use now to `out`: FIFO connections, or
    /// for a direct phase the window reads of the rank it waits for.
    fn stalled(&self, conns: &mut Connections, out: &mut Vec<Arc<LinkCounters>>) {
        match self {
            InFlight::Fifo(ex) => ex.stalled(conns, out),
            InFlight::Direct(d) => out.extend(d.stalled_on()),
        }
    }

    fn poll_interest(&self, conns: &Connections) -> Vec<PollInterest> {
        match self {
            InFlight::Fifo(ex) => ex.poll_interest(conns),
            InFlight::Direct(_) => Vec::new(),
        }
    }

    /// An error when a rank this phase waits on is gone.
    fn liveness(
        &self,
        conns: &Connections,
        peers: &dyn PeerView,
        what: &dyn Display,
    ) -> Result<()> {
        match self {
            InFlight::Fifo(ex) => liveness(
                ex,
                conns,
                &|| what.to_string(),
                &|r| peers.describe(r),
                &|r| peers.failure_notice(r),
            ),
            InFlight::Direct(d) => match d.waiting_for() {
                Some((p, _)) if peers.process_gone(p) => Err(Error::Remote(format!(
                    "{what}: {} exited (process gone) during a direct collective",
                    peers.describe(p)
                ))),
                _ => Ok(()),
            },
        }
    }

    fn timeout(&self, what: &dyn Display, after: Duration, peers: &dyn PeerView) -> Error {
        match self {
            InFlight::Fifo(ex) => timeout(ex, &what.to_string(), after, &|r| peers.describe(r)),
            InFlight::Direct(d) => Error::Timeout {
                what: format!("{what} (direct, over windows)"),
                waited_for: d
                    .waiting_for()
                    .map(|(p, why)| format!("{} {why}", peers.describe(p)))
                    .unwrap_or_else(|| "nobody (a bug: please report it)".into()),
                after,
            },
        }
    }
}

/// Rounds that move nothing before a stall is timed and charged to the links it waits on
/// (`LinkCounters::stall_begin`, `stall_end`): shorter stalls, a few microseconds at most, go uncounted, which
/// keeps the clock and the link lookup off small operations' path (an 8-byte all-reduce
/// between two processes lost 5% to them).
const STALL_ROUNDS: u32 = 64;

/// Progresses every phase until all are done, or returns the first failure: a link error, a
/// peer found gone, an abort, or a stall past the shortest of the communicators' timeouts.
///
/// Errors: [`Error::Remote`] naming the peer and channel, [`Error::Aborted`],
/// [`Error::Timeout`] naming what each lane of the first unfinished phase waits for.
pub(crate) fn drive<L: Display>(phases: &mut [Driven<'_, L>]) -> Result<()> {
    let r = drive_until_done(phases);
    if r.is_err() {
        // A failed operation's buffers go back to the caller: no receive may land in them.
        for d in phases.iter_mut() {
            for link in &mut d.conns.recvs {
                link.conn.withdraw();
            }
        }
    }
    r
}

/// [`drive`]'s loop.
fn drive_until_done<L: Display>(phases: &mut [Driven<'_, L>]) -> Result<()> {
    let Some(policy) = phases
        .iter()
        .map(|d| d.peers.policy())
        .min_by_key(|p| p.timeout)
    else {
        return Ok(());
    };
    // With only sockets involved, spin briefly: past the spin phase the waiter blocks in
    // poll(2), and each spin costs system calls that return nothing.
    let tcp_only = phases.iter().all(|d| !d.run.uses_memory());
    let policy = if tcp_only {
        WaitPolicy {
            spins: policy.spins.min(64),
            ..policy
        }
    } else {
        policy
    };
    let mut waiter = Waiter::new(policy);
    // The stall in progress: when it was noticed (after STALL_ROUNDS rounds that moved
    // nothing, so the many short stalls of small operations cost nothing), and the links its
    // lanes could not use, which are charged its time when something moves again.
    let mut idle_rounds: u32 = 0;
    let mut stall: Option<Instant> = None;
    let mut stalled: Vec<Arc<LinkCounters>> = Vec::new();
    let charge = |stall: &mut Option<Instant>, stalled: &mut Vec<Arc<LinkCounters>>| {
        if let Some(t0) = stall.take() {
            let ns = t0.elapsed().as_nanos() as u64;
            for c in stalled.drain(..) {
                c.stall_end(ns);
            }
        }
    };
    loop {
        let mut moved = false;
        let mut all_done = true;
        for d in phases.iter_mut() {
            if d.run.done(d.conns) {
                continue;
            }
            all_done = false;
            let m = d.run.progress(d.conns, d.peers, &d.label)?;
            if m {
                let (total, done, bytes) = d.run.steps();
                d.progress.update(total, done, bytes);
            }
            moved |= m || d.run.done(d.conns);
        }
        if all_done {
            charge(&mut stall, &mut stalled);
            for d in phases.iter() {
                d.run.fence();
            }
            return Ok(());
        }
        if moved {
            charge(&mut stall, &mut stalled);
            idle_rounds = 0;
            waiter.reset();
            continue;
        }
        idle_rounds = idle_rounds.saturating_add(1);
        if idle_rounds == STALL_ROUNDS {
            stall = Some(Instant::now());
            for d in phases.iter_mut() {
                d.run.stalled(d.conns, &mut stalled);
            }
            let now = crate::stats::coarse_now_ns();
            for c in &stalled {
                c.stall_begin(now);
            }
        }
        if let Some(d) = phases.iter().find(|d| d.peers.aborted()) {
            return Err(Error::Aborted(format!(
                "{} interrupted: the communicator was aborted",
                d.label
            )));
        }
        let check = || -> Result<()> {
            for d in phases.iter() {
                d.run.liveness(d.conns, d.peers, &d.label)?;
            }
            Ok(())
        };
        let on_timeout = || match phases.iter().find(|d| !d.run.done(d.conns)) {
            Some(d) => d.run.timeout(&d.label, policy.timeout, d.peers),
            None => Error::Internal("a stall with every phase done".into()),
        };
        // Block in poll(2) on the sockets when every connection involved is TCP; memory FIFOs
        // can only be polled, so any of them keeps the waiter yielding instead.
        let block = |limit: Duration| -> bool {
            let mut interest = Vec::new();
            for d in phases.iter().filter(|d| !d.run.done(d.conns)) {
                if d.run.uses_memory() {
                    return false;
                }
                interest.extend(d.run.poll_interest(d.conns));
            }
            // SAFETY: the descriptors belong to sockets of connections `phases` borrows, which
            // stay open for this call.
            unsafe { block_on(&interest, limit) }
        };
        if let Err(e) = waiter.idle_or_block(check, on_timeout, block) {
            charge(&mut stall, &mut stalled);
            return Err(e);
        }
    }
}
