//! A GPU connection between hosts over InfiniBand/RoCE, as the proxy drives it. The FIFO's
//! slots are the IB end's slots, registered in place ([`IbSender::with_slots`],
//! [`IbReceiver::with_slots`]), so slot `s` of the kernel's FIFO is slot `s` of the IB
//! connection and no byte is copied on either host (NCCL's NET/IB without GPUDirect RDMA,
//! whose buffers are host memory the GPU writes and the HCA reads).
//!
//! **Sending end.** Each slot the kernel posts (`tail` advances) is posted to the IB sender
//! with the size the kernel stored; it goes out once the receiver's clear-to-send entry for it
//! has arrived. `head` follows the slots whose RDMA writes completed, so the kernel reuses a
//! slot only once the HCA has read it.
//!
//! **Receiving end.** The IB receiver offers a slot (a clear-to-send entry) only once the
//! kernel has freed it (`head`), which is the flow control; a slot whose every piece arrived
//! is published to the kernel with its size and `tail`, in order, without waiting for earlier
//! slots to be freed.
//!
//! **Failures.** A work request that fails (the peer exited, the link or route broke), a port
//! that leaves ACTIVE, or a sender that moves nothing for the stall timeout: the proxy fails as
//! for TCP, naming the peer, the port and the channel. IB has no goodbye: a peer learns of
//! this end's failure from its own next write (retry counter exceeded) or its deadline.

use super::*;
use crate::transport::ib::{IbReceiver, IbSender};
use crate::transport::{RecvEnd, SendEnd, TransportError};

/// The IB end of a GPU connection between hosts.
pub(crate) enum IbLink {
    /// Sends this rank's FIFO slots.
    Send(Box<IbSender>),
    /// Receives into this rank's FIFO slots.
    Recv(Box<IbReceiver>),
}

impl IbLink {
    /// The local port (`mlx5_0:1`).
    pub(crate) fn port(&self) -> String {
        match self {
            IbLink::Send(s) => s.port(),
            IbLink::Recv(r) => r.port(),
        }
    }
}

impl Conn {
    fn ib_failure(&self, e: &TransportError) -> Failure {
        Failure::Remote(format!("channel {}: {e}", self.channel))
    }

    /// One pass over an IB connection: the kernel's new posts (sending end) or frees
    /// (receiving end), the completions, then `head` or `tail` for the kernel.
    ///
    /// # Safety
    /// The FIFO's addresses are live ([`Proxy::start`]).
    pub(super) unsafe fn pass_ib(&mut self) -> Result<bool, Failure> {
        match self.side {
            // SAFETY: forwarded contract.
            Side::Send => unsafe { self.pass_ib_send() },
            // SAFETY: forwarded contract.
            Side::Recv => unsafe { self.pass_ib_recv() },
        }
    }

    /// # Safety
    /// As [`Conn::pass_ib`].
    unsafe fn pass_ib_send(&mut self) -> Result<bool, Failure> {
        let fifo = self.fifo;
        // SAFETY: the FIFO's flags are live ([`Proxy::start`]).
        let tail = unsafe { word(fifo.tail) }.load(Ordering::Acquire);
        if tail > self.head + SLOTS {
            return Err(Failure::Internal(format!(
                "the GPU kernel posted slot {tail} on channel {} to {} while only {} were \
                 freed: it broke the FIFO protocol",
                self.channel, self.peer_name, self.head
            )));
        }
        let mut moved = false;
        while self.tail < tail {
            let idx = self.tail % SLOTS;
            // SAFETY: `sizes` is live; the kernel stored this slot's size before its tail.
            let size = unsafe { word(fifo.sizes + 8 * idx) }.load(Ordering::Relaxed);
            if size > fifo.slot_bytes as u64 {
                return Err(Failure::Internal(format!(
                    "the GPU kernel posted {size} bytes in a {}-byte slot on channel {} to {}",
                    fifo.slot_bytes, self.channel, self.peer_name
                )));
            }
            if let Some(IbLink::Send(ib)) = &mut self.ib {
                ib.post(size as usize);
            }
            self.tail += 1;
            moved = true;
        }
        let Some(IbLink::Send(ib)) = &mut self.ib else {
            return Ok(moved);
        };
        let progress = ib.progress();
        let done = ib.completed();
        moved |= progress.map_err(|e| self.ib_failure(&e))?;
        if done > self.head {
            self.head = done;
            // SAFETY: as above.
            unsafe { word(fifo.head) }.store(done, Ordering::Release);
            moved = true;
        }
        Ok(moved)
    }

    /// # Safety
    /// As [`Conn::pass_ib`].
    unsafe fn pass_ib_recv(&mut self) -> Result<bool, Failure> {
        let fifo = self.fifo;
        // SAFETY: forwarded contract.
        let freed = unsafe { self.kernel_head() }?;
        let Some(IbLink::Recv(ib)) = &mut self.ib else {
            return Ok(false);
        };
        let mut moved = false;
        // `head` here counts the slots handed back to the IB receiver, to be offered again.
        while self.head < freed {
            ib.release();
            self.head += 1;
            moved = true;
        }
        let progress = ib.progress();
        let arrived = ib.arrived();
        while self.tail < arrived {
            let idx = self.tail % SLOTS;
            let size = ib.arrived_bytes(self.tail) as u64;
            // SAFETY: the FIFO's flags are live ([`Proxy::start`]); the slot's bytes landed
            // before its completion, and the release store of `tail` publishes them.
            unsafe {
                word(fifo.sizes + 8 * idx).store(size, Ordering::Relaxed);
                word(fifo.tail).store(self.tail + 1, Ordering::Release);
            }
            self.tail += 1;
            moved = true;
        }
        moved |= progress.map_err(|e| self.ib_failure(&e))?;
        Ok(moved)
    }
}
