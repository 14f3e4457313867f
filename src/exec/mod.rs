//! Runs plans: moves each lane's steps forward slot by slot over the connections, applying the
//! reduction kernels, in the caller's thread (the CPU backend needs no proxy thread: sockets are
//! driven from the same loop, or by their helper threads).
//!
//! A step that both receives and sends handles one slot at a time — received slot in, reduced or
//! copied result straight into the next send slot — so data pipelines through the ring at slot
//! granularity. [`Execution::progress`] never blocks; the communicator's group runner loops it
//! with a [`Waiter`].

pub mod conns;
pub mod direct;
pub mod slot_stores;
mod wait;

pub use conns::Connections;
pub use slot_stores::SlotStores;
pub use wait::{WaitPolicy, Waiter, block_on, spin_cores};

use std::sync::Arc;

use crate::coll::{Buf, Kind, LaneKey, Loc, Plan, Step};
use crate::device::cpu::reduce::{ReduceSpec, Transforms, copy, reduce, reduce_with};
use crate::device::cpu::stream::{Streams, copy_streaming, fence};
use crate::error::{Error, Result};
use crate::transport::SendConn;
use crate::transport::fifo::PeerState;
use crate::transport::setup::ConnKey;

/// The buffers of one operation, as raw pointers with their lengths.
pub struct OpBuffers {
    /// The send buffer (may equal a region of `output` for in-place operations).
    pub input: *const u8,
    /// Bytes valid at `input`.
    pub input_len: usize,
    /// The receive buffer.
    pub output: *mut u8,
    /// Bytes valid at `output`.
    pub output_len: usize,
    /// Plan-owned scratch memory.
    pub scratch: Vec<u8>,
    /// The reduction the operation applies.
    pub spec: ReduceSpec,
    /// Read the input from a copy taken when the execution starts (the input overlaps memory
    /// the same phase writes: in-place AlltoAll, a Send from a buffer a Recv fills).
    pub snapshot_input: bool,
    /// The snapshot, when taken.
    pub snapshot: Vec<u8>,
    /// Write the output with streaming stores (large outputs; see
    /// [`crate::device::cpu::stream`]).
    pub stream_output: bool,
    /// Write memory-FIFO send slots with streaming stores (as [`SlotStores`] chooses; see
    /// [`Streams`]).
    pub stream_slots: bool,
}

impl OpBuffers {
    fn src(&self, loc: Loc, bytes: usize) -> Result<*const u8> {
        let (base, len) = match loc.buf {
            Buf::Input => (self.input, self.input_len),
            Buf::Output => (self.output.cast_const(), self.output_len),
            Buf::Scratch => (self.scratch.as_ptr(), self.scratch.len()),
        };
        check(loc, bytes, len)?;
        // SAFETY: bounds checked above.
        Ok(unsafe { base.add(loc.off) })
    }

    fn dst(&mut self, loc: Loc, bytes: usize) -> Result<*mut u8> {
        let (base, len) = match loc.buf {
            Buf::Input => return Err(Error::Internal("a plan writes into the send buffer".into())),
            Buf::Output => (self.output, self.output_len),
            Buf::Scratch => (self.scratch.as_mut_ptr(), self.scratch.len()),
        };
        check(loc, bytes, len)?;
        // SAFETY: bounds checked above.
        Ok(unsafe { base.add(loc.off) })
    }
}

fn check(loc: Loc, bytes: usize, len: usize) -> Result<()> {
    if loc.off.checked_add(bytes).is_none_or(|end| end > len) {
        return Err(Error::Internal(format!(
            "plan step reaches {:?}+{bytes} past a {len}-byte buffer",
            loc
        )));
    }
    Ok(())
}

/// Part of an execution lane: lane `lane` of a (shared, cached) plan, whose steps belong to
/// operation `op` of the execution. A lane runs its segments one after another.
#[derive(Debug, Clone)]
pub struct Segment {
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

struct Lane {
    key: LaneKey,
    segs: Vec<Segment>,
    seg: usize,
    cur: usize,
    sent: usize,
    got: usize,
    send: Option<usize>,
    recv: Option<usize>,
}

impl Lane {
    /// The current step and its operation.
    fn current(&self) -> Option<(usize, Step)> {
        let seg = self.segs.get(self.seg)?;
        seg.steps().get(self.cur).map(|s| (seg.op, *s))
    }

    fn next_step(&mut self) {
        self.cur += 1;
        if self.cur == self.segs[self.seg].steps().len() {
            self.seg += 1;
            self.cur = 0;
        }
        self.sent = 0;
        self.got = 0;
    }

    fn finished(&self) -> bool {
        self.seg >= self.segs.len()
    }
}

/// Where a lane is stuck, for timeout and failure messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked {
    /// The connection.
    pub key: ConnKey,
    /// True when waiting to receive, false when waiting for send slots.
    pub receiving: bool,
}

/// A failure of one connection during execution.
#[derive(Debug)]
pub struct LinkFailure {
    /// The connection.
    pub key: ConnKey,
    /// What happened.
    pub message: String,
}

/// One or more operations in flight on one communicator.
pub struct Execution {
    ops: Vec<OpBuffers>,
    lanes: Vec<Lane>,
    sends: Vec<usize>,
    recvs: Vec<usize>,
}

// SAFETY: the raw pointers refer to buffers the caller lends for the execution's lifetime; the
// execution is driven by one thread at a time.
unsafe impl Send for Execution {}

impl Execution {
    /// Prepares lanes over existing connections.
    ///
    /// Errors: [`Error::Internal`] when a step names a connection that was not set up.
    pub fn new(
        ops: Vec<OpBuffers>,
        lanes: Vec<(LaneKey, Vec<Segment>)>,
        conns: &Connections,
    ) -> Result<Execution> {
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        for seg in lanes.iter().flat_map(|(_, s)| s) {
            for k in &seg.plan.send_keys {
                let i = conns
                    .send_idx(k)
                    .ok_or_else(|| Error::Internal(format!("no send connection for {k:?}")))?;
                sends.push(i);
            }
            for k in &seg.plan.recv_keys {
                let i = conns
                    .recv_idx(k)
                    .ok_or_else(|| Error::Internal(format!("no receive connection for {k:?}")))?;
                recvs.push(i);
            }
        }
        sends.sort_unstable();
        sends.dedup();
        recvs.sort_unstable();
        recvs.dedup();
        let mut ops = ops;
        for op in ops
            .iter_mut()
            .filter(|o| o.snapshot_input && o.input_len > 0)
        {
            // SAFETY: the caller lends `input_len` readable bytes at `input`.
            op.snapshot = unsafe { std::slice::from_raw_parts(op.input, op.input_len) }.to_vec();
            op.input = op.snapshot.as_ptr();
        }
        let lanes = lanes
            .into_iter()
            .map(|(key, segs)| Lane {
                key,
                segs: segs.into_iter().filter(|s| !s.steps().is_empty()).collect(),
                seg: 0,
                cur: 0,
                sent: 0,
                got: 0,
                send: None,
                recv: None,
            })
            .filter(|l| !l.segs.is_empty())
            .collect();
        Ok(Execution {
            ops,
            lanes,
            sends,
            recvs,
        })
    }

    /// True when every lane finished and every byte sent has left this process.
    pub fn done(&self, conns: &Connections) -> bool {
        self.lanes.iter().all(Lane::finished)
            && self.sends.iter().all(|&i| !conns.sends[i].conn.pending())
    }

    /// Moves every lane as far as it can without waiting. Returns whether anything moved.
    ///
    /// Errors: [`LinkFailure`] naming the connection whose transport failed, or a plan error
    /// (as an [`Error`] inside the message) when a peer sent a slot of an unexpected size.
    pub fn progress(&mut self, conns: &mut Connections) -> Result<bool, LinkFailure> {
        let mut moved = false;
        for &i in &self.sends {
            let s = &mut conns.sends[i];
            moved |= s.conn.progress().map_err(|message| LinkFailure {
                key: s.link.key,
                message,
            })?;
        }
        for &i in &self.recvs {
            let r = &mut conns.recvs[i];
            moved |= r.conn.progress().map_err(|message| LinkFailure {
                key: r.link.key,
                message,
            })?;
        }
        for lane in &mut self.lanes {
            moved |= advance(lane, &mut self.ops, conns)?;
        }
        Ok(moved)
    }

    /// Sockets this execution's inline TCP connections wait on (see
    /// [`Waiter::idle_or_block`]); empty when only memory FIFOs are involved, which cannot be
    /// waited on in the kernel.
    pub fn poll_interest(
        &self,
        conns: &Connections,
    ) -> Vec<(std::os::fd::RawFd, nix::poll::PollFlags)> {
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
    pub fn uses_memory(&self, conns: &Connections) -> bool {
        self.sends
            .iter()
            .any(|&i| matches!(conns.sends[i].conn, crate::transport::SendConn::Mem(_)))
            || self
                .recvs
                .iter()
                .any(|&i| matches!(conns.recvs[i].conn, crate::transport::RecvConn::Mem(_)))
    }

    /// The connections lanes are currently waiting on.
    pub fn blocked(&self) -> Vec<Blocked> {
        let mut out = Vec::new();
        for l in &self.lanes {
            let Some((_, s)) = l.current() else {
                continue;
            };
            if let Some(k) = s.recv {
                out.push(Blocked {
                    key: k,
                    receiving: true,
                });
            }
            if let Some(k) = s.send {
                out.push(Blocked {
                    key: k,
                    receiving: false,
                });
            }
        }
        out
    }

    /// Checks the far ends of the connections lanes wait on; returns the first that is gone.
    pub fn dead_peer(&self, conns: &Connections) -> Option<(ConnKey, PeerState)> {
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

    /// Lane keys still running (for messages).
    pub fn running_lanes(&self) -> Vec<LaneKey> {
        self.lanes
            .iter()
            .filter(|l| !l.finished())
            .map(|l| l.key)
            .collect()
    }
}

fn plan_err(key: ConnKey, e: Error) -> LinkFailure {
    LinkFailure {
        key,
        message: e.to_string(),
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
        if lane.sent == 0 && lane.got == 0 {
            lane.send = step.send.and_then(|k| conns.send_idx(&k));
            lane.recv = step.recv.and_then(|k| conns.recv_idx(&k));
        }
        let key = step.send.or(step.recv).unwrap_or(ConnKey {
            peer: usize::MAX,
            channel: 0,
            index: 0,
        });
        let before = (lane.sent, lane.got);
        let complete = run_step(lane, &step, &mut ops[op], conns).map_err(|e| plan_err(key, e))?;
        if complete || (lane.sent, lane.got) != before {
            moved = true;
        }
        if !complete {
            return Ok(moved);
        }
        lane.next_step();
    }
    Ok(moved)
}

/// Checks that a received slot holds the bytes the plan expects.
fn expect_size(got: usize, want: usize, key: Option<ConnKey>) -> Result<()> {
    if got != want {
        let peer = key
            .map(|k| format!("rank {} on channel {}", k.peer, k.channel))
            .unwrap_or_default();
        return Err(Error::Remote(format!(
            "{peer} sent a {got}-byte slot where {want} bytes were expected: do all ranks call the same collectives \
             in the same order with the same count, datatype and root?"
        )));
    }
    Ok(())
}

/// Runs as much of `step` as the connections allow. Returns true when the step is complete.
fn run_step(
    lane: &mut Lane,
    step: &Step,
    op: &mut OpBuffers,
    conns: &mut Connections,
) -> Result<bool> {
    let spec = op.spec;
    let pre = Transforms {
        pre: step.pre,
        post: false,
    };
    let both = Transforms {
        pre: step.pre,
        post: step.post,
    };
    let esize = spec.dtype.size();
    let out = op.stream_output;
    // Large operations write the output, and the slots of memory FIFOs, with streaming stores;
    // a streamed slot is fenced before it is posted.
    let put = |d0: *mut u8, d1: Option<*mut u8>, src: *const u8, t: Transforms, n: usize, s| {
        // SAFETY: callers pass bounds-checked ranges that equal or do not overlap each other.
        unsafe { copy_streaming(&spec, t, d0, d1, src, n, s) }
    };
    let slot_nt = op.stream_slots
        && lane
            .send
            .is_some_and(|i| matches!(conns.sends[i].conn, SendConn::Mem(_)));
    match step.kind {
        Kind::Copy => {
            let src = op.src(step.src.expect("copy src"), step.bytes)?;
            let dst = op.dst(step.dst.expect("copy dst"), step.bytes)?;
            let s = Streams { d0: out, d1: false };
            put(dst, None, src, both, step.bytes / esize, s);
            Ok(true)
        }
        Kind::Send | Kind::CopySend => {
            let s = &mut conns.sends[lane.send.expect("send conn")];
            while lane.sent < step.bytes {
                let Some(slot) = s.conn.acquire() else {
                    return Ok(false);
                };
                let n = s.conn.slot_bytes().min(step.bytes - lane.sent);
                let src = op.src(offset(step.src.expect("send src"), lane.sent), n)?;
                let extra = match step.kind {
                    Kind::CopySend => {
                        Some(op.dst(offset(step.dst.expect("copy-send dst"), lane.sent), n)?)
                    }
                    _ => None,
                };
                // The slot is the first destination unless the step also copies to the output.
                let (d0, d1, streams) = match extra {
                    Some(dst) => (
                        dst,
                        Some(slot),
                        Streams {
                            d0: out,
                            d1: slot_nt,
                        },
                    ),
                    None => (
                        slot,
                        None,
                        Streams {
                            d0: slot_nt,
                            d1: false,
                        },
                    ),
                };
                put(d0, d1, src, pre, n / esize, streams);
                if slot_nt {
                    fence();
                }
                s.conn.post(n);
                s.link.counters.add(n);
                lane.sent += n;
            }
            Ok(true)
        }
        Kind::Recv => {
            let r = &mut conns.recvs[lane.recv.expect("recv conn")];
            while lane.got < step.bytes {
                let Some((p, n)) = r.conn.peek() else {
                    return Ok(false);
                };
                expect_size(n, r.conn.slot_bytes().min(step.bytes - lane.got), step.recv)?;
                let dst = op.dst(offset(step.dst.expect("recv dst"), lane.got), n)?;
                let s = Streams { d0: out, d1: false };
                put(dst, None, p, Transforms::default(), n / esize, s);
                r.conn.release();
                r.link.counters.add(n);
                lane.got += n;
            }
            Ok(true)
        }
        Kind::RecvCopySend
        | Kind::RecvReduceSend
        | Kind::RecvReduceCopySend
        | Kind::RecvReduceCopy => {
            let sends = step.kind != Kind::RecvReduceCopy;
            while lane.got < step.bytes {
                let r = &mut conns.recvs[lane.recv.expect("recv conn")];
                let Some((p, n)) = r.conn.peek() else {
                    return Ok(false);
                };
                expect_size(n, r.conn.slot_bytes().min(step.bytes - lane.got), step.recv)?;
                let slot = if sends {
                    let s = &mut conns.sends[lane.send.expect("send conn")];
                    let Some(slot) = s.conn.acquire() else {
                        return Ok(false);
                    };
                    Some(slot)
                } else {
                    None
                };
                let count = n / esize;
                // SAFETY (all arms): the received slot holds n bytes, the send slot at least n,
                // local ranges are bounds-checked by src()/dst().
                match step.kind {
                    Kind::RecvCopySend => {
                        let dst = op.dst(offset(step.dst.expect("dst"), lane.got), n)?;
                        let s = Streams {
                            d0: out,
                            d1: slot_nt,
                        };
                        put(dst, slot, p, Transforms::default(), count, s);
                    }
                    Kind::RecvReduceSend => {
                        let src = op.src(offset(step.src.expect("src"), lane.got), n)?;
                        let (d, s) = (
                            slot.expect("slot"),
                            Streams {
                                d0: slot_nt,
                                d1: false,
                            },
                        );
                        unsafe { reduce_with(&spec, pre, d, None, p, src, count, s) };
                    }
                    _ => {
                        let src = op.src(offset(step.src.expect("src"), lane.got), n)?;
                        let dst = op.dst(offset(step.dst.expect("dst"), lane.got), n)?;
                        let s = Streams {
                            d0: out,
                            d1: slot_nt,
                        };
                        unsafe { reduce_with(&spec, both, dst, slot, p, src, count, s) };
                    }
                }
                let r = &mut conns.recvs[lane.recv.expect("recv conn")];
                r.conn.release();
                r.link.counters.add(n);
                if sends {
                    if slot_nt {
                        fence();
                    }
                    let s = &mut conns.sends[lane.send.expect("send conn")];
                    s.conn.post(n);
                    s.link.counters.add(n);
                }
                lane.got += n;
            }
            Ok(true)
        }
        Kind::Exchange => {
            let dst_loc = step.dst.expect("exchange buffer");
            {
                let s = &mut conns.sends[lane.send.expect("send conn")];
                while lane.sent < step.bytes {
                    let Some(slot) = s.conn.acquire() else { break };
                    let n = s.conn.slot_bytes().min(step.bytes - lane.sent);
                    let src = op.src(offset(dst_loc, lane.sent), n)?;
                    // SAFETY: slot holds at least n bytes; source bounds-checked.
                    unsafe { copy(&spec, Transforms::default(), slot, None, src, n / esize) };
                    s.conn.post(n);
                    s.link.counters.add(n);
                    lane.sent += n;
                }
            }
            let r = &mut conns.recvs[lane.recv.expect("recv conn")];
            while lane.got < lane.sent {
                let Some((p, n)) = r.conn.peek() else { break };
                expect_size(n, r.conn.slot_bytes().min(step.bytes - lane.got), step.recv)?;
                let d = op.dst(offset(dst_loc, lane.got), n)?;
                // SAFETY: d was sent already (got < sent) so overwriting it is safe; slot holds n.
                unsafe { reduce(&spec, Transforms::default(), d, None, d, p, n / esize) };
                r.conn.release();
                r.link.counters.add(n);
                lane.got += n;
            }
            Ok(lane.got == step.bytes)
        }
    }
}

fn offset(loc: Loc, by: usize) -> Loc {
    Loc {
        buf: loc.buf,
        off: loc.off + by,
    }
}

/// The error for a failed link.
///
/// `notice` gives what a peer reported when it gave up, appended as the root cause.
pub fn link_error(
    what: &str,
    f: &LinkFailure,
    describe: &dyn Fn(usize) -> String,
    notice: &dyn Fn(usize) -> Option<String>,
) -> Error {
    if f.key.peer == usize::MAX {
        return Error::Internal(format!("{what}: {}", f.message));
    }
    Error::Remote(format!(
        "{what} failed on channel {} with {}: {}{}",
        f.key.channel,
        describe(f.key.peer),
        f.message,
        reported(notice(f.key.peer))
    ))
}

fn reported(notice: Option<String>) -> String {
    notice
        .map(|n| format!("; it reported: {n}"))
        .unwrap_or_default()
}

/// A peer found gone or dead, as an error.
///
/// `notice` gives what a peer reported when it gave up, appended as the root cause.
pub fn liveness(
    exec: &Execution,
    conns: &Connections,
    what: &dyn Fn() -> String,
    describe: &dyn Fn(usize) -> String,
    notice: &dyn Fn(usize) -> Option<String>,
) -> Result<()> {
    match exec.dead_peer(conns) {
        Some((key, PeerState::Dead)) => Err(Error::Remote(format!(
            "{}: {} exited (process gone) while this rank waited on channel {}{}",
            what(),
            describe(key.peer),
            key.channel,
            reported(notice(key.peer))
        ))),
        Some((key, _)) => Err(Error::Remote(format!(
            "{}: {} went away (closed its connection or dropped its communicator) on channel {}{}",
            what(),
            describe(key.peer),
            key.channel,
            reported(notice(key.peer))
        ))),
        None => Ok(()),
    }
}

/// The timeout error for `exec`, naming what each lane waits for.
pub fn timeout(
    exec: &Execution,
    what: &str,
    after: std::time::Duration,
    describe: &dyn Fn(usize) -> String,
) -> Error {
    let mut waits: Vec<String> = exec
        .blocked()
        .iter()
        .map(|b| {
            format!(
                "{} {} on channel {}",
                if b.receiving {
                    "data from"
                } else {
                    "send space to"
                },
                describe(b.key.peer),
                b.key.channel
            )
        })
        .collect();
    waits.dedup();
    Error::Timeout {
        what: what.to_string(),
        waited_for: waits.join("; "),
        after,
    }
}

#[cfg(test)]
mod tests;
