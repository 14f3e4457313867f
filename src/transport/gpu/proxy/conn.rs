//! One network connection as the proxy drives it ([`Conn`]): its FIFO in host memory, its end
//! (TCP or IB, over the FIFO's slots in place) and where the two stand in the slot sequence.

use super::*;
use crate::transport::PollInterest;

/// One connection end and the proxy's progress on it.
pub(super) struct Conn {
    pub(super) fifo: FifoAddrs,
    pub(super) link: Link,
    pub(super) peer: usize,
    pub(super) peer_name: String,
    pub(super) channel: u16,
    /// Sending end: slots the kernel posted (and the proxy posted to the end). Receiving end:
    /// slots published to the kernel.
    pub(super) tail: u64,
    /// Sending end: `head` as last stored for the kernel. Receiving end: slots handed back to
    /// the end.
    pub(super) head: u64,
    /// When bytes last moved, or when the connection last had nothing to move.
    pub(super) last_moved: Instant,
    /// A close without a goodbye was recorded in [`Shared`].
    pub(super) noted: bool,
    /// Receiving end: every socket of the end is watched by the proxy's epoll
    /// ([`InPlaceRecv::data_sockets`]), so the end is driven only when [`Conn::readable`].
    pub(super) gated: bool,
    /// Receiving end: one of its sockets was readable at this pass's start.
    pub(super) readable: bool,
}

impl Conn {
    pub(super) fn new(c: NetConn) -> Conn {
        Conn {
            fifo: c.fifo,
            link: c.link,
            peer: c.peer,
            peer_name: c.peer_name,
            channel: c.channel,
            tail: 0,
            head: 0,
            last_moved: Instant::now(),
            noted: false,
            gated: false,
            readable: false,
        }
    }

    /// The end's failure, naming the channel and what carries it.
    fn failure(&self, e: &TransportError) -> Failure {
        Failure::Remote(format!(
            "{e} (channel {} over {})",
            self.channel,
            self.link.via()
        ))
    }

    /// Whether bytes wait to move: slots posted and not yet handed over, or a slot half
    /// received.
    pub(super) fn busy(&self) -> bool {
        match &self.link {
            Link::Send(_) => self.head < self.tail,
            Link::Recv(r) => r.receiving(),
        }
    }

    /// Whether the peer closed between slots without a goodbye.
    pub(super) fn closed_without_goodbye(&self) -> bool {
        match &self.link {
            Link::Send(_) => false,
            Link::Recv(r) => r.closed_without_goodbye(),
        }
    }

    /// The sockets the end waits on.
    pub(super) fn poll_interest(&self) -> Vec<PollInterest> {
        match &self.link {
            Link::Send(s) => s.poll_interest(),
            Link::Recv(r) => r.poll_interest(),
        }
    }

    /// Tells the peer this end is going.
    pub(super) fn goodbye(&mut self, aborted: bool) {
        match &mut self.link {
            Link::Send(s) => s.goodbye(aborted),
            Link::Recv(r) => r.goodbye(aborted),
        }
    }

    /// One pass: the kernel's new posts (sending end) or frees (receiving end), the end's
    /// progress, then `head` or `tail` for the kernel.
    ///
    /// # Safety
    /// The FIFO's addresses are live ([`Proxy::start`]).
    pub(super) unsafe fn pass(&mut self) -> Result<bool, Failure> {
        match self.link {
            // SAFETY: forwarded contract.
            Link::Send(_) => unsafe { self.pass_send() },
            // SAFETY: forwarded contract.
            Link::Recv(_) => unsafe { self.pass_recv() },
        }
    }

    /// # Safety
    /// As [`Conn::pass`].
    unsafe fn pass_send(&mut self) -> Result<bool, Failure> {
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
        let Link::Send(end) = &mut self.link else {
            return Ok(false);
        };
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
            end.post(size as usize);
            self.tail += 1;
            moved = true;
        }
        let progress = end.progress();
        let done = end.completed();
        moved |= progress.map_err(|e| self.failure(&e))?;
        if done > self.head {
            self.head = done;
            // SAFETY: as above.
            unsafe { word(fifo.head) }.store(done, Ordering::Release);
            moved = true;
        }
        Ok(moved)
    }

    /// The slots the kernel has freed (`head`), checked against what was published.
    ///
    /// # Safety
    /// As [`Conn::pass`].
    unsafe fn kernel_head(&self) -> Result<u64, Failure> {
        // SAFETY: the FIFO's flags are live ([`Proxy::start`]).
        let head = unsafe { word(self.fifo.head) }.load(Ordering::Acquire);
        if head > self.tail {
            return Err(Failure::Internal(format!(
                "the GPU kernel freed slot {head} on channel {} from {} while only {} had \
                 arrived: it broke the FIFO protocol",
                self.channel, self.peer_name, self.tail
            )));
        }
        Ok(head)
    }

    /// # Safety
    /// As [`Conn::pass`].
    unsafe fn pass_recv(&mut self) -> Result<bool, Failure> {
        let fifo = self.fifo;
        // SAFETY: forwarded contract.
        let freed = unsafe { self.kernel_head() }?;
        let Link::Recv(end) = &mut self.link else {
            return Ok(false);
        };
        let mut moved = false;
        // `head` here counts the slots handed back to the end, to be filled again.
        while self.head < freed {
            end.release();
            self.head += 1;
            moved = true;
        }
        // A gated end with nothing readable and no slot part-way in has nothing to read: its
        // reads would each be a system call answering EAGAIN.
        let progress = if !self.gated || self.readable || end.receiving() {
            end.progress()
        } else {
            Ok(false)
        };
        let arrived = end.arrived();
        while self.tail < arrived {
            let idx = self.tail % SLOTS;
            let size = end.arrived_bytes(self.tail) as u64;
            // SAFETY: the FIFO's flags are live ([`Proxy::start`]); the slot's bytes landed
            // before the end reported it arrived, and the release store of `tail` publishes
            // them.
            unsafe {
                word(fifo.sizes + 8 * idx).store(size, Ordering::Relaxed);
                word(fifo.tail).store(self.tail + 1, Ordering::Release);
            }
            self.tail += 1;
            moved = true;
        }
        moved |= progress.map_err(|e| self.failure(&e))?;
        Ok(moved)
    }
}
