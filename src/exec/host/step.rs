//! Running one step of a lane as far as the connections allow.
//!
//! A step that both receives and sends handles one slot at a time — received slot in, reduced or
//! copied result straight into the next send slot — so data pipelines through the ring at slot
//! granularity. Every kernel call goes through the operation's [`crate::device::Backend`].

use super::buffers::OpBuffers;
use super::conns::{Connections, RecvLink, SendLink};
use super::execution::{Ends, Lane};
use crate::coll::{Loc, Op, Step};
use crate::conn::{ConnKey, NSLOTS};
use crate::device::{Streams, Transforms};
use crate::error::{Error, Result};

/// Checks that a received slot holds the bytes the plan expects.
fn expect_size(got: usize, want: usize, key: ConnKey) -> Result<()> {
    if got != want {
        return Err(Error::Remote(format!(
            "rank {} on channel {} sent a {got}-byte slot where {want} bytes were expected: do \
             all ranks call the same collectives in the same order with the same count, \
             datatype and root?",
            key.peer, key.channel
        )));
    }
    Ok(())
}

fn unresolved(what: &str) -> Error {
    Error::Internal(format!("a step's {what} connection was not resolved"))
}

fn sender(conns: &mut Connections, i: Option<usize>) -> Result<&mut SendLink> {
    i.and_then(|i| conns.sends.get_mut(i))
        .ok_or_else(|| unresolved("send"))
}

fn receiver(conns: &mut Connections, i: Option<usize>) -> Result<&mut RecvLink> {
    i.and_then(|i| conns.recvs.get_mut(i))
        .ok_or_else(|| unresolved("receive"))
}

/// What a step that receives does with each received slot.
#[derive(Clone, Copy)]
enum OnRecv {
    /// Copy it to `dst` (and into the send slot when forwarding).
    Copy { dst: Loc },
    /// Combine it with `src` into the send slot.
    Reduce { src: Loc },
    /// Combine it with `src` into `dst` (and into the send slot when forwarding).
    ReduceCopy { src: Loc, dst: Loc },
}

/// Runs as much of `step` as the connections allow. Returns true when the step is complete.
///
/// Errors: [`Error::Remote`] when a peer's slot has an unexpected size; [`Error::Internal`]
/// when the plan reaches past a buffer or names a connection that does not exist.
pub(super) fn run_step(
    lane: &mut Lane,
    step: &Step,
    ends: Ends,
    op: &mut OpBuffers,
    conns: &mut Connections,
) -> Result<bool> {
    match step.op {
        Op::Copy { src, dst } => {
            let (s, d) = (op.src(src, step.bytes)?, op.dst(dst, step.bytes)?);
            let t = Transforms {
                pre: step.pre,
                post: step.post,
            };
            let streams = Streams {
                d0: op.stream_output,
                d1: false,
            };
            let n = step.bytes / op.spec.dtype.size();
            // SAFETY: both ranges bounds-checked; a plan's copy is in place or disjoint.
            unsafe { op.backend.copy(&op.spec, t, d, None, s, n, streams) };
            Ok(true)
        }
        Op::Send { src, .. } => send(lane, step, op, sender(conns, ends.send)?, src, None),
        Op::CopySend { src, dst, .. } => {
            send(lane, step, op, sender(conns, ends.send)?, src, Some(dst))
        }
        Op::Recv { dst, .. } => recv(lane, step, op, receiver(conns, ends.recv)?, dst),
        Op::RecvCopySend { dst, .. } => forward(lane, step, op, conns, ends, OnRecv::Copy { dst }),
        Op::RecvReduceSend { src, .. } => {
            forward(lane, step, op, conns, ends, OnRecv::Reduce { src })
        }
        Op::RecvReduceCopy { src, dst, .. } | Op::RecvReduceCopySend { src, dst, .. } => {
            forward(lane, step, op, conns, ends, OnRecv::ReduceCopy { src, dst })
        }
        Op::Exchange { buf, .. } => exchange(lane, step, op, conns, ends, buf),
    }
}

/// Sends `pre(src)` slot by slot, also copying it to `copy_to` when given.
fn send(
    lane: &mut Lane,
    step: &Step,
    op: &mut OpBuffers,
    s: &mut SendLink,
    src: Loc,
    copy_to: Option<Loc>,
) -> Result<bool> {
    let pre = Transforms {
        pre: step.pre,
        post: false,
    };
    let as_is = !(step.pre && op.spec.pre.is_some());
    if copy_to.is_none() && as_is && op.on_host() && s.conn.sends_from_caller() {
        return send_from_buffer(lane, step, op, s, src);
    }
    let slot_nt = op.stream_slots && s.conn.in_memory();
    let esize = op.spec.dtype.size();
    while lane.sent < step.bytes {
        let Some(slot) = s.conn.acquire() else {
            return Ok(false);
        };
        let n = s.conn.slot_bytes().min(step.bytes - lane.sent);
        let from = op.src(src.at(lane.sent), n)?;
        // The slot is the first destination unless the step also copies to the output.
        let (d0, d1, streams) = match copy_to {
            Some(dst) => (
                op.dst(dst.at(lane.sent), n)?,
                Some(slot),
                Streams {
                    d0: op.stream_output,
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
        // SAFETY: the slot holds at least n bytes, local ranges are bounds-checked, and a slot
        // never overlaps the caller's buffers.
        unsafe {
            op.backend
                .copy(&op.spec, pre, d0, d1, from, n / esize, streams)
        };
        if slot_nt {
            op.backend.fence();
        }
        s.conn.post(n);
        s.counters.add(n);
        lane.sent += n;
    }
    Ok(true)
}

/// Sends `src` as it lies, slot by slot, on an end that reads the caller's memory (TCP: the
/// socket copies it into the kernel, so a copy into a slot first would be a second copy). The
/// step ends once every slot left, so nothing the operation writes later can change bytes
/// still waiting to go.
fn send_from_buffer(
    lane: &mut Lane,
    step: &Step,
    op: &mut OpBuffers,
    s: &mut SendLink,
    src: Loc,
) -> Result<bool> {
    while lane.sent < step.bytes {
        if s.conn.acquire().is_none() {
            return Ok(false);
        }
        let n = s.conn.slot_bytes().min(step.bytes - lane.sent);
        let from = op.src(src.at(lane.sent), n)?;
        // SAFETY: `from` holds n bytes (bounds-checked) of the operation's buffers, which live
        // as long as the operation; this step, and so the operation, ends only once the end
        // says the slot left (below), and no step writes a source before its send step ended.
        unsafe { s.conn.post_from(from, n) };
        s.counters.add(n);
        lane.sent += n;
    }
    Ok(!s.conn.pending())
}

/// Asks a receiving end that can land slots in the caller's memory (TCP) to land this step's
/// next slots, up to a FIFO's worth ahead, straight at their place in `dst`: they then need no
/// copy out of the slot.
///
/// Errors: [`Error::Internal`] when the plan reaches past the buffer.
fn land_in_place(
    lane: &mut Lane,
    step: &Step,
    op: &mut OpBuffers,
    r: &mut RecvLink,
    dst: Loc,
) -> Result<()> {
    if !op.on_host() || !r.conn.receives_into_caller() {
        return Ok(());
    }
    let slot = r.conn.slot_bytes();
    while lane.offered < step.bytes {
        let ahead = lane.offered.saturating_sub(lane.got) / slot;
        if ahead >= NSLOTS {
            break;
        }
        let n = slot.min(step.bytes - lane.offered);
        let d = op.dst(dst.at(lane.offered), n)?;
        // SAFETY: `d` holds n bytes of the operation's host output (bounds-checked), which
        // nothing else writes during this step; a failed operation withdraws it (drive).
        unsafe { r.conn.receive_into(ahead, d, n) };
        lane.offered += n;
    }
    Ok(())
}

/// Receives slot by slot into `dst`.
fn recv(
    lane: &mut Lane,
    step: &Step,
    op: &mut OpBuffers,
    r: &mut RecvLink,
    dst: Loc,
) -> Result<bool> {
    let esize = op.spec.dtype.size();
    land_in_place(lane, step, op, r, dst)?;
    while lane.got < step.bytes {
        let Some((p, n)) = r.conn.peek() else {
            return Ok(false);
        };
        expect_size(n, r.conn.slot_bytes().min(step.bytes - lane.got), r.key)?;
        let d = op.dst(dst.at(lane.got), n)?;
        if p == d.cast_const() {
            // It landed in place.
            r.conn.release();
            r.counters.add(n);
            lane.got += n;
            land_in_place(lane, step, op, r, dst)?;
            continue;
        }
        let streams = Streams {
            d0: op.stream_output,
            d1: false,
        };
        // SAFETY: the slot holds n bytes; the destination is bounds-checked and disjoint.
        unsafe {
            op.backend.copy(
                &op.spec,
                Transforms::default(),
                d,
                None,
                p,
                n / esize,
                streams,
            )
        };
        r.conn.release();
        r.counters.add(n);
        lane.got += n;
        land_in_place(lane, step, op, r, dst)?;
    }
    Ok(true)
}

/// Receives slot by slot and does `what` with each, sending the result when the step has a
/// sending end.
fn forward(
    lane: &mut Lane,
    step: &Step,
    op: &mut OpBuffers,
    conns: &mut Connections,
    ends: Ends,
    what: OnRecv,
) -> Result<bool> {
    let ri = ends
        .recv
        .filter(|&i| i < conns.recvs.len())
        .ok_or_else(|| unresolved("receive"))?;
    let si = match ends.send {
        Some(i) if i < conns.sends.len() => Some(i),
        Some(_) => return Err(unresolved("send")),
        None => None,
    };
    let from = conns.recvs[ri].key;
    let esize = op.spec.dtype.size();
    let pre = Transforms {
        pre: step.pre,
        post: false,
    };
    let both = Transforms {
        pre: step.pre,
        post: step.post,
    };
    let slot_nt = op.stream_slots && si.is_some_and(|i| conns.sends[i].conn.in_memory());
    // A result written to the output is sent from there when the end reads the caller's
    // memory (TCP), instead of written a second time into a slot.
    let from_output = !matches!(what, OnRecv::Reduce { .. })
        && op.on_host()
        && si.is_some_and(|i| conns.sends[i].conn.sends_from_caller());
    let out = op.stream_output && !from_output;
    // A copied slot may land in place when nothing else needs its bytes elsewhere.
    let land = match what {
        OnRecv::Copy { dst } if from_output || si.is_none() => Some(dst),
        _ => None,
    };
    while lane.got < step.bytes {
        let r = &mut conns.recvs[ri];
        if let Some(dst) = land {
            land_in_place(lane, step, op, r, dst)?;
        }
        let Some((p, n)) = r.conn.peek() else {
            return Ok(false);
        };
        expect_size(n, r.conn.slot_bytes().min(step.bytes - lane.got), from)?;
        let slot = match si {
            Some(i) => match conns.sends[i].conn.acquire() {
                Some(_) if from_output => None,
                Some(slot) => Some(slot),
                None => return Ok(false),
            },
            None => None,
        };
        let count = n / esize;
        let at = lane.got;
        match (what, slot) {
            (OnRecv::Copy { dst }, _)
                if land.is_some() && p == op.dst(dst.at(at), n)?.cast_const() =>
            {
                // It landed in place (and is sent from there, if at all).
            }
            (OnRecv::Copy { dst }, slot) => {
                let d = op.dst(dst.at(at), n)?;
                let s = Streams {
                    d0: out,
                    d1: slot_nt,
                };
                let t = Transforms::default();
                // SAFETY: the received slot holds n bytes and the send slot at least n; `d` is
                // bounds-checked by dst(); slots never overlap the caller's buffers.
                unsafe { op.backend.copy(&op.spec, t, d, slot, p, count, s) };
            }
            (OnRecv::Reduce { src }, Some(slot)) => {
                let a = op.src(src.at(at), n)?;
                let s = Streams {
                    d0: slot_nt,
                    d1: false,
                };
                // SAFETY: the received slot holds n bytes and the send slot at least n; `a` is
                // bounds-checked by src(); slots never overlap the caller's buffers.
                unsafe { op.backend.reduce(&op.spec, pre, slot, None, p, a, count, s) };
            }
            (OnRecv::Reduce { .. }, None) => {
                return Err(Error::Internal(
                    "a receive-reduce-send step has no send connection".into(),
                ));
            }
            (OnRecv::ReduceCopy { src, dst }, slot) => {
                let a = op.src(src.at(at), n)?;
                let d = op.dst(dst.at(at), n)?;
                let s = Streams {
                    d0: out,
                    d1: slot_nt,
                };
                // SAFETY: the received slot holds n bytes and the send slot at least n; `a` and
                // `d` are bounds-checked and equal (in place) or disjoint; slots never overlap
                // the caller's buffers.
                unsafe { op.backend.reduce(&op.spec, both, d, slot, p, a, count, s) };
            }
        }
        let r = &mut conns.recvs[ri];
        r.conn.release();
        r.counters.add(n);
        if let Some(i) = si {
            if slot_nt {
                op.backend.fence();
            }
            let s = &mut conns.sends[i];
            match what {
                OnRecv::Copy { dst } | OnRecv::ReduceCopy { dst, .. } if from_output => {
                    let d = op.dst(dst.at(at), n)?.cast_const();
                    // SAFETY: `d` holds the n bytes just written (bounds-checked); the step
                    // ends only once every slot left (below), and nothing writes an output
                    // range twice in one operation.
                    unsafe { s.conn.post_from(d, n) };
                }
                _ => s.conn.post(n),
            }
            s.counters.add(n);
        }
        lane.got += n;
    }
    Ok(!from_output || si.is_none_or(|i| !conns.sends[i].conn.pending()))
}

/// Recursive doubling's exchange: sends `buf` while receiving the partner's, combining each
/// received slot into the part of `buf` already sent.
fn exchange(
    lane: &mut Lane,
    step: &Step,
    op: &mut OpBuffers,
    conns: &mut Connections,
    ends: Ends,
    buf: Loc,
) -> Result<bool> {
    let esize = op.spec.dtype.size();
    let plain = Transforms::default();
    {
        let s = sender(conns, ends.send)?;
        while lane.sent < step.bytes {
            let Some(slot) = s.conn.acquire() else { break };
            let n = s.conn.slot_bytes().min(step.bytes - lane.sent);
            let src = op.src(buf.at(lane.sent), n)?;
            // SAFETY: the slot holds at least n bytes; the source is bounds-checked.
            unsafe {
                op.backend.copy(
                    &op.spec,
                    plain,
                    slot,
                    None,
                    src,
                    n / esize,
                    Streams::default(),
                )
            };
            s.conn.post(n);
            s.counters.add(n);
            lane.sent += n;
        }
    }
    let r = receiver(conns, ends.recv)?;
    let with = r.key;
    while lane.got < lane.sent {
        let Some((p, n)) = r.conn.peek() else { break };
        expect_size(n, r.conn.slot_bytes().min(step.bytes - lane.got), with)?;
        let d = op.dst(buf.at(lane.got), n)?;
        // SAFETY: d was sent already (got < sent) so overwriting it is safe; the slot holds n.
        unsafe {
            op.backend.reduce(
                &op.spec,
                plain,
                d,
                None,
                d,
                p,
                n / esize,
                Streams::default(),
            )
        };
        r.conn.release();
        r.counters.add(n);
        lane.got += n;
    }
    Ok(lane.got == step.bytes)
}
