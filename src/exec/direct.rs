//! Direct (zero-copy) collectives between ranks of one host whose buffers are registered
//! windows ([`crate::Communicator::window_register`], NCCL 2.27's symmetric memory): each rank
//! reads its peers' buffers where they lie instead of passing every byte through FIFO slots.
//!
//! An AllReduce of `count` elements over `n` ranks splits the elements into `n` slices. Rank `r`
//! reduces slice `r` from every rank's input straight into its own output, chunk by chunk,
//! posting a progress counter after each chunk; then copies every other slice from the owning
//! rank's output as that rank's counter passes it. Per rank that is one read of the inputs and one
//! write of the output, against the FIFO ring's extra slot write and read per byte (a C prototype
//! on the 2-vCPU reference VM: 16 MiB at 5-8.7 GB/s against the ring's 4.2). ReduceScatter is the
//! first half, AllGather/Broadcast/Gather/Scatter are copies from peers' inputs, Reduce is the
//! first half done by the root for the whole buffer.
//!
//! Synchronisation is one [`Control`] block per rank in shared memory:
//! - `enter` = `seq << 1 | direct`: posted when a rank starts collective `seq` of a communicator
//!   with windows, with the operation's arguments beside it. A rank whose buffers are not all in
//!   windows posts `direct = 0` and runs the FIFO plan; a rank that finds any peer doing so falls
//!   back to the FIFO plan too, so every rank takes the same path without an extra round trip.
//! - `progress` = `seq << 32 | chunks reduced`.
//! - `leave` = `seq`, posted when a rank has finished reading its peers; a rank returns (and the
//!   caller may reuse its buffers) only when every peer has left.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::coll::{Func, LaneKey};
use crate::device::cpu::reduce::{ReduceSpec, Transforms, copy, reduce_with};
use crate::device::cpu::stream::{Streams, copy_streaming, fence};
use crate::error::{Error, Result};
use crate::exec::{OpBuffers, Segment};

/// Collectives smaller than this (count × element size, the same on every rank) run their FIFO
/// plans even on windows: a direct operation waits on peers three times (enter, slices, leave)
/// where a small FIFO exchange waits once. Measured with `rnccl bench -R 2 --ranks 2` on the
/// reference VM: 512 B 1.5-1.6 µs either way, 2 KiB 1.7 µs direct against 2.6 µs through FIFOs,
/// 8 B 1.5-2.6 µs direct against 1.0-1.5.
pub const DIRECT_MIN_BYTES: usize = 2048;

/// Bytes of one rank's control block (one page, so each rank maps whole pages).
pub const CONTROL_BYTES: usize = 4096;

/// One cache line of atomics.
#[repr(C, align(64))]
struct Line<const N: usize>([AtomicU64; N]);

/// One rank's control block, at the start of a [`CONTROL_BYTES`] shared mapping.
#[repr(C)]
pub struct Control {
    /// `[enter, signature, count, send window, send offset, send bytes, recv window, recv offset]`;
    /// then (second line) recv bytes.
    post: Line<8>,
    post2: Line<1>,
    progress: Line<1>,
    leave: Line<1>,
}

const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_BYTES);

impl Control {
    /// Posts that this rank runs collective `seq` through its FIFO plan (its buffers are not
    /// all in windows, or the collective has no direct form).
    pub fn announce_fifo(&self, seq: u64) {
        self.post.0[0].store(seq << 1, Ordering::Release);
    }
}

/// Where one buffer of a rank lies: window id (0: none, for an empty buffer), byte offset into
/// the window, and length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    /// Window id, 1-based; 0 for an empty buffer.
    pub win: u64,
    /// Byte offset of the buffer in the window.
    pub off: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A window as every rank of the communicator sees it: for each rank, its base address in this
/// process (the local mapping of that rank's memory) and its length in bytes.
#[derive(Debug, Clone)]
pub struct WindowView {
    /// The id all ranks gave this window.
    pub id: u64,
    /// Per rank: base address here and length in bytes.
    pub ranks: Vec<(*const u8, usize)>,
}

/// What a rank brings to one direct operation.
pub struct DirectArgs {
    /// This rank.
    pub rank: usize,
    /// Collective sequence number on the communicator (1-based, counts collectives only).
    pub seq: u64,
    /// The collective.
    pub func: Func,
    /// NCCL count (elements; per rank for AllGather/ReduceScatter/Gather/Scatter blocks).
    pub count: usize,
    /// Element size in bytes.
    pub esize: usize,
    /// The root (rooted collectives).
    pub root: usize,
    /// Operation signature every rank must match (func, dtype, op, root, count).
    pub signature: u64,
    /// The reduction.
    pub spec: ReduceSpec,
    /// Where the input lies.
    pub send: Place,
    /// Where the output lies.
    pub recv: Place,
    /// Write the output with streaming stores (large operations).
    pub stream_output: bool,
}

/// The FIFO plan a direct operation falls back to when some rank's buffers are not windows.
pub struct Fallback {
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

/// A reduction of `bytes` from offset `src` of every rank's input into offset `dst` of this
/// rank's output, in chunks.
#[derive(Debug, Clone, Copy)]
struct ReduceTask {
    dst: usize,
    src: usize,
    bytes: usize,
}

/// A copy of `bytes` from `rank`'s input (or output, once its progress passes each chunk) at
/// `src` into this rank's output at `dst`.
#[derive(Debug, Clone, Copy)]
struct CopyTask {
    rank: usize,
    from_output: bool,
    src: usize,
    dst: usize,
    bytes: usize,
}

/// One direct operation in flight: a state machine [`DirectOp::progress`] moves without blocking.
pub struct DirectOp {
    args: DirectArgs,
    nranks: usize,
    controls: Vec<*const Control>,
    windows: Vec<WindowView>,
    stage: Stage,
    chunk: usize,
    reduce: Option<ReduceTask>,
    copies: Vec<CopyTask>,
    inputs: Vec<*const u8>,
    outputs: Vec<*const u8>,
    fallback: Option<Fallback>,
    posted: bool,
}

// SAFETY: the pointers refer to shared mappings the communicator keeps for its lifetime and to
// buffers the caller lends for the operation; one thread drives the operation at a time.
unsafe impl Send for DirectOp {}

/// What [`DirectOp::progress`] found.
pub enum Progress {
    /// Whether anything moved.
    Moved(bool),
    /// Some rank runs the FIFO plan: run this instead.
    Fallback(Fallback),
}

/// Chunk size in bytes for an operation: about an eighth of a slice, 16-256 KiB, a multiple of
/// 4 KiB (so of every element size). Every rank computes the same value.
fn chunk_bytes(slice: usize) -> usize {
    (slice / 8)
        .clamp(16 << 10, 256 << 10)
        .next_multiple_of(4096)
}

/// Rank `q`'s slice of `count` elements (element range) out of `n`.
fn slice(count: usize, n: usize, q: usize) -> (usize, usize) {
    (q * count / n, (q + 1) * count / n)
}

impl DirectOp {
    /// Prepares the operation. `controls` holds every rank's control block (mapped here),
    /// `windows` the communicator's windows.
    pub fn new(
        args: DirectArgs,
        controls: Vec<*const Control>,
        windows: Vec<WindowView>,
        fallback: Fallback,
    ) -> DirectOp {
        DirectOp {
            nranks: controls.len(),
            args,
            controls,
            windows,
            stage: Stage::Enter,
            chunk: 0,
            reduce: None,
            copies: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            fallback: Some(fallback),
            posted: false,
        }
    }

    fn ctl(&self, rank: usize) -> &Control {
        // SAFETY: control blocks stay mapped while the communicator lives.
        unsafe { &*self.controls[rank] }
    }

    /// Whether this rank's output is written with streaming stores.
    pub fn streams_output(&self) -> bool {
        self.args.stream_output
    }

    /// True once every rank has left the operation.
    pub fn done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// The rank this one waits for now and what for (for timeouts), or `None` when not waiting.
    pub fn waiting_for(&self) -> Option<(usize, &'static str)> {
        let seq = self.args.seq;
        match self.stage {
            Stage::Enter => (0..self.nranks)
                .find(|&p| self.ctl(p).post.0[0].load(Ordering::Acquire) < seq << 1)
                .map(|p| (p, "to start the operation")),
            Stage::Copy(t, c) => {
                let task = self.copies.get(t)?;
                let need = (seq << 32) | (c as u64 + 1);
                (self.ctl(task.rank).progress.0[0].load(Ordering::Acquire) < need)
                    .then_some((task.rank, "to reduce its slice"))
            }
            Stage::Leave => (0..self.nranks)
                .find(|&p| self.ctl(p).leave.0[0].load(Ordering::Acquire) < seq)
                .map(|p| (p, "to finish reading this rank's buffers")),
            Stage::Reduce | Stage::Done => None,
        }
    }

    /// Moves the operation as far as it can without waiting.
    ///
    /// Errors: [`Error::Remote`] when a peer called a different operation, or its buffers do
    /// not fit its windows.
    pub fn progress(&mut self) -> Result<Progress> {
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
                    for p in 0..self.nranks {
                        let e = self.ctl(p).post.0[0].load(Ordering::Acquire);
                        if e < seq << 1 {
                            return Ok(Progress::Moved(moved));
                        }
                        // A peer past this operation ran it without us: through the FIFO plan.
                        direct &= e == (seq << 1 | 1);
                    }
                    if !direct {
                        let f = self.fallback.take().expect("fallback taken once");
                        return Ok(Progress::Fallback(f));
                    }
                    self.plan()?;
                    self.stage = if self.reduce.is_some() {
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
                    fence();
                    self.ctl(self.args.rank).leave.0[0].store(self.args.seq, Ordering::Release);
                    self.stage = Stage::Leave;
                    moved = true;
                }
                Stage::Leave => {
                    let seq = self.args.seq;
                    if (0..self.nranks)
                        .any(|p| self.ctl(p).leave.0[0].load(Ordering::Acquire) < seq)
                    {
                        return Ok(Progress::Moved(moved));
                    }
                    self.stage = Stage::Done;
                    return Ok(Progress::Moved(true));
                }
                Stage::Done => return Ok(Progress::Moved(moved)),
            }
        }
    }

    /// Publishes this rank's arguments, then `enter` with the direct bit.
    fn post(&self) {
        let a = &self.args;
        let me = self.ctl(a.rank);
        let (s, r) = (a.send, a.recv);
        let p = &me.post.0;
        for (i, v) in [
            a.signature,
            a.count as u64,
            s.win,
            s.off,
            s.len,
            r.win,
            r.off,
        ]
        .into_iter()
        .enumerate()
        {
            p[i + 1].store(v, Ordering::Relaxed);
        }
        me.post2.0[0].store(r.len, Ordering::Relaxed);
        p[0].store(a.seq << 1 | 1, Ordering::Release);
    }

    /// Reads every rank's places, checks them, and lays out this rank's work.
    fn plan(&mut self) -> Result<()> {
        let (n, me, es) = (self.nranks, self.args.rank, self.args.esize);
        let seq = self.args.seq;
        self.inputs.clear();
        self.outputs.clear();
        for p in 0..n {
            let c = &self.ctl(p).post.0;
            let sig = c[1].load(Ordering::Relaxed);
            let count = c[2].load(Ordering::Relaxed);
            if sig != self.args.signature || count != self.args.count as u64 {
                return Err(Error::Remote(format!(
                    "rank {p} called a different collective as collective #{seq} of this \
                     communicator (count {count} where this rank has {}, or another function, \
                     type, operation or root): every rank must call the same collectives in the \
                     same order",
                    self.args.count
                )));
            }
            let send = Place {
                win: c[3].load(Ordering::Relaxed),
                off: c[4].load(Ordering::Relaxed),
                len: c[5].load(Ordering::Relaxed),
            };
            let recv = Place {
                win: c[6].load(Ordering::Relaxed),
                off: c[7].load(Ordering::Relaxed),
                len: self.ctl(p).post2.0[0].load(Ordering::Relaxed),
            };
            self.inputs.push(self.resolve(p, send, "send")?);
            self.outputs.push(self.resolve(p, recv, "receive")?);
        }
        let blk = self.args.count * es;
        let root = self.args.root;
        let mut reduce = None;
        let mut copies = Vec::new();
        match self.args.func {
            Func::AllReduce => {
                let (lo, hi) = slice(self.args.count, n, me);
                reduce = Some(ReduceTask {
                    dst: lo * es,
                    src: lo * es,
                    bytes: (hi - lo) * es,
                });
                for k in 1..n {
                    let p = (me + k) % n;
                    let (lo, hi) = slice(self.args.count, n, p);
                    copies.push(CopyTask {
                        rank: p,
                        from_output: true,
                        src: lo * es,
                        dst: lo * es,
                        bytes: (hi - lo) * es,
                    });
                }
            }
            Func::ReduceScatter => {
                reduce = Some(ReduceTask {
                    dst: 0,
                    src: me * blk,
                    bytes: blk,
                });
            }
            Func::Reduce if me == root => {
                reduce = Some(ReduceTask {
                    dst: 0,
                    src: 0,
                    bytes: blk,
                });
            }
            Func::AllGather => {
                for k in 0..n {
                    let p = (me + k) % n;
                    copies.push(input_copy(p, 0, p * blk, blk));
                }
            }
            Func::Broadcast => copies.push(input_copy(root, 0, 0, blk)),
            Func::Gather if me == root => {
                for p in 0..n {
                    copies.push(input_copy(p, 0, p * blk, blk));
                }
            }
            Func::Scatter => copies.push(input_copy(root, me * blk, 0, blk)),
            _ => {}
        }
        // Every read and write must stay inside the buffers ranks posted.
        for t in &copies {
            self.check_len(t.rank, t.src + t.bytes, self.len_of(t.rank, t.from_output))?;
            self.check_len(me, t.dst + t.bytes, self.len_of(me, true))?;
        }
        if let Some(r) = reduce {
            for p in 0..n {
                self.check_len(p, r.src + r.bytes, self.len_of(p, false))?;
            }
            self.check_len(me, r.dst + r.bytes, self.len_of(me, true))?;
        }
        let (lo, hi) = slice(self.args.count, n, me);
        self.chunk = chunk_bytes(match self.args.func {
            Func::AllReduce => (hi - lo) * es,
            _ => blk,
        });
        self.reduce = reduce;
        self.copies = copies;
        Ok(())
    }

    fn len_of(&self, p: usize, output: bool) -> usize {
        let c = self.ctl(p);
        if output {
            c.post2.0[0].load(Ordering::Relaxed) as usize
        } else {
            c.post.0[5].load(Ordering::Relaxed) as usize
        }
    }

    fn check_len(&self, p: usize, need: usize, have: usize) -> Result<()> {
        if need > have {
            return Err(Error::Remote(format!(
                "rank {p}'s buffer holds {have} bytes where collective #{} needs {need}: do all \
                 ranks pass buffers of the same shape?",
                self.args.seq
            )));
        }
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
                    "rank {p} passed a {what} buffer in window {} that this rank does not have: \
                 register windows on every rank, in the same order",
                    place.win
                ))
            })?;
        let (base, len) = w.ranks[p];
        if place.off.saturating_add(place.len) > len as u64 {
            return Err(Error::Remote(format!(
                "rank {p}'s {what} buffer (offset {}, {} bytes) reaches past its window of {len} bytes",
                place.off, place.len
            )));
        }
        // SAFETY: the range was checked against the window's mapping.
        Ok(unsafe { base.add(place.off as usize) })
    }

    /// Reduces this rank's share, posting progress chunk by chunk.
    fn run_reduce(&mut self) {
        let Some(r) = self.reduce else { return };
        let (n, me, seq) = (self.nranks, self.args.rank, self.args.seq);
        let spec = self.args.spec;
        let es = self.args.esize;
        let out = self.outputs[me].cast_mut();
        let mut off = 0;
        let mut c = 0u64;
        while off < r.bytes {
            let len = self.chunk.min(r.bytes - off);
            // The local input first: its lines are the ones most likely cached.
            let srcs: Vec<*const u8> = (0..n)
                // SAFETY: src + bytes was checked against every rank's input length.
                .map(|k| unsafe { self.inputs[(me + k) % n].add(r.src + off) })
                .collect();
            // SAFETY: dst + bytes was checked against this rank's output.
            let dst = unsafe { out.add(r.dst + off) };
            // SAFETY: all ranges valid for len bytes; dst is this rank's own output, equal to
            // its input (in place) or disjoint from every input.
            unsafe { reduce_chunk(&spec, dst, &srcs, len / es, self.args.stream_output) };
            c += 1;
            off += len;
            fence();
            self.ctl(me).progress.0[0].store((seq << 32) | c, Ordering::Release);
        }
    }

    /// Runs copies from task `t`, chunk `c`, until one must wait. Returns true when all are done.
    fn run_copies(&mut self, mut t: usize, mut c: usize, moved: &mut bool) -> bool {
        let seq = self.args.seq;
        let me = self.args.rank;
        let spec = ReduceSpec::copy(self.args.spec.dtype);
        let es = self.args.esize;
        while let Some(task) = self.copies.get(t).copied() {
            let nchunks = task.bytes.div_ceil(self.chunk);
            while c < nchunks {
                if task.from_output {
                    let need = (seq << 32) | (c as u64 + 1);
                    if self.ctl(task.rank).progress.0[0].load(Ordering::Acquire) < need {
                        self.stage = Stage::Copy(t, c);
                        return false;
                    }
                }
                let off = c * self.chunk;
                let len = self.chunk.min(task.bytes - off);
                let base = if task.from_output {
                    self.outputs[task.rank]
                } else {
                    self.inputs[task.rank]
                };
                // SAFETY: ranges checked in plan(); a source equal to the destination (in place)
                // is skipped by the copy kernel.
                unsafe {
                    let src = base.add(task.src + off);
                    let dst = self.outputs[me].cast_mut().add(task.dst + off);
                    let s = Streams {
                        d0: self.args.stream_output,
                        d1: false,
                    };
                    copy_streaming(&spec, Transforms::default(), dst, None, src, len / es, s);
                }
                c += 1;
                *moved = true;
            }
            t += 1;
            c = 0;
        }
        true
    }
}

fn input_copy(rank: usize, src: usize, dst: usize, bytes: usize) -> CopyTask {
    CopyTask {
        rank,
        from_output: false,
        src,
        dst,
        bytes,
    }
}

/// `dst = post(pre(s₀) ⊕ pre(s₁) ⊕ …)` over `n` elements; only the last pass may stream (the
/// earlier ones are re-read at once).
///
/// # Safety
/// Every pointer valid for `n` elements; `dst` equal to `srcs[0]` or disjoint from every source.
unsafe fn reduce_chunk(
    spec: &ReduceSpec,
    dst: *mut u8,
    srcs: &[*const u8],
    n: usize,
    stream: bool,
) {
    let last = srcs.len() - 1;
    let s = |k: usize| Streams {
        d0: stream && k == last,
        d1: false,
    };
    let t = |k: usize| Transforms {
        pre: true,
        post: k == last,
    };
    // SAFETY (all calls): forwarded caller contract; later passes read dst back in place.
    unsafe {
        if spec.pre.is_some() || last == 0 {
            // The first operand of a kernel takes no `pre`: scale it alone first.
            copy(
                spec,
                Transforms {
                    pre: true,
                    post: last == 0,
                },
                dst,
                None,
                srcs[0],
                n,
            );
            for (k, &b) in srcs.iter().enumerate().skip(1) {
                reduce_with(spec, t(k), dst, None, dst, b, n, s(k));
            }
        } else {
            reduce_with(spec, t(1), dst, None, srcs[0], srcs[1], n, s(1));
            for (k, &b) in srcs.iter().enumerate().skip(2) {
                reduce_with(spec, t(k), dst, None, dst, b, n, s(k));
            }
        }
    }
}
