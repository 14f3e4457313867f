//! One network connection as the proxy drives it ([`Conn`]): its FIFO in host memory, its
//! sockets and where each stands in the slot sequence, and the steps that move a sending
//! end's posted slots onto the sockets and a receiving end's frames into free slots.

use super::*;

/// What the far end said about one socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Far {
    /// Still open.
    Open,
    /// It said goodbye (and whether it had aborted).
    Bye { aborted: bool },
    /// It closed without a goodbye, between frames.
    Eof,
}

/// One socket and its place in the slot sequence.
pub(super) struct Sock {
    pub(super) stream: TcpStream,
    /// Next slot sequence number this socket carries.
    pub(super) seq: u64,
    /// Bytes of the current frame (header included) moved so far.
    pub(super) done: usize,
    pub(super) header: [u8; HEADER],
    pub(super) far: Far,
    /// Sending end: the last write would have blocked; wait for POLLOUT.
    pub(super) blocked: bool,
    /// Sending end: the far end's goodbye record, as far as it came.
    pub(super) back: [u8; HEADER],
    pub(super) back_done: usize,
}

/// One connection end and the proxy's progress on it.
pub(super) struct Conn {
    pub(super) side: Side,
    pub(super) fifo: FifoAddrs,
    pub(super) peer: usize,
    pub(super) peer_name: String,
    pub(super) channel: u16,
    pub(super) socks: Vec<Sock>,
    /// Sending end: slots the kernel posted. Receiving end: slots published to the kernel.
    pub(super) tail: u64,
    /// Sending end: `head` as last stored for the kernel. Receiving end over IB: slots handed
    /// back to the IB receiver.
    pub(super) head: u64,
    /// Receiving end: per slot, byte count + 1 of a frame received and not yet published.
    pub(super) filled: [u64; NSLOTS],
    /// When bytes last moved, or when the connection last had nothing to move.
    pub(super) last_moved: Instant,
    /// A socket's close without a goodbye was recorded in [`Shared`].
    pub(super) noted: bool,
    /// The IB connection carrying the slots instead of `socks`.
    pub(super) ib: Option<IbLink>,
}

impl Conn {
    pub(super) fn new(c: NetConn) -> Conn {
        let socks = c
            .socks
            .into_iter()
            .enumerate()
            .map(|(i, stream)| Sock {
                stream,
                seq: i as u64,
                done: 0,
                header: [0; HEADER],
                far: Far::Open,
                blocked: false,
                back: [0; HEADER],
                back_done: 0,
            })
            .collect();
        Conn {
            side: c.side,
            fifo: c.fifo,
            peer: c.peer,
            peer_name: c.peer_name,
            channel: c.channel,
            socks,
            tail: 0,
            head: 0,
            filled: [0; NSLOTS],
            last_moved: Instant::now(),
            noted: false,
            ib: c.ib,
        }
    }

    /// What carries the slots, for messages: "TCP", "IB (mlx5_0:1)".
    pub(super) fn via(&self) -> String {
        match &self.ib {
            Some(ib) => format!("IB ({})", ib.port()),
            None => "TCP".into(),
        }
    }

    pub(super) fn nsocks(&self) -> u64 {
        self.socks.len() as u64
    }

    pub(super) fn io_failure(&self, doing: &str, e: &std::io::Error) -> Failure {
        Failure::Remote(format!(
            "{doing} {} on channel {} over TCP failed: {e} (the peer exited, was killed or the \
             network broke; check that rank's own error and the link between the hosts)",
            self.peer_name, self.channel
        ))
    }

    pub(super) fn closed_failure(&self, when: &str) -> Failure {
        Failure::Remote(format!(
            "{} closed its TCP connection on channel {} {when} (it exited, was killed or \
             aborted; check that rank's own error)",
            self.peer_name, self.channel
        ))
    }

    pub(super) fn aborted_failure(&self) -> Failure {
        Failure::Remote(format!(
            "{} aborted its communicator (it said so on channel {}); see that rank's own error \
             for why",
            self.peer_name, self.channel
        ))
    }

    /// Whether bytes wait to move: slots posted and not yet sent, or a frame half received.
    pub(super) fn busy(&self) -> bool {
        match self.side {
            Side::Send => self.head < self.tail,
            // An IB slot arrives whole or not at all, as the proxy sees it.
            Side::Recv => self.socks.iter().any(|s| s.done > 0),
        }
    }

    /// The sending end's pass: new posts from the kernel, frames written while the sockets take
    /// them, and `head` for the slots wholly handed over.
    ///
    /// # Safety
    /// The FIFO's addresses are live ([`Proxy::start`]).
    pub(super) unsafe fn pass_send(&mut self) -> Result<bool, Failure> {
        // SAFETY: the FIFO's flags are live ([`Proxy::start`]).
        let tail = unsafe { word(self.fifo.tail) }.load(Ordering::Acquire);
        if tail > self.tail {
            if tail > self.head + SLOTS {
                return Err(Failure::Internal(format!(
                    "the GPU kernel posted slot {tail} on channel {} to {} while only {} were \
                     freed: it broke the FIFO protocol",
                    self.channel, self.peer_name, self.head
                )));
            }
            self.tail = tail;
        }
        let mut moved = false;
        for k in 0..self.socks.len() {
            // SAFETY: forwarded contract.
            moved |= unsafe { self.write_sock(k) }?;
        }
        let first_unsent = self
            .socks
            .iter()
            .map(|s| s.seq)
            .min()
            .unwrap_or(self.tail)
            .min(self.tail);
        if first_unsent > self.head {
            self.head = first_unsent;
            // SAFETY: as above.
            unsafe { word(self.fifo.head) }.store(self.head, Ordering::Release);
            moved = true;
        }
        Ok(moved)
    }

    /// Writes socket `k`'s posted frames until it would block.
    ///
    /// # Safety
    /// As [`Conn::pass_send`].
    pub(super) unsafe fn write_sock(&mut self, k: usize) -> Result<bool, Failure> {
        let mut moved = false;
        let nsocks = self.nsocks();
        loop {
            let (tail, fifo) = (self.tail, self.fifo);
            let s = &mut self.socks[k];
            if s.blocked || s.seq >= tail {
                return Ok(moved);
            }
            if s.far != Far::Open {
                let when = format!("while this rank still had slot {} to send it", s.seq);
                return Err(match s.far {
                    Far::Bye { aborted: true } => self.aborted_failure(),
                    _ => self.closed_failure(&when),
                });
            }
            let idx = s.seq % SLOTS;
            // SAFETY: `sizes` is live; the kernel stored this slot's size before its tail.
            let posted = unsafe { word(fifo.sizes + 8 * idx) }.load(Ordering::Relaxed);
            if posted > fifo.slot_bytes as u64 {
                return Err(Failure::Internal(format!(
                    "the GPU kernel posted {posted} bytes in a {}-byte slot on channel {} to {}",
                    fifo.slot_bytes, self.channel, self.peer_name
                )));
            }
            let size = posted as usize;
            if s.done == 0 {
                s.header[..4].copy_from_slice(&(size as u32).to_le_bytes());
                s.header[4..].copy_from_slice(&(s.seq as u32).to_le_bytes());
            }
            // SAFETY: slot `seq` is posted (seq < tail) and the kernel does not touch it again
            // until `head` passes it, which happens only once this frame is written; size <=
            // slot_bytes.
            let data = unsafe { std::slice::from_raw_parts(fifo.slot(s.seq), size) };
            let r = if s.done < HEADER {
                send_vectored(
                    &s.stream,
                    &[IoSlice::new(&s.header[s.done..]), IoSlice::new(data)],
                )
            } else {
                send_vectored(&s.stream, &[IoSlice::new(&data[s.done - HEADER..])])
            };
            match r {
                Ok(n) => {
                    moved = true;
                    s.done += n;
                    if s.done == HEADER + size {
                        s.done = 0;
                        s.seq += nsocks;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    s.blocked = true;
                    return Ok(moved);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_failure("sending to", &e)),
            }
        }
    }

    /// Reads what the far end of sending socket `k` said: a goodbye, an end of stream, an
    /// error.
    pub(super) fn read_back(&mut self, k: usize) -> Result<bool, Failure> {
        let s = &mut self.socks[k];
        if s.far != Far::Open {
            return Ok(false);
        }
        match (&s.stream).read(&mut s.back[s.back_done..]) {
            Ok(0) if s.back_done == 0 => s.far = Far::Eof,
            Ok(0) => return Err(self.closed_failure("in the middle of its goodbye")),
            Ok(n) => {
                s.back_done += n;
                if s.back_done == HEADER {
                    if word32_of(&s.back[..4]) != BYE {
                        return Err(Failure::Remote(format!(
                            "{} sent data on the receiving side of channel {}'s TCP \
                             connection: the ranks run different rnccl versions",
                            self.peer_name, self.channel
                        )));
                    }
                    s.far = Far::Bye {
                        aborted: word32_of(&s.back[4..]) & BYE_ABORTED != 0,
                    };
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                return Ok(false);
            }
            Err(e) => return Err(self.io_failure("talking to", &e)),
        }
        if s.far == (Far::Bye { aborted: true }) {
            return Err(self.aborted_failure());
        }
        Ok(true)
    }

    /// The receiving end's pass: frames that completed, published to the kernel in order.
    ///
    /// # Safety
    /// As [`Conn::pass_send`].
    pub(super) unsafe fn publish(&mut self) -> Result<bool, Failure> {
        let mut moved = false;
        loop {
            let idx = (self.tail % SLOTS) as usize;
            if self.filled[idx] == 0 {
                return Ok(moved);
            }
            let size = self.filled[idx] - 1;
            self.filled[idx] = 0;
            // SAFETY: the FIFO's flags are live ([`Proxy::start`]); the slot's bytes were
            // written before, and the release store of `tail` publishes them with `sizes`.
            unsafe {
                word(self.fifo.sizes + 8 * idx as u64).store(size, Ordering::Relaxed);
                word(self.fifo.tail).store(self.tail + 1, Ordering::Release);
            }
            self.tail += 1;
            moved = true;
        }
    }

    /// The slots the kernel has freed (`head`), checked against what was published.
    ///
    /// # Safety
    /// As [`Conn::pass_send`].
    pub(super) unsafe fn kernel_head(&self) -> Result<u64, Failure> {
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

    /// Reads socket `k`'s frames into free slots until it would block.
    ///
    /// # Safety
    /// As [`Conn::pass_send`].
    pub(super) unsafe fn read_sock(&mut self, k: usize) -> Result<bool, Failure> {
        // SAFETY: forwarded contract.
        let head = unsafe { self.kernel_head() }?;
        let nsocks = self.nsocks();
        let (fifo, channel) = (self.fifo, self.channel);
        let mut moved = false;
        loop {
            let s = &mut self.socks[k];
            if s.far != Far::Open || s.seq >= head + SLOTS {
                return Ok(moved);
            }
            let r = if s.done < HEADER {
                (&s.stream).read(&mut s.header[s.done..])
            } else {
                let size = word32_of(&s.header[..4]) as usize;
                // SAFETY: the slot is free (seq < head + NSLOTS: the kernel freed its previous
                // use and has not been told of this one), and size <= slot_bytes was checked
                // when the header completed.
                let buf = unsafe { std::slice::from_raw_parts_mut(fifo.slot(s.seq), size) };
                (&s.stream).read(&mut buf[s.done - HEADER..])
            };
            match r {
                Ok(0) if s.done == 0 => {
                    s.far = Far::Eof;
                    return Ok(true);
                }
                Ok(0) => return Err(self.closed_failure("in the middle of a slot")),
                Ok(n) => {
                    moved = true;
                    s.done += n;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(moved),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_failure("receiving from", &e)),
            }
            if s.done < HEADER {
                continue;
            }
            let size = word32_of(&s.header[..4]);
            let tag = word32_of(&s.header[4..]);
            if s.done == HEADER {
                if size == BYE {
                    s.done = 0;
                    s.far = Far::Bye {
                        aborted: tag & BYE_ABORTED != 0,
                    };
                    if tag & BYE_ABORTED != 0 {
                        return Err(self.aborted_failure());
                    }
                    return Ok(true);
                }
                if size as usize > fifo.slot_bytes || tag != s.seq as u32 {
                    return Err(Failure::Remote(format!(
                        "{} sent a malformed frame on channel {channel}: {size} bytes for slot \
                         {tag} where at most {} bytes for slot {} were due (the ranks disagree \
                         on NCCL_BUFFSIZE or run different rnccl versions)",
                        self.peer_name, fifo.slot_bytes, s.seq as u32
                    )));
                }
            }
            if s.done == HEADER + size as usize {
                self.filled[(s.seq % SLOTS) as usize] = u64::from(size) + 1;
                s.seq += nsocks;
                s.done = 0;
            }
        }
    }
}

pub(super) fn word32_of(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}
