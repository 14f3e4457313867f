//! Direct (zero-copy) collectives between ranks of one host whose buffers are registered
//! windows ([`crate::comm::Communicator::window_register`], NCCL 2.27's symmetric memory): each rank
//! reads its peers' buffers where they lie instead of passing every byte through FIFO slots.
//!
//! Per rank that is one read of the inputs and one write of the output, against the FIFO ring's
//! extra slot write and read per byte (a C prototype on the 2-vCPU reference VM: 16 MiB at 5-8.7
//! GB/s against the ring's 4.2). What each rank does is in [`tasks`]; the words ranks post and
//! poll are in [`control`]:
//! - `enter`: posted when a rank starts collective `seq` of a communicator with windows, with
//!   the operation's arguments beside it. A rank whose buffers are not all in windows posts
//!   `direct = 0` and runs the FIFO plan; a rank that finds any peer doing so falls back to the
//!   FIFO plan too, so every rank takes the same path without an extra round trip. PreMulSum
//!   always runs the FIFO plan: each rank scales its own input by its own scalar, which a rank
//!   reducing its peers' inputs here does not know.
//! - `progress`: chunks of its slice a rank has reduced (peers copy them as they land).
//! - `leave`: posted when a rank has finished reading its peers; a rank returns (and the caller
//!   may reuse its buffers) only when every peer has left.
//!
//! A [`DirectOp`] is a state machine [`DirectOp::progress`] moves without blocking.

mod control;
mod tasks;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub(crate) use control::{CONTROL_BYTES, ControlBlocks, Place};
pub(crate) use tasks::has_direct_form;

use control::Posted;
use tasks::{Shape, Work, work};

use super::buffers::OpBuffers;
use super::execution::Segment;
use crate::coll::LaneKey;
use crate::device::{Backend, ReduceSpec, Streams, Transforms};
use crate::error::{Error, Result};
use crate::func::Func;
use crate::os::shm::Mapping;
use crate::stats::LinkCounters;

/// Collectives smaller than this (count × element size, the same on every rank) run their FIFO
/// plans even on windows: a direct operation waits on peers three times (enter, slices, leave)
/// where a small FIFO exchange waits once. Measured with `rnccl bench -R 2 --ranks 2` on the
/// reference VM: 512 B 1.5-1.6 µs either way, 2 KiB 1.7 µs direct against 2.6 µs through FIFOs,
/// 8 B 1.5-2.6 µs direct against 1.0-1.5.
pub const DIRECT_MIN_BYTES: usize = 2048;

/// A window as every rank of the communicator sees it: for each rank, its memory as mapped in
/// this process.
#[derive(Clone)]
pub(crate) struct WindowView {
    /// The id all ranks gave this window.
    pub id: u64,
    /// Per rank, the mapping of that rank's memory.
    pub ranks: Vec<Arc<dyn Mapping>>,
}

/// What a rank brings to one direct operation.
#[derive(Clone, Copy)]
pub(crate) struct DirectArgs {
    /// This rank.
    pub rank: usize,
    /// Collective sequence number on the communicator (1-based, counts collectives only).
    pub seq: u64,
    /// The collective.
    pub func: Func,
    /// NCCL count (elements; per rank for AllGather/ReduceScatter/Gather/Scatter blocks).
    pub count: usize,
    /// The root (rooted collectives).
    pub root: usize,
    /// Operation signature every rank must match (func, dtype, op, root).
    pub signature: u64,
    /// The reduction.
    pub spec: ReduceSpec,
    /// The kernels.
    pub backend: &'static dyn Backend,
    /// Where the input lies.
    pub send: Place,
    /// Where the output lies.
    pub recv: Place,
    /// Write the output past the caches (large operations).
    pub stream_output: bool,
}

/// The FIFO plan a direct operation falls back to when some rank's buffers are not windows.
pub(crate) struct Fallback {
    /// The operation's buffers.
    pub ops: Vec<OpBuffers>,
    /// Its plan lanes.
    pub lanes: Vec<(LaneKey, Vec<Segment>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Enter,
    Reduce,
    Copy(usize, usize),
    Leave,
    Done,
}

/// What [`DirectOp::progress`] found.
pub(crate) enum Progress {
    /// Whether anything moved.
    Moved(bool),
    /// Some rank runs the FIFO plan: run this instead.
    Fallback(Fallback),
}

/// One direct operation in flight.
pub(crate) struct DirectOp {
    args: DirectArgs,
    controls: Arc<ControlBlocks>,
    windows: Vec<WindowView>,
    stage: Stage,
    work: Work,
    /// Every rank's input and output, resolved in this process (null for empty buffers).
    inputs: Vec<*const u8>,
    outputs: Vec<*const u8>,
    fallback: Option<Fallback>,
    posted: bool,
    /// Per rank, the counters of bytes read from its windows.
    reads: Vec<Arc<LinkCounters>>,
}

// SAFETY: the resolved pointers point into `windows`' mappings, which the operation keeps alive;
// one thread drives an operation at a time.
unsafe impl Send for DirectOp {}

impl DirectOp {
    /// Prepares the operation over `controls` (every rank's block) and the communicator's
    /// `windows`, with the FIFO plan to fall back to; bytes read from rank `p`'s windows are
    /// counted in `reads[p]` (one per rank).
    pub(crate) fn new(
        args: DirectArgs,
        controls: Arc<ControlBlocks>,
        windows: Vec<WindowView>,
        fallback: Fallback,
        reads: Vec<Arc<LinkCounters>>,
    ) -> DirectOp {
        DirectOp {
            args,
            controls,
            windows,
            stage: Stage::Enter,
            work: Work {
                reduce: None,
                copies: Vec::new(),
                chunk: 0,
            },
            inputs: Vec::new(),
            outputs: Vec::new(),
            fallback: Some(fallback),
            posted: false,
            reads,
        }
    }

    fn nranks(&self) -> usize {
        self.controls.len()
    }

    /// Whether this rank's output is written past the caches.
    pub(crate) fn streams_output(&self) -> bool {
        self.args.stream_output
    }

    /// Orders this rank's stores before whatever follows.
    pub(crate) fn fence(&self) {
        self.args.backend.fence();
    }

    /// True once every rank has left the operation.
    pub(crate) fn done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// Bytes this rank has written to its output so far (reduced and copied).
    pub(crate) fn bytes_done(&self) -> usize {
        let chunk = self.work.chunk.max(1);
        let reduced = self.work.reduce.map_or(0, |r| r.bytes);
        let copied = |t: usize, c: usize| {
            self.work.copies[..t].iter().map(|c| c.bytes).sum::<usize>()
                + (c * chunk).min(self.work.copies.get(t).map_or(0, |x| x.bytes))
        };
        match self.stage {
            Stage::Enter | Stage::Reduce => 0,
            Stage::Copy(t, c) => reduced + copied(t, c),
            Stage::Leave | Stage::Done => {
                reduced + self.work.copies.iter().map(|c| c.bytes).sum::<usize>()
            }
        }
    }

    /// Chunks this rank must reduce and copy, and how many it has.
    pub(crate) fn steps(&self) -> (u64, u64) {
        let chunk = self.work.chunk.max(1);
        let chunks = |bytes: usize| bytes.div_ceil(chunk) as u64;
        let reduce = self.work.reduce.map_or(0, |r| chunks(r.bytes));
        let total = reduce
            + self
                .work
                .copies
                .iter()
                .map(|c| chunks(c.bytes))
                .sum::<u64>();
        let done = match self.stage {
            Stage::Enter | Stage::Reduce => 0,
            Stage::Copy(t, c) => {
                reduce
                    + self.work.copies[..t]
                        .iter()
                        .map(|x| chunks(x.bytes))
                        .sum::<u64>()
                    + c as u64
            }
            Stage::Leave | Stage::Done => total,
        };
        (total, done)
    }

    fn count_read(&self, rank: usize, bytes: usize) {
        if rank != self.args.rank
            && let Some(c) = self.reads.get(rank)
        {
            c.add(bytes);
        }
    }

    /// The counters of the window reads of the rank this one waits for now, if it waits.
    pub(crate) fn stalled_on(&self) -> Option<Arc<LinkCounters>> {
        let (p, _) = self.waiting_for()?;
        self.reads.get(p).cloned()
    }

    /// The rank this one waits for now and what for (for timeouts), or `None` when not waiting.
    pub(crate) fn waiting_for(&self) -> Option<(usize, &'static str)> {
        let seq = self.args.seq;
        let n = self.nranks();
        match self.stage {
            Stage::Enter => (0..n)
                .find(|&p| self.controls.get(p).entered() < seq << 1)
                .map(|p| (p, "to start the operation")),
            Stage::Copy(t, c) => {
                let task = self.work.copies.get(t)?;
                (task.from_output && !self.controls.get(task.rank).reduced(seq, c as u64 + 1))
                    .then_some((task.rank, "to reduce its slice"))
            }
            Stage::Leave => (0..n)
                .find(|&p| !self.controls.get(p).left(seq))
                .map(|p| (p, "to finish reading this rank's buffers")),
            Stage::Reduce | Stage::Done => None,
        }
    }

    /// Moves the operation as far as it can without waiting.
    ///
    /// Errors: [`Error::Remote`] when a peer called a different operation, or its buffers do
    /// not fit its windows.
    pub(crate) fn progress(&mut self) -> Result<Progress> {
        let mut moved = false;
        loop {
            match self.stage {
                Stage::Enter => {
                    if !self.posted {
                        self.post();
                        self.posted = true;
                        moved = true;
                    }
                    let seq = self.args.seq;
                    let mut direct = true;
                    for p in 0..self.nranks() {
                        let e = self.controls.get(p).entered();
                        if e < seq << 1 {
                            return Ok(Progress::Moved(moved));
                        }
                        // A peer past this operation ran it without us: through the FIFO plan.
                        direct &= e == (seq << 1 | 1);
                    }
                    if !direct {
                        return match self.fallback.take() {
                            Some(f) => Ok(Progress::Fallback(f)),
                            None => {
                                Err(Error::Internal("a direct operation fell back twice".into()))
                            }
                        };
                    }
                    self.plan()?;
                    self.stage = if self.work.reduce.is_some() {
                        Stage::Reduce
                    } else {
                        Stage::Copy(0, 0)
                    };
                    moved = true;
                }
                Stage::Reduce => {
                    self.run_reduce();
                    self.stage = Stage::Copy(0, 0);
                    moved = true;
                }
                Stage::Copy(t, c) => {
                    if !self.run_copies(t, c, &mut moved) {
                        return Ok(Progress::Moved(moved));
                    }
                    self.args.backend.fence();
                    self.controls.get(self.args.rank).set_left(self.args.seq);
                    self.stage = Stage::Leave;
                    moved = true;
                }
                Stage::Leave => {
                    let seq = self.args.seq;
                    if (0..self.nranks()).any(|p| !self.controls.get(p).left(seq)) {
                        return Ok(Progress::Moved(moved));
                    }
                    self.stage = Stage::Done;
                    return Ok(Progress::Moved(true));
                }
                Stage::Done => return Ok(Progress::Moved(moved)),
            }
        }
    }

    /// Publishes this rank's arguments with `enter`'s direct bit.
    fn post(&self) {
        let a = &self.args;
        let posted = Posted {
            signature: a.signature,
            count: a.count as u64,
            send: a.send,
            recv: a.recv,
        };
        self.controls.get(a.rank).enter_direct(a.seq, &posted);
    }

    /// Reads every rank's places, checks them, and lays out this rank's work.
    fn plan(&mut self) -> Result<()> {
        let n = self.nranks();
        let seq = self.args.seq;
        let mut posted = Vec::with_capacity(n);
        self.inputs.clear();
        self.outputs.clear();
        for p in 0..n {
            let c = self.controls.get(p).posted();
            if c.signature != self.args.signature || c.count != self.args.count as u64 {
                return Err(Error::Remote(format!(
                    "rank {p} called a different collective as collective #{seq} of this \
                     communicator (count {} where this rank has {}, or another function, \
                     type, operation or root): every rank must call the same collectives in the \
                     same order",
                    c.count, self.args.count
                )));
            }
            self.inputs.push(self.resolve(p, c.send, "send")?);
            self.outputs.push(self.resolve(p, c.recv, "receive")?);
            posted.push(c);
        }
        let shape = Shape {
            func: self.args.func,
            count: self.args.count,
            esize: self.args.spec.dtype.size(),
            nranks: n,
            root: self.args.root,
        };
        let me = self.args.rank;
        let work = work(shape, me);
        // Every read and write must stay inside the buffers ranks posted.
        let len = |p: usize, output: bool| {
            let c = &posted[p];
            (if output { c.recv.len } else { c.send.len }) as usize
        };
        for t in &work.copies {
            check_len(seq, t.rank, t.src + t.bytes, len(t.rank, t.from_output))?;
            check_len(seq, me, t.dst + t.bytes, len(me, true))?;
        }
        if let Some(r) = work.reduce {
            for p in 0..n {
                check_len(seq, p, r.src + r.bytes, len(p, false))?;
            }
            check_len(seq, me, r.dst + r.bytes, len(me, true))?;
        }
        self.work = work;
        Ok(())
    }

    /// The address, in this process, of rank `p`'s buffer at `place`.
    fn resolve(&self, p: usize, place: Place, what: &str) -> Result<*const u8> {
        if place.len == 0 {
            return Ok(std::ptr::null());
        }
        let w = self
            .windows
            .iter()
            .find(|w| w.id == place.win)
            .ok_or_else(|| {
                Error::Remote(format!(
                    "rank {p} passed a {what} buffer in window {} that this rank does not \
                     have: register windows on every rank, in the same order",
                    place.win
                ))
            })?;
        let m = w.ranks.get(p).ok_or_else(|| {
            Error::Internal(format!("window {} has no mapping for rank {p}", w.id))
        })?;
        if place.off.saturating_add(place.len) > m.len() as u64 {
            return Err(Error::Remote(format!(
                "rank {p}'s {what} buffer (offset {}, {} bytes) reaches past its window of {} \
                 bytes",
                place.off,
                place.len,
                m.len()
            )));
        }
        // SAFETY: the range was checked against the window's mapping.
        Ok(unsafe { m.base().add(place.off as usize).cast_const() })
    }

    /// Reduces this rank's share, posting progress chunk by chunk.
    fn run_reduce(&mut self) {
        let Some(r) = self.work.reduce else { return };
        let (n, me, seq) = (self.nranks(), self.args.rank, self.args.seq);
        let es = self.args.spec.dtype.size();
        let out = self.outputs[me].cast_mut();
        let mut off = 0;
        let mut c = 0u64;
        while off < r.bytes {
            let len = self.work.chunk.min(r.bytes - off);
            // The local input first: its lines are the ones most likely cached.
            let srcs: Vec<*const u8> = (0..n)
                // SAFETY: src + bytes was checked against every rank's input length.
                .map(|k| unsafe { self.inputs[(me + k) % n].add(r.src + off) })
                .collect();
            // SAFETY: dst + bytes was checked against this rank's output.
            let dst = unsafe { out.add(r.dst + off) };
            // SAFETY: all ranges valid for len bytes; dst is this rank's own output, equal to
            // its input (in place) or disjoint from every input.
            unsafe { self.reduce_chunk(dst, &srcs, len / es) };
            for p in 0..n {
                self.count_read(p, len);
            }
            c += 1;
            off += len;
            self.args.backend.fence();
            self.controls.get(me).set_progress(seq, c);
        }
    }

    /// Runs copies from task `t`, chunk `c`, until one must wait. Returns true when all are done.
    fn run_copies(&mut self, mut t: usize, mut c: usize, moved: &mut bool) -> bool {
        let (seq, me) = (self.args.seq, self.args.rank);
        let spec = ReduceSpec::copy(self.args.spec.dtype);
        let es = self.args.spec.dtype.size();
        let chunk = self.work.chunk;
        while let Some(task) = self.work.copies.get(t).copied() {
            let nchunks = task.bytes.div_ceil(chunk);
            while c < nchunks {
                if task.from_output && !self.controls.get(task.rank).reduced(seq, c as u64 + 1) {
                    self.stage = Stage::Copy(t, c);
                    return false;
                }
                let off = c * chunk;
                let len = chunk.min(task.bytes - off);
                let base = if task.from_output {
                    self.outputs[task.rank]
                } else {
                    self.inputs[task.rank]
                };
                let s = Streams {
                    d0: self.args.stream_output,
                    d1: false,
                };
                // SAFETY: ranges checked in plan(); a source equal to the destination (in place)
                // is skipped by the copy kernel.
                unsafe {
                    let src = base.add(task.src + off);
                    let dst = self.outputs[me].cast_mut().add(task.dst + off);
                    let t0 = Transforms::default();
                    self.args
                        .backend
                        .copy(&spec, t0, dst, None, src, len / es, s);
                }
                self.count_read(task.rank, len);
                c += 1;
                *moved = true;
            }
            t += 1;
            c = 0;
        }
        true
    }

    /// `dst = post(pre(s₀) ⊕ pre(s₁) ⊕ …)` over `n` elements; only the last pass may write
    /// past the caches (the earlier ones are re-read at once).
    ///
    /// # Safety
    /// Every pointer valid for `n` elements; `dst` equal to `srcs[0]` or disjoint from every
    /// source.
    unsafe fn reduce_chunk(&self, dst: *mut u8, srcs: &[*const u8], n: usize) {
        let (spec, be) = (&self.args.spec, self.args.backend);
        let last = srcs.len() - 1;
        let s = |k: usize| Streams {
            d0: self.args.stream_output && k == last,
            d1: false,
        };
        let t = |k: usize| Transforms {
            pre: true,
            post: k == last,
        };
        // SAFETY: forwarded caller contract; later passes read dst back in place.
        unsafe {
            if spec.pre.is_some() || last == 0 {
                // The first operand of a kernel takes no `pre`: scale it alone first.
                let first = Transforms {
                    pre: true,
                    post: last == 0,
                };
                be.copy(spec, first, dst, None, srcs[0], n, Streams::default());
                for (k, &b) in srcs.iter().enumerate().skip(1) {
                    be.reduce(spec, t(k), dst, None, dst, b, n, s(k));
                }
            } else {
                be.reduce(spec, t(1), dst, None, srcs[0], srcs[1], n, s(1));
                for (k, &b) in srcs.iter().enumerate().skip(2) {
                    be.reduce(spec, t(k), dst, None, dst, b, n, s(k));
                }
            }
        }
    }
}

fn check_len(seq: u64, p: usize, need: usize, have: usize) -> Result<()> {
    if need > have {
        return Err(Error::Remote(format!(
            "rank {p}'s buffer holds {have} bytes where collective #{seq} needs {need}: do all \
             ranks pass buffers of the same shape?"
        )));
    }
    Ok(())
}
