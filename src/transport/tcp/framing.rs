//! One socket of a connection and its frames: slot `s` travels on socket `s % nsocks`, framed
//! by an 8-byte header (`u32` byte count, `u32` low bits of the slot sequence number, little
//! endian), then its bytes. The sender writes a frame with one `sendmsg(2)`; the receiver reads
//! a header into its read-ahead buffer ([`ReadAhead`]), which takes a small frame's bytes (and
//! the start of the next frame) in the same `read(2)`: a small message crosses with one send
//! and one receive. A large frame's bytes past the buffer go straight into the slot.
//!
//! **Goodbyes.** An end that goes tells its far end on every socket with a goodbye record: a
//! header whose byte count is [`BYE`] and whose second word says whether it aborted
//! ([`BYE_ABORTED`]). A sending end writes it after its last whole frame (a socket in the middle
//! of a frame gets none: the peer sees the frame cut short); a receiving end writes it back on
//! the sockets it reads, where a sender reads nothing else. A receiver takes a clean goodbye as
//! the end of that socket's stream, an aborted one as the peer's failure; an end of stream
//! between frames without a goodbye is remembered (the peer's process exited or was killed) and
//! is no error by itself. A sender reads its sockets back only when a write would block and now
//! and then while idle: a goodbye after an abort fails it, as does its far end going away while
//! it still has slots to send.

use std::io::{IoSlice, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::poll::PollFlags;

use super::slots::Shared;
use crate::conn::NSLOTS;
use crate::transport::TransportError;

/// Bytes of a frame header (and of a goodbye record).
pub(super) const FRAME_HEADER: usize = 8;
/// The byte count that marks a goodbye record instead of a slot.
pub(super) const BYE: u32 = u32::MAX;
/// Goodbye flag: the end's communicator was aborted (or its proxy failed).
pub(super) const BYE_ABORTED: u32 = 1;
/// A sending socket with nothing to send reads back once every this many idle passes.
const READ_BACK_EVERY: u32 = 64;
/// A receiving socket asks again for delayed acknowledgements every this many frames (see
/// [`Stream::delay_acks`]).
pub(super) const DELAY_ACKS_EVERY: u32 = 64;
/// Bytes of a receiving socket's read-ahead buffer: a header and the bytes of a frame up to
/// 4 KiB - 8 arrive in one `read(2)` (a large frame pays one extra copy of this much).
pub(super) const READ_AHEAD: usize = 4096;

/// Bytes a receiving socket read beyond what it has placed: `buf[at..len]`.
struct ReadAhead {
    buf: Box<[u8]>,
    at: usize,
    len: usize,
}

impl ReadAhead {
    fn new(bytes: usize) -> ReadAhead {
        ReadAhead {
            buf: vec![0; bytes].into_boxed_slice(),
            at: 0,
            len: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.at == self.len
    }

    /// One `read(2)` into the (empty) buffer.
    fn fill(&mut self, sock: &mut TcpStream) -> std::io::Result<usize> {
        debug_assert!(self.is_empty());
        self.at = 0;
        self.len = 0;
        let n = sock.read(&mut self.buf)?;
        self.len = n;
        Ok(n)
    }

    /// Copies up to `dst.len()` buffered bytes into `dst`; returns how many.
    fn take(&mut self, dst: &mut [u8]) -> usize {
        let n = dst.len().min(self.len - self.at);
        dst[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        n
    }
}

/// Which direction a stream moves bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    Send,
    Recv,
}

/// What a sending socket's far end said on the way back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Back {
    /// Nothing yet.
    Open,
    /// A clean goodbye, or an end of stream: nothing more will be read.
    Closed,
}

/// One socket of a connection and its position in the slot sequence.
pub(super) struct Stream {
    pub(super) sock: TcpStream,
    dir: Dir,
    /// Next slot sequence number this socket carries (index, index + nsocks, …).
    seq: u64,
    /// Bytes of the current frame (header included) done so far.
    done: usize,
    header: [u8; FRAME_HEADER],
    /// Receiver: bytes read but not placed yet (empty for a sender).
    ahead: ReadAhead,
    /// Receiver: where the current frame's bytes go, when the consumer asked for them in its
    /// memory ([`Shared::dests`]; 0: the slot).
    target: usize,
    peer: String,
    /// The far end's address (read at set-up: a failed socket no longer knows it).
    addr: String,
    /// Receiver: this socket reached a clean end of stream.
    eof: bool,
    /// Receiver: the last frame it finished came whole within one read-ahead buffer (a small
    /// message, whose next frame follows only once this one is consumed).
    small: bool,
    /// Sender: what came back, and the record coming back so far.
    back: Back,
    back_buf: [u8; FRAME_HEADER],
    back_done: usize,
    /// Sender: passes with nothing to send since the last read-back. Receiver: frames since
    /// it last asked for delayed acknowledgements.
    idle: u32,
}

fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Stream {
    /// Socket `index` of a connection with `peer` (for messages), moving slots `dir`.
    pub(super) fn new(sock: TcpStream, dir: Dir, index: usize, peer: &str) -> Stream {
        let addr = sock
            .peer_addr()
            .map_or_else(|_| "an unknown address".into(), |a| a.to_string());
        let stream = Stream {
            sock,
            addr,
            dir,
            seq: index as u64,
            done: 0,
            header: [0; FRAME_HEADER],
            ahead: ReadAhead::new(if dir == Dir::Recv { READ_AHEAD } else { 0 }),
            target: 0,
            peer: peer.to_string(),
            eof: false,
            small: false,
            back: Back::Open,
            back_buf: [0; FRAME_HEADER],
            back_done: 0,
            idle: 0,
        };
        if dir == Dir::Recv {
            stream.delay_acks();
        }
        stream
    }

    /// Puts a receiving socket's TCP acknowledgements in delayed mode (`TCP_QUICKACK` off,
    /// tcp(7)), as the kernel does by itself on a connection that carries data both ways.
    ///
    /// Why: a connection's bytes flow one way, so nothing carries its acknowledgements back
    /// but their own packets, and in quick mode the kernel sends one for every small frame from
    /// inside the `read(2)` that drains it, on the receiving rank's critical path. Delayed, it
    /// still acknowledges at least every second small segment (and every second full one), so
    /// the sender's window never waits on the delayed-ACK timer. Measured on a veth pair: a C
    /// exchange of 24-byte frames over one connection per direction took 9.4-9.8 µs per round
    /// with quick acknowledgements, 7.7-7.9 µs delayed (over one shared connection: 7.2 µs);
    /// a 2-rank 8 B all_reduce sends 1.5 packets per rank and operation instead of 2.
    ///
    /// The mode is not permanent (tcp(7)): the kernel leaves it when the delayed-ACK timer
    /// fires, so the receiver asks again every [`DELAY_ACKS_EVERY`] frames. Best effort: a
    /// socket that refuses keeps quick acknowledgements, which only costs time.
    fn delay_acks(&self) {
        let _ = socket2::SockRef::from(&self.sock).set_tcp_quickack(false);
    }

    /// Moves as many bytes as the socket takes without blocking. Returns whether anything moved.
    ///
    /// Errors: [`TransportError`] when the socket fails, the peer closes mid-frame (or goes
    /// while this end still has slots for it), says it aborted, or a frame is malformed.
    pub(super) fn progress(&mut self, sh: &Shared) -> Result<bool, TransportError> {
        match self.dir {
            Dir::Send => self.progress_send(sh),
            Dir::Recv => self.progress_recv(sh),
        }
    }

    /// Whether this socket receives slots.
    pub(super) fn receives(&self) -> bool {
        self.dir == Dir::Recv
    }

    /// The next slot sequence number this socket carries.
    pub(super) fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Whether a receiving socket reached the end of its stream (nothing more comes on it).
    pub(super) fn ended(&self) -> bool {
        self.eof
    }

    /// Whether the last frame this receiving socket finished was small (fit in its read-ahead
    /// buffer), so the frames on the connection's other sockets come one at a time too.
    pub(super) fn small_frames(&self) -> bool {
        self.small
    }

    /// Whether part of a frame has moved on this socket and the rest has not (a receiver's
    /// read-ahead holding the start of its next frame included).
    pub(super) fn mid_frame(&self) -> bool {
        self.done > 0 || !self.ahead.is_empty()
    }

    fn progress_send(&mut self, sh: &Shared) -> Result<bool, TransportError> {
        let mut moved = false;
        loop {
            if self.seq >= sh.counter.load(Ordering::Acquire) {
                self.idle += 1;
                if self.idle >= READ_BACK_EVERY {
                    self.idle = 0;
                    self.read_back(sh)?;
                }
                return Ok(moved);
            }
            self.idle = 0;
            let idx = (self.seq % NSLOTS as u64) as usize;
            let size = (sh.sizes[idx].load(Ordering::Relaxed) as usize).min(sh.mem.slot_bytes);
            if self.done == 0 {
                self.header[..4].copy_from_slice(&(size as u32).to_le_bytes());
                self.header[4..].copy_from_slice(&(self.seq as u32).to_le_bytes());
            }
            let from = match sh.sources[idx].load(Ordering::Relaxed) {
                0 => sh.mem.slot(self.seq).cast_const(),
                p => p as *const u8,
            };
            // SAFETY: the slot was posted (counter > seq) and neither it nor the caller's memory
            // it names (post_from's contract) changes until `state` says it left; size <=
            // slot_bytes.
            let data = unsafe { std::slice::from_raw_parts(from, size) };
            let r = if self.done < FRAME_HEADER {
                let bufs = [IoSlice::new(&self.header[self.done..]), IoSlice::new(data)];
                send_vectored(&self.sock, &bufs)
            } else {
                send_vectored(
                    &self.sock,
                    &[IoSlice::new(&data[self.done - FRAME_HEADER..])],
                )
            };
            match r {
                Ok(0) => {
                    return Err(TransportError::Closed {
                        peer: self.peer.clone(),
                        when: "while this rank was sending",
                    });
                }
                Ok(n) => {
                    moved = true;
                    self.done += n;
                    if self.done == FRAME_HEADER + size {
                        sh.state[idx].store(size as u64 + 1, Ordering::Release);
                        self.seq += sh.nsocks as u64;
                        self.done = 0;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    // The far end reads nothing: see whether it said why.
                    self.read_back(sh)?;
                    return Ok(moved);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(TransportError::tcp(
                        "sending to",
                        &self.peer,
                        &self.addr,
                        &e,
                    ));
                }
            }
        }
    }

    /// Reads what the far end of a sending socket said: a goodbye, an end of stream, an error.
    ///
    /// Errors: [`TransportError::Aborted`] for a goodbye after an abort;
    /// [`TransportError::Closed`] when the far end went while this end still has slots to send
    /// it; [`TransportError::Malformed`] for data on the way back.
    fn read_back(&mut self, sh: &Shared) -> Result<(), TransportError> {
        while self.back == Back::Open {
            match self.sock.read(&mut self.back_buf[self.back_done..]) {
                Ok(0) if self.back_done == 0 => self.back = Back::Closed,
                Ok(0) => {
                    return Err(TransportError::Closed {
                        peer: self.peer.clone(),
                        when: "in the middle of its goodbye",
                    });
                }
                Ok(n) => {
                    self.back_done += n;
                    if self.back_done < FRAME_HEADER {
                        continue;
                    }
                    self.back_done = 0;
                    if word(&self.back_buf[..4]) != BYE {
                        return Err(TransportError::Malformed {
                            peer: self.peer.clone(),
                            detail: "data on the receiving side of a connection (the ranks run \
                                     different rnccl versions)"
                                .into(),
                        });
                    }
                    if word(&self.back_buf[4..]) & BYE_ABORTED != 0 {
                        return Err(TransportError::Aborted {
                            peer: self.peer.clone(),
                        });
                    }
                    self.back = Back::Closed;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    return Ok(());
                }
                Err(e) => {
                    return Err(TransportError::tcp(
                        "talking to",
                        &self.peer,
                        &self.addr,
                        &e,
                    ));
                }
            }
        }
        if self.seq < sh.counter.load(Ordering::Acquire) {
            return Err(TransportError::Closed {
                peer: self.peer.clone(),
                when: "while this rank still had slots to send it",
            });
        }
        Ok(())
    }

    fn progress_recv(&mut self, sh: &Shared) -> Result<bool, TransportError> {
        let mut moved = false;
        if self.eof {
            return Ok(false);
        }
        loop {
            if self.seq >= sh.counter.load(Ordering::Acquire) + NSLOTS as u64 {
                return Ok(moved); // every slot this socket could fill is still full
            }
            let idx = (self.seq % NSLOTS as u64) as usize;
            // Where the frame's bytes go: the consumer's memory while it still asks for them
            // there (checked before every read: an operation that failed takes it back), else
            // the slot.
            let slot = if self.target != 0 && sh.dests[idx].load(Ordering::Acquire) == self.target {
                self.target as *mut u8
            } else {
                sh.mem.slot(self.seq)
            };
            // The frame's byte count, once its header is in (checked against the slot then).
            let size = (self.done >= FRAME_HEADER).then(|| word(&self.header[..4]) as usize);
            if self.ahead.is_empty() {
                // Nothing read ahead: a header comes into the read-ahead buffer (with a small
                // frame's bytes); the rest of a large frame's bytes go straight into the slot.
                let r = match size {
                    None => self.ahead.fill(&mut self.sock),
                    Some(size) => {
                        // SAFETY: the slot is free (seq < released + NSLOTS) and size <=
                        // slot_bytes was checked when the header completed; a consumer's
                        // destination takes at least size bytes (checked then too) and is
                        // the consumer's to lend until the slot is released or withdrawn.
                        let buf = unsafe { std::slice::from_raw_parts_mut(slot, size) };
                        self.sock.read(&mut buf[self.done - FRAME_HEADER..])
                    }
                };
                match r {
                    Ok(0) if self.done == 0 => {
                        // A close between frames: fine unless more data is wanted later, which
                        // the receiver's peer_state reports once the socket carrying the next
                        // wanted slot has closed.
                        self.eof = true;
                        sh.socket_closed((self.seq % sh.nsocks as u64) as usize, false);
                        return Ok(true);
                    }
                    Ok(0) => {
                        return Err(TransportError::Closed {
                            peer: self.peer.clone(),
                            when: "in the middle of a slot",
                        });
                    }
                    Ok(n) => {
                        moved = true;
                        if size.is_some() {
                            self.done += n;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(moved),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(TransportError::tcp(
                            "receiving from",
                            &self.peer,
                            &self.addr,
                            &e,
                        ));
                    }
                }
            }
            if !self.ahead.is_empty() {
                moved = true;
                self.done += match size {
                    None => self.ahead.take(&mut self.header[self.done..]),
                    Some(size) => {
                        // SAFETY: as above.
                        let buf = unsafe { std::slice::from_raw_parts_mut(slot, size) };
                        self.ahead.take(&mut buf[self.done - FRAME_HEADER..])
                    }
                };
            }
            if self.done < FRAME_HEADER {
                continue;
            }
            let size = word(&self.header[..4]);
            let seq = word(&self.header[4..]);
            if self.done == FRAME_HEADER && size == BYE && seq & !BYE_ABORTED == 0 {
                self.done = 0;
                if seq & BYE_ABORTED != 0 {
                    return Err(TransportError::Aborted {
                        peer: self.peer.clone(),
                    });
                }
                self.eof = true;
                sh.socket_closed((self.seq % sh.nsocks as u64) as usize, true);
                return Ok(true);
            }
            let size = size as usize;
            if self.done == FRAME_HEADER && (size > sh.mem.slot_bytes || seq != self.seq as u32) {
                return Err(TransportError::Malformed {
                    peer: self.peer.clone(),
                    detail: format!(
                        "{size} bytes for slot {seq} (expected at most {} bytes for slot {})",
                        sh.mem.slot_bytes, self.seq as u32
                    ),
                });
            }
            if self.done == FRAME_HEADER {
                // The consumer may have asked for this frame in its memory.
                let dest = sh.dests[idx].load(Ordering::Acquire);
                let room = sh.dest_lens[idx].load(Ordering::Relaxed);
                self.target = if dest != 0 && size <= room { dest } else { 0 };
            }
            if self.done == FRAME_HEADER + size {
                let at = sh.dests[idx].load(Ordering::Acquire);
                let landed = if self.target != 0 && at == self.target {
                    self.target
                } else {
                    0
                };
                self.target = 0;
                sh.landed[idx].store(landed, Ordering::Relaxed);
                sh.state[idx].store(size as u64 + 1, Ordering::Release);
                self.small = FRAME_HEADER + size <= READ_AHEAD;
                self.seq += sh.nsocks as u64;
                self.done = 0;
                self.idle += 1;
                if self.idle >= DELAY_ACKS_EVERY {
                    self.idle = 0;
                    self.delay_acks();
                }
                if self.ahead.is_empty() {
                    // The frame is whole and nothing more was read: the consumer comes first.
                    // A read now would mostly find nothing (a small message's reply cannot be
                    // here before this one is consumed) and cost a system call on its path;
                    // the next pass reads on.
                    return Ok(true);
                }
            }
        }
    }

    /// What the socket waits for, when it has work waiting on readiness: a sender, room for
    /// its next frame; a receiver, data it has a free slot for. A receiver whose read-ahead
    /// already holds such data waits for nothing: it asks for POLLOUT, which a connected
    /// socket reports at once, so the caller comes back to progress instead of sleeping.
    pub(super) fn wants_poll(&self, sh: &Shared) -> Option<PollFlags> {
        match self.dir {
            Dir::Send if self.seq < sh.counter.load(Ordering::Acquire) => Some(PollFlags::POLLOUT),
            Dir::Recv
                if !self.eof && self.seq < sh.counter.load(Ordering::Acquire) + NSLOTS as u64 =>
            {
                Some(if self.ahead.is_empty() {
                    PollFlags::POLLIN
                } else {
                    PollFlags::POLLOUT
                })
            }
            _ => None,
        }
    }

    /// Tells the far end this end is going (see the module's header), trying until `until`
    /// while the socket is full, then reads what the far end still sends (unread bytes at
    /// close would turn the close into a reset, which may discard what this end queued).
    pub(super) fn goodbye(&mut self, aborted: bool, until: Instant) {
        if self.dir == Dir::Send && self.done != 0 {
            return;
        }
        let mut rec = [0u8; FRAME_HEADER];
        rec[..4].copy_from_slice(&BYE.to_le_bytes());
        rec[4..].copy_from_slice(&(if aborted { BYE_ABORTED } else { 0 }).to_le_bytes());
        let mut sent = 0;
        while sent < FRAME_HEADER && Instant::now() < until {
            match send_vectored(&self.sock, &[IoSlice::new(&rec[sent..])]) {
                Ok(n) => sent += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(_) => break,
            }
        }
        let mut sink = [0u8; 4096];
        while Instant::now() < until && matches!(self.sock.read(&mut sink), Ok(n) if n > 0) {}
        let _ = self.sock.flush();
    }
}

/// `sendmsg(2)` with `MSG_NOSIGNAL`: a peer that closed yields `EPIPE`, never a SIGPIPE that
/// would kill a host program that did not ignore the signal.
pub(crate) fn send_vectored(sock: &TcpStream, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    nix::sys::socket::sendmsg::<()>(
        sock.as_raw_fd(),
        bufs,
        &[],
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(std::io::Error::from)
}
