//! [`Execution`]: one or more operations in flight on one communicator, as lanes of plan
//! segments moved forward step by step over the connections.

use std::sync::Arc;

use super::buffers::OpBuffers;
use super::conns::Connections;
use super::failure::{Blocked, LinkFailure};
use super::step::run_step;
use crate::coll::{LaneKey, Plan, Step};
use crate::conn::ConnKey;
use crate::device::{Backend, MemKind};
use crate::error::{Error, Result};
use crate::stats::LinkCounters;
use crate::transport::{PeerState, PollInterest};

/// Part of an execution lane: lane `lane` of a (shared, cached) plan, whose steps belong to
/// operation `op` of the execution. A lane runs its segments one after another.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// Index into the execution's operations.
    pub op: usize,
    /// The plan.
    pub plan: Arc<Plan>,
    /// Which of the plan's lanes.
    pub lane: usize,
}

impl Segment {
    fn steps(&self) -> &[Step] {
        &self.plan.lanes[self.lane].1
    }
}

/// A lane's position: which segment and step, and how many bytes of the step were sent and
/// received so far.
pub(super) struct Lane {
    segs: Vec<Segment>,
    seg: usize,
    cur: usize,
    /// Bytes of the current step sent.
    pub(super) sent: usize,
    /// Bytes of the current step received.
    pub(super) got: usize,
    /// Bytes of the current step its receiving end was asked to land in place
    /// ([`crate::transport::RecvEnd::receive_into`]).
    pub(super) offered: usize,
    /// The current step's connections as indices into the [`Connections`], once resolved.
    pub(super) ends: Option<Ends>,
    /// Steps finished.
    steps_done: u64,
    /// Bytes of the steps finished.
    bytes_done: u64,
}

impl Lane {
    /// The current step and its operation.
    fn current(&self) -> Option<(usize, Step)> {
        let seg = self.segs.get(self.seg)?;
        seg.steps().get(self.cur).map(|s| (seg.op, *s))
    }

    fn next_step(&mut self, bytes: usize) {
        self.steps_done += 1;
        self.bytes_done += bytes as u64;
        self.cur += 1;
        if self.cur == self.segs[self.seg].steps().len() {
            self.seg += 1;
            self.cur = 0;
        }
        self.sent = 0;
        self.got = 0;
        self.offered = 0;
        self.ends = None;
    }

    fn finished(&self) -> bool {
        self.seg >= self.segs.len()
    }
}

/// One or more operations in flight on one communicator.
pub(crate) struct Execution {
    ops: Vec<OpBuffers>,
    lanes: Vec<Lane>,
    /// Sending and receiving ends whose I/O the caller's loop drives (sockets without helper
    /// threads need it; memory FIFOs never do, so their ends are not polled).
    sends: Vec<usize>,
    recvs: Vec<usize>,
    /// Whether some end is a memory FIFO (which only polling sees).
    in_memory: bool,
    steps_total: u64,
}

impl Execution {
    /// Prepares lanes over existing connections; takes the input snapshots the operations ask
    /// for.
    ///
    /// Errors: [`Error::Internal`] when a plan names a connection that was not set up.
    pub(crate) fn new(
        ops: Vec<OpBuffers>,
        lanes: Vec<(LaneKey, Vec<Segment>)>,
        conns: &Connections,
    ) -> Result<Execution> {
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        let mut in_memory = false;
        for seg in lanes.iter().flat_map(|(_, s)| s) {
            if seg.op >= ops.len() || seg.lane >= seg.plan.lanes.len() {
                return Err(Error::Internal(format!(
                    "a segment names operation {} lane {} of {} operations",
                    seg.op,
                    seg.lane,
                    ops.len()
                )));
            }
            // The kernels that fill and drain a connection's slots must reach their memory.
            // Only ends the caller's loop must drive (sockets) are kept: memory FIFOs never
            // need it, so the common case allocates nothing here.
            let backend = ops[seg.op].backend;
            for k in &seg.plan.send_keys {
                let i = conns.send_idx(k).ok_or_else(|| missing("send", k))?;
                let conn = &conns.sends[i].conn;
                unreachable_slots(backend, conn.slot_kind(), k)?;
                if conn.in_memory() {
                    in_memory = true;
                } else {
                    sends.push(i);
                }
            }
            for k in &seg.plan.recv_keys {
                let i = conns.recv_idx(k).ok_or_else(|| missing("receive", k))?;
                let conn = &conns.recvs[i].conn;
                unreachable_slots(backend, conn.slot_kind(), k)?;
                if conn.in_memory() {
                    in_memory = true;
                } else {
                    recvs.push(i);
                }
            }
        }
        sends.sort_unstable();
        sends.dedup();
        recvs.sort_unstable();
        recvs.dedup();
        let mut ops = ops;
        for op in &mut ops {
            op.take_snapshot();
        }
        let lanes = lanes
            .into_iter()
            .map(|(_, segs)| Lane {
                segs: segs.into_iter().filter(|s| !s.steps().is_empty()).collect(),
                seg: 0,
                cur: 0,
                sent: 0,
                got: 0,
                offered: 0,
                ends: None,
                steps_done: 0,
                bytes_done: 0,
            })
            .filter(|l| !l.segs.is_empty())
            .collect::<Vec<_>>();
        let steps_total = lanes
            .iter()
            .flat_map(|l| &l.segs)
            .map(|s| s.steps().len() as u64)
            .sum();
        Ok(Execution {
            ops,
            lanes,
            sends,
            recvs,
            in_memory,
            steps_total,
        })
    }

    /// True when every lane finished and every byte sent has left this process.
    #[inline]
    pub(crate) fn done(&self, conns: &Connections) -> bool {
        self.lanes.iter().all(Lane::finished)
            && self.sends.iter().all(|&i| !conns.sends[i].conn.pending())
    }

    /// Orders every store the operations' kernels issued before whatever follows.
    pub(crate) fn fence(&self) {
        for op in &self.ops {
            op.backend.fence();
        }
    }

    /// Steps in all, steps finished, and bytes moved so far (finished steps, plus the larger
    /// of what the current steps sent and received).
    pub(crate) fn steps(&self) -> (u64, u64, u64) {
        let done = self.lanes.iter().map(|l| l.steps_done).sum();
        let bytes = self
            .lanes
            .iter()
            .map(|l| l.bytes_done + l.sent.max(l.got) as u64)
            .sum();
        (self.steps_total, done, bytes)
    }

    /// Moves every lane as far as it can without waiting. Returns whether anything moved.
    ///
    /// The order keeps system calls off a small operation's path: lanes first (a new
    /// operation posts its sends), then the sockets' writes (the posted frames leave now, not a
    /// round later), then their reads, and when a read brought something, the lanes and the
    /// writes again (what arrived is consumed and what it lets go out leaves in the same round).
    /// An 8-byte all-reduce over TCP so goes `sendmsg`, `recv` until the peer's frame is in,
    /// with no read that returns nothing between the frame's arrival and the next `sendmsg`.
    ///
    /// Errors: [`LinkFailure`] naming the connection whose transport failed or whose peer sent
    /// a slot the plan did not expect.
    #[inline]
    pub(crate) fn progress(&mut self, conns: &mut Connections) -> Result<bool, LinkFailure> {
        let mut moved = self.advance_lanes(conns)?;
        moved |= self.progress_sends(conns)?;
        let mut received = false;
        for &i in &self.recvs {
            let r = &mut conns.recvs[i];
            received |= r
                .conn
                .progress()
                .map_err(|e| LinkFailure::transport(r.key, e))?;
        }
        if received && self.advance_lanes(conns)? {
            self.progress_sends(conns)?;
        }
        Ok(moved | received)
    }

    /// Advances every lane; returns whether one moved.
    fn advance_lanes(&mut self, conns: &mut Connections) -> Result<bool, LinkFailure> {
        let mut moved = false;
        for lane in &mut self.lanes {
            moved |= advance(lane, &mut self.ops, conns)?;
        }
        Ok(moved)
    }

    /// Drives the sending ends the caller's loop drives; returns whether one moved.
    fn progress_sends(&mut self, conns: &mut Connections) -> Result<bool, LinkFailure> {
        let mut moved = false;
        for &i in &self.sends {
            let s = &mut conns.sends[i];
            moved |= s
                .conn
                .progress()
                .map_err(|e| LinkFailure::transport(s.key, e))?;
        }
        Ok(moved)
    }

    /// Sockets this execution's inline TCP connections wait on (see
    /// [`super::Waiter::idle_or_block`]); empty when only memory FIFOs are involved, which cannot
    /// be waited on in the kernel.
    pub(crate) fn poll_interest(&self, conns: &Connections) -> Vec<PollInterest> {
        let mut out = Vec::new();
        for &i in &self.sends {
            out.extend(conns.sends[i].conn.poll_interest());
        }
        for &i in &self.recvs {
            out.extend(conns.recvs[i].conn.poll_interest());
        }
        out
    }

    /// True when some connection of this execution is a memory FIFO (which only polling sees).
    pub(crate) fn uses_memory(&self) -> bool {
        self.in_memory
    }

    /// The connections lanes are currently waiting on.
    pub(crate) fn blocked(&self) -> Vec<Blocked> {
        let mut out = Vec::new();
        for (_, s) in self.lanes.iter().filter_map(Lane::current) {
            if let Some(key) = s.recv_key() {
                out.push(Blocked {
                    key,
                    receiving: true,
                });
            }
            if let Some(key) = s.send_key() {
                out.push(Blocked {
                    key,
                    receiving: false,
                });
            }
        }
        out
    }

    /// Adds to `out` the counters of the connections lanes cannot use now: a receive with no
    /// data, a send with no free slot (a stalled round charges its time to them).
    pub(crate) fn stalled(&self, conns: &mut Connections, out: &mut Vec<Arc<LinkCounters>>) {
        for b in self.blocked() {
            if b.receiving {
                if let Some(i) = conns.recv_idx(&b.key)
                    && conns.recvs[i].conn.peek().is_none()
                {
                    out.push(conns.recvs[i].counters.clone());
                }
            } else if let Some(i) = conns.send_idx(&b.key)
                && conns.sends[i].conn.acquire().is_none()
            {
                out.push(conns.sends[i].counters.clone());
            }
        }
    }

    /// Checks the far ends of the connections lanes wait on; returns the first that is gone.
    pub(crate) fn dead_peer(&self, conns: &Connections) -> Option<(ConnKey, PeerState)> {
        for b in self.blocked() {
            let state = if b.receiving {
                conns
                    .recv_idx(&b.key)
                    .map(|i| conns.recvs[i].conn.peer_state())
            } else {
                conns
                    .send_idx(&b.key)
                    .map(|i| conns.sends[i].conn.peer_state())
            };
            if let Some(s @ (PeerState::Gone | PeerState::Dead)) = state {
                return Some((b.key, s));
            }
        }
        None
    }
}

fn unreachable_slots(backend: &dyn Backend, kind: MemKind, k: &ConnKey) -> Result<()> {
    if backend.accepts(kind) {
        return Ok(());
    }
    Err(Error::invalid_usage(format!(
        "the connection to rank {} on channel {} keeps its slots in {kind:?} memory, which the \
         operation's kernels cannot reach",
        k.peer, k.channel
    )))
}

fn missing(what: &str, k: &ConnKey) -> Error {
    Error::Internal(format!("no {what} connection for {k:?}"))
}

/// Where a step's connections sit in the [`Connections`] (resolved once per step, not per
/// poll).
#[derive(Debug, Clone, Copy)]
pub(super) struct Ends {
    /// The sending end, when the step sends.
    pub send: Option<usize>,
    /// The receiving end, when the step receives.
    pub recv: Option<usize>,
}

impl Ends {
    fn resolve(step: &Step, conns: &Connections) -> Result<Ends> {
        let send = match step.send_key() {
            Some(k) => Some(conns.send_idx(&k).ok_or_else(|| missing("send", &k))?),
            None => None,
        };
        let recv = match step.recv_key() {
            Some(k) => Some(conns.recv_idx(&k).ok_or_else(|| missing("receive", &k))?),
            None => None,
        };
        Ok(Ends { send, recv })
    }
}

/// Advances one lane. Returns whether it moved.
fn advance(
    lane: &mut Lane,
    ops: &mut [OpBuffers],
    conns: &mut Connections,
) -> Result<bool, LinkFailure> {
    let mut moved = false;
    while let Some((op, step)) = lane.current() {
        let key = || step.send_key().or(step.recv_key());
        let ends = match lane.ends {
            Some(e) => e,
            None => {
                let e = Ends::resolve(&step, conns).map_err(|e| LinkFailure::plan(key(), e))?;
                lane.ends = Some(e);
                e
            }
        };
        let before = (lane.sent, lane.got);
        let complete = run_step(lane, &step, ends, &mut ops[op], conns)
            .map_err(|e| LinkFailure::plan(key(), e))?;
        if complete || (lane.sent, lane.got) != before {
            moved = true;
        }
        if !complete {
            return Ok(moved);
        }
        lane.next_step(step.bytes);
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::{Algo, LaneKey, Loc, Op};
    use crate::device::{ReduceSpec, Region};
    use crate::dtype::DataType;
    use crate::stats::CommStats;
    use crate::transport::TransportKind;
    use crate::transport::tcp::{Slots, testing::ends};

    /// A send over a socket the caller's loop drives leaves in the progress call that posts it: a
    /// small operation does not wait a round (and a read that finds nothing) for its `sendmsg`.
    #[test]
    fn a_posted_send_leaves_in_the_same_progress_call() {
        let slot = 4096;
        let key = ConnKey::collective(1, 0);
        let stats = CommStats::new();
        let mut c0 = Connections::default();
        let mut c1 = Connections::default();
        let (tx, rx) = ends(2, slot, Slots::owned(), Slots::owned(), "rank 1", "rank 0");
        c0.add_send(key, Box::new(tx), TransportKind::Tcp, &stats);
        c1.add_recv(
            ConnKey { peer: 0, ..key },
            Box::new(rx),
            TransportKind::Tcp,
            &stats,
        );
        let data = [5u8; 8];
        let step = Step::new(
            Op::Send {
                src: Loc::input(0),
                to: key,
            },
            data.len(),
        );
        let plan = Plan::new(vec![(LaneKey::Channel(0), vec![step])], 0, Algo::Direct);
        // SAFETY: `data` outlives the execution and is only read.
        let ops = unsafe {
            OpBuffers::new(
                Region::host(data.as_ptr().cast_mut(), data.len()),
                Region::host(std::ptr::null_mut(), 0),
                0,
                ReduceSpec::copy(DataType::Uint8),
            )
        }
        .unwrap();
        let seg = Segment {
            op: 0,
            plan: Arc::new(plan),
            lane: 0,
        };
        let mut ex =
            Execution::new(vec![ops], vec![(LaneKey::Channel(0), vec![seg])], &c0).unwrap();
        assert!(ex.progress(&mut c0).unwrap());
        // Only the receiver moves from here on: the frame must already be in the kernel.
        let recv = &mut c1.recvs[0].conn;
        let start = std::time::Instant::now();
        while recv.peek().is_none() {
            recv.progress().unwrap();
            assert!(
                start.elapsed().as_secs() < 5,
                "the frame did not leave in the progress call that posted it"
            );
        }
        let (at, n) = recv.peek().unwrap();
        // SAFETY: the arrived slot holds `n` bytes until it is released.
        assert_eq!(unsafe { std::slice::from_raw_parts(at, n) }, &data);
    }
}
