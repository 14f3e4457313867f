//! One socket of a connection and its frames: slot `s` travels on socket `s % nsocks`, framed
//! by an 8-byte header (`u32` byte count, `u32` low bits of the slot sequence number, little
//! endian).

use std::io::{IoSlice, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;

use nix::poll::PollFlags;

use super::slots::Shared;
use crate::conn::NSLOTS;
use crate::transport::TransportError;

/// Bytes of a frame header.
pub(super) const FRAME_HEADER: usize = 8;

/// Which direction a stream moves bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    Send,
    Recv,
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
    peer: String,
    /// The far end's address (read at set-up: a failed socket no longer knows it).
    addr: String,
    /// Receiver: this socket reached a clean end of stream.
    eof: bool,
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
        Stream {
            sock,
            addr,
            dir,
            seq: index as u64,
            done: 0,
            header: [0; FRAME_HEADER],
            peer: peer.to_string(),
            eof: false,
        }
    }

    /// Moves as many bytes as the socket takes without blocking. Returns whether anything moved.
    ///
    /// Errors: [`TransportError`] when the socket fails, the peer closes mid-frame, or a frame
    /// is malformed.
    pub(super) fn progress(&mut self, sh: &Shared) -> Result<bool, TransportError> {
        match self.dir {
            Dir::Send => self.progress_send(sh),
            Dir::Recv => self.progress_recv(sh),
        }
    }

    fn progress_send(&mut self, sh: &Shared) -> Result<bool, TransportError> {
        let mut moved = false;
        loop {
            if self.seq >= sh.counter.load(Ordering::Acquire) {
                return Ok(moved);
            }
            let idx = (self.seq % NSLOTS as u64) as usize;
            let size = (sh.sizes[idx].load(Ordering::Relaxed) as usize).min(sh.mem.slot_bytes);
            if self.done == 0 {
                self.header[..4].copy_from_slice(&(size as u32).to_le_bytes());
                self.header[4..].copy_from_slice(&(self.seq as u32).to_le_bytes());
            }
            // SAFETY: the slot was posted (counter > seq) and is not reused until `state` says
            // so; size <= slot_bytes.
            let data = unsafe { std::slice::from_raw_parts(sh.mem.slot(self.seq), size) };
            let r = if self.done < FRAME_HEADER {
                let bufs = [IoSlice::new(&self.header[self.done..]), IoSlice::new(data)];
                send_vectored(&self.sock, &bufs)
            } else {
                self.sock.write(&data[self.done - FRAME_HEADER..])
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
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(moved),
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

    fn progress_recv(&mut self, sh: &Shared) -> Result<bool, TransportError> {
        let mut moved = false;
        if self.eof {
            return Ok(false);
        }
        loop {
            if self.seq >= sh.counter.load(Ordering::Acquire) + NSLOTS as u64 {
                return Ok(moved); // every slot this socket could fill is still full
            }
            let slot = sh.mem.slot(self.seq);
            let r = if self.done < FRAME_HEADER {
                self.sock.read(&mut self.header[self.done..])
            } else {
                let size = word(&self.header[..4]) as usize;
                // SAFETY: the slot is free (seq < released + NSLOTS) and size <= slot_bytes was
                // checked when the header completed.
                let buf = unsafe { std::slice::from_raw_parts_mut(slot, size) };
                self.sock.read(&mut buf[self.done - FRAME_HEADER..])
            };
            match r {
                Ok(0) if self.done == 0 => {
                    // A clean close between frames: fine unless more data is wanted later,
                    // which the receiver's peer_state reports once every socket has closed.
                    self.eof = true;
                    sh.socket_closed();
                    return Ok(moved);
                }
                Ok(0) => {
                    return Err(TransportError::Closed {
                        peer: self.peer.clone(),
                        when: "in the middle of a slot",
                    });
                }
                Ok(n) => {
                    moved = true;
                    self.done += n;
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
            if self.done < FRAME_HEADER {
                continue;
            }
            let size = word(&self.header[..4]) as usize;
            let seq = word(&self.header[4..]);
            if self.done == FRAME_HEADER && (size > sh.mem.slot_bytes || seq != self.seq as u32) {
                return Err(TransportError::Malformed {
                    peer: self.peer.clone(),
                    detail: format!(
                        "{size} bytes for slot {seq} (expected at most {} bytes for slot {})",
                        sh.mem.slot_bytes, self.seq as u32
                    ),
                });
            }
            if self.done == FRAME_HEADER + size {
                let idx = (self.seq % NSLOTS as u64) as usize;
                sh.state[idx].store(size as u64 + 1, Ordering::Release);
                self.seq += sh.nsocks as u64;
                self.done = 0;
            }
        }
    }

    /// What the socket waits for, when it has work waiting on readiness.
    pub(super) fn wants_poll(&self, sh: &Shared) -> Option<PollFlags> {
        match self.dir {
            Dir::Send if self.seq < sh.counter.load(Ordering::Acquire) => Some(PollFlags::POLLOUT),
            Dir::Recv
                if !self.eof && self.seq < sh.counter.load(Ordering::Acquire) + NSLOTS as u64 =>
            {
                Some(PollFlags::POLLIN)
            }
            _ => None,
        }
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
