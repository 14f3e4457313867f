//! A host model of the step interpreter (`kernels/interp.cu`), so GPU programs are checked
//! without a GPU: [`run`] decodes a device program's bytes exactly as the kernel reads them
//! ([`decode`]) and runs each lane in its own thread, as the kernel runs each in a thread
//! block, over host memory, with the kernel's Simple protocol (slot sizes, `tail`, `head`,
//! persistent step counters), its waits, abort flag, timeout and first-failure report
//! ([`sync`]), and the CPU backend's reductions for the element arithmetic.
//!
//! The unit of work is one lane's steps; a lane's piece loop, op switch and flag updates
//! mirror `run<T, OP>` line for line, so a change to the kernel belongs here too. A block's
//! threads and barriers collapse into one thread: what they compute together, it computes
//! alone. Only the waits block, and each gives up on abort or timeout.

mod decode;
pub(crate) mod ll;
pub(crate) mod registered;
pub(crate) mod send_recv;
pub(crate) mod sym;
mod sync;

pub(crate) use sync::{Waiting, report_field, word, word32};

use std::sync::atomic::Ordering;

use crate::device::cuda::abi::DevConn;
use decode::{Decoded, KernelOp, StepDesc};
use sync::{report, wait_at_least};

use crate::conn::NSLOTS;
use crate::device::cpu::reduce::{copy, reduce};
use crate::device::cuda::abi::{NO_CONN, Status};
use crate::device::{ReduceSpec, Transforms};
use crate::dtype::DataType;
use crate::error::Result;
use crate::redop::Combine;

/// Slots per FIFO, as the kernel counts them.
const SLOTS: u64 = NSLOTS as u64;

/// Runs `program` as the kernel `rnccl_interp_<dtype>_<combine>` would, launched for operation
/// `seq`: one thread per lane, returning once every lane has finished or
/// stopped. What went wrong, if anything, is in the program's report, as on the GPU; how far
/// the operation got is in the header's operation words (kernels/program.cuh).
///
/// # Safety
/// Every address in the program is a host pointer to live memory for as long as this runs:
/// buffers for the bytes its steps name, FIFOs of `NSLOTS × slot_bytes` bytes, and 8-byte
/// aligned flags, counters and report. Others (a peer's lanes, a test raising the abort flag)
/// may touch the flags and counters only atomically, and the buffers and slots only as the
/// protocol allows.
///
/// Errors: [`crate::error::Error::Internal`] when the program does not decode (see [`decode`]).
pub(crate) unsafe fn run(
    program: &[u8],
    dtype: DataType,
    combine: Combine,
    seq: u64,
) -> Result<()> {
    let p = decode::decode(program)?;
    let h = &p.header;
    let spec = h.spec(dtype, combine);
    std::thread::scope(|s| {
        for lane in 0..h.nlanes {
            let mut b = Block {
                p: &p,
                spec: &spec,
                lane,
                seq,
                sstep: 0,
                rstep: 0,
                sbytes: 0,
                rbytes: 0,
            };
            // SAFETY: the caller's contract covers every address the lane touches.
            s.spawn(move || unsafe { b.run() });
        }
    });
    Ok(())
}

/// A byte address as a pointer.
fn ptr(addr: u64) -> *mut u8 {
    std::ptr::with_exposed_provenance_mut(addr as usize)
}

/// One thread block: its lane and its state (`struct BlockState`).
struct Block<'a> {
    p: &'a Decoded,
    spec: &'a ReduceSpec,
    lane: u32,
    /// The operation's number.
    seq: u64,
    /// Slots posted on the step's send connection.
    sstep: u64,
    /// Slots consumed on the step's receive connection.
    rstep: u64,
    /// Bytes moved on the send connection, ever.
    sbytes: u64,
    /// Bytes moved on the receive connection, ever.
    rbytes: u64,
}

impl Block<'_> {
    fn conn(&self, ix: u16) -> &DevConn {
        &self.p.conns[usize::from(ix)]
    }

    /// Runs the lane's steps (`run<T, OP>`); stops at the first failed wait. Lane 0 says the
    /// operation started; the last lane to finish says it finished unless a later operation
    /// was said finished already (a replayed CUDA graph's kernel): `op_started`, `op_guard`,
    /// `op_finished`.
    ///
    /// # Safety
    /// As [`run`].
    unsafe fn run(&mut self) {
        let h = &self.p.header;
        // SAFETY: the header's operation words, finished count and the last operation said
        // finished (at `finished + 4`) are live (run's contract).
        let (ops, finished, said) =
            unsafe { (word(h.ops), word32(h.finished), word(h.finished + 4)) };
        if self.lane == 0 {
            ops.store(self.seq, Ordering::Relaxed);
        }
        let guard = said.load(Ordering::Relaxed);
        let lane = self.p.lanes[self.lane as usize];
        for i in lane.first..lane.first + lane.nsteps {
            let st = self.p.steps[i as usize];
            // SAFETY: forwarded contract.
            if unsafe { self.step(&st) }.is_err() {
                return;
            }
        }
        if finished.fetch_add(1, Ordering::AcqRel) == h.nlanes - 1 {
            finished.store(0, Ordering::Relaxed);
            if self.seq > guard {
                said.store(self.seq, Ordering::Relaxed);
                // SAFETY: as above, the second operation word.
                unsafe { word(h.ops + 8) }.store(self.seq, Ordering::Release);
            }
        }
    }

    /// One step: counters loaded, pieces moved, counters stored back.
    ///
    /// # Safety
    /// As [`run`].
    unsafe fn step(&mut self, st: &StepDesc) -> std::result::Result<(), Status> {
        // SAFETY: the connection's step counters are live `u64[2]` ([`run`]).
        unsafe {
            if st.send != NO_CONN {
                let c = self.conn(st.send).step;
                self.sstep = word(c).load(Ordering::Relaxed);
                self.sbytes = word(c + 8).load(Ordering::Relaxed);
            }
            if st.recv != NO_CONN {
                let c = self.conn(st.recv).step;
                self.rstep = word(c).load(Ordering::Relaxed);
                self.rbytes = word(c + 8).load(Ordering::Relaxed);
            }
        }
        let (pre, post) = (st.pre, st.post);
        let es = self.spec.dtype.size() as u64;
        if st.op == KernelOp::Copy {
            if st.src != st.dst || pre || post {
                // SAFETY: the step's buffers hold `bytes` bytes ([`run`]).
                unsafe { self.map1(st.dst, 0, st.src, st.bytes / es, pre, post) };
            }
            return Ok(());
        }
        let slot = self.p.header.slot_bytes;
        let (has_s, has_r) = (st.send != NO_CONN, st.recv != NO_CONN);
        let mut done = 0;
        while done < st.bytes {
            let n = slot.min(st.bytes - done);
            let cnt = n / es;
            let src = st.src.wrapping_add(done);
            let dst = st.dst.wrapping_add(done);
            if st.op == KernelOp::Exchange {
                // Send this piece of the buffer, then combine the peer's piece into it.
                // SAFETY: the piece lies in the buffer and the slots in their FIFOs ([`run`]);
                // the waits make the slots this block's until posted or freed.
                unsafe {
                    self.wait_slot(st, false, true, n)?;
                    let cs = *self.conn(st.send);
                    self.map1(slot_of(&cs, self.sstep, slot), 0, dst, cnt, false, false);
                    self.post_send(&cs, n);
                    self.wait_slot(st, true, false, n)?;
                    // Lower rank's piece ⊕ higher rank's, the same bits on both sides.
                    let cr = *self.conn(st.recv);
                    let rs = slot_of(&cr, self.rstep, slot);
                    if self.p.header.rank < cr.peer {
                        self.map2(dst, 0, dst, rs, cnt, false, false);
                    } else {
                        self.map2(dst, 0, rs, dst, cnt, false, false);
                    }
                    self.free_recv(&cr, n);
                }
                done += n;
                continue;
            }
            // SAFETY: as for the exchange.
            unsafe { self.wait_slot(st, has_r, has_s, n)? };
            let ss = if has_s {
                slot_of(self.conn(st.send), self.sstep, slot)
            } else {
                0
            };
            let rs = if has_r {
                slot_of(self.conn(st.recv), self.rstep, slot)
            } else {
                0
            };
            // SAFETY: as for the exchange; decoding checked that every address an op uses is
            // there, so none of these is 0.
            unsafe {
                match st.op {
                    KernelOp::Send => self.map1(ss, 0, src, cnt, pre, post),
                    KernelOp::CopySend => {
                        let d1 = if dst != src { dst } else { 0 };
                        self.map1(ss, d1, src, cnt, pre, post);
                    }
                    KernelOp::Recv => self.map1(dst, 0, rs, cnt, pre, post),
                    KernelOp::RecvCopySend => self.map1(dst, ss, rs, cnt, pre, post),
                    KernelOp::RecvReduceSend => self.map2(ss, 0, rs, src, cnt, pre, post),
                    KernelOp::RecvReduceCopy => self.map2(dst, 0, rs, src, cnt, pre, post),
                    KernelOp::RecvReduceCopySend => self.map2(dst, ss, rs, src, cnt, pre, post),
                    KernelOp::Copy | KernelOp::Exchange => {}
                }
                if has_s {
                    let c = *self.conn(st.send);
                    self.post_send(&c, n);
                }
                if has_r {
                    let c = *self.conn(st.recv);
                    self.free_recv(&c, n);
                }
            }
            done += n;
        }
        // SAFETY: as at the start of the step.
        unsafe {
            if st.send != NO_CONN {
                let c = self.conn(st.send).step;
                word(c).store(self.sstep, Ordering::Relaxed);
                word(c + 8).store(self.sbytes, Ordering::Relaxed);
            }
            if st.recv != NO_CONN {
                let c = self.conn(st.recv).step;
                word(c).store(self.rstep, Ordering::Relaxed);
                word(c + 8).store(self.rbytes, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Waits for what the next piece needs — the peer's data on `recv`, a free slot on `send`
    /// — and checks the received slot's size, reporting a failure (`wait_slot`).
    ///
    /// # Safety
    /// As [`run`].
    unsafe fn wait_slot(
        &self,
        st: &StepDesc,
        need_recv: bool,
        need_send: bool,
        n: u64,
    ) -> std::result::Result<(), Status> {
        let h = &self.p.header;
        if need_recv {
            let c = self.conn(st.recv);
            // SAFETY: the connection's flags and sizes are live ([`run`]).
            unsafe {
                let mut r = wait_at_least(word(c.tail), self.rstep + 1, h, word(c.bytes + 16));
                let size = word(c.sizes + 8 * (self.rstep % SLOTS));
                if r.is_ok() && size.load(Ordering::Relaxed) != n {
                    r = Err(Status::BadSize);
                }
                if let Err(e) = r {
                    report(h, e, self.lane, c, self.rstep + 1, Waiting::Data);
                    return Err(e);
                }
            }
        }
        if need_send && self.sstep + 1 > SLOTS {
            let c = self.conn(st.send);
            // SAFETY: as above.
            unsafe {
                let mark = word(c.bytes + 16);
                if let Err(e) = wait_at_least(word(c.head), self.sstep + 1 - SLOTS, h, mark) {
                    report(h, e, self.lane, c, self.sstep + 1, Waiting::Slot);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Publishes the slot just written (`post_send`): size, then `tail` with release.
    ///
    /// # Safety
    /// As [`run`].
    unsafe fn post_send(&mut self, c: &DevConn, n: u64) {
        // SAFETY: the connection's flags are live ([`run`]).
        unsafe {
            word(c.sizes + 8 * (self.sstep % SLOTS)).store(n, Ordering::Relaxed);
            word(c.tail).store(self.sstep + 1, Ordering::Release);
            self.sstep += 1;
            self.sbytes += n;
            word(c.bytes).store(self.sstep, Ordering::Relaxed);
            word(c.bytes + 8).store(self.sbytes, Ordering::Relaxed);
        }
    }

    /// Frees the slot just consumed (`free_recv`). The kernel's store of `head` follows a
    /// barrier of the block; here a release store orders the slot's reads before it.
    ///
    /// # Safety
    /// As [`run`].
    unsafe fn free_recv(&mut self, c: &DevConn, n: u64) {
        // SAFETY: the connection's flags are live ([`run`]).
        unsafe {
            word(c.head).store(self.rstep + 1, Ordering::Release);
            self.rstep += 1;
            self.rbytes += n;
            word(c.bytes).store(self.rstep, Ordering::Relaxed);
            word(c.bytes + 8).store(self.rbytes, Ordering::Relaxed);
        }
    }

    /// `d0[i]` (and `d1[i]` unless `d1` is 0) `= post(pre(b[i]))` over `count` elements
    /// (`map1`).
    ///
    /// # Safety
    /// The addresses are valid for `count` elements; a destination equals `b` or is disjoint.
    unsafe fn map1(&self, d0: u64, d1: u64, b: u64, count: u64, pre: bool, post: bool) {
        let t = Transforms { pre, post };
        let d1 = (d1 != 0).then(|| ptr(d1));
        // SAFETY: the caller's contract is `copy`'s.
        unsafe { copy(self.spec, t, ptr(d0), d1, ptr(b), count as usize) };
    }

    /// `d0[i]` (and `d1[i]` unless `d1` is 0) `= post(a[i] ⊕ pre(b[i]))` over `count`
    /// elements (`map2`).
    ///
    /// # Safety
    /// The addresses are valid for `count` elements; a destination equals `a` or `b` or is
    /// disjoint from both.
    #[allow(clippy::too_many_arguments)]
    unsafe fn map2(&self, d0: u64, d1: u64, a: u64, b: u64, count: u64, pre: bool, post: bool) {
        let t = Transforms { pre, post };
        let d1 = (d1 != 0).then(|| ptr(d1));
        // SAFETY: the caller's contract is `reduce`'s.
        unsafe { reduce(self.spec, t, ptr(d0), d1, ptr(a), ptr(b), count as usize) };
    }
}

/// The address of slot `step % NSLOTS` of `c`'s FIFO (`slot_of`).
fn slot_of(c: &DevConn, step: u64, slot_bytes: u64) -> u64 {
    c.fifo + (step % SLOTS) * slot_bytes
}
