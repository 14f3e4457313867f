//! TCP sockets between hosts (NCCL's Socket net, internals §7.4).
//!
//! A connection carries the same slot FIFO as the memory transports, but each end keeps its own
//! [`NSLOTS`] slots in local memory and the bytes cross the wire. A connection uses
//! `NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD` data sockets (at least one); slot `s` travels on
//! socket `s % nsocks`, framed by an 8-byte header (`u32` byte count, `u32` low bits of the slot
//! sequence number, little endian). With zero helper threads the caller's progress loop drives the
//! non-blocking sockets; otherwise each helper thread owns a share of the sockets and sleeps in
//! `poll(2)` when it has nothing to do.

use std::cell::UnsafeCell;
use std::io::{IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::fifo::{NSLOTS, PeerState};

const FRAME_HEADER: usize = 8;

/// A slot buffer both the executor and socket threads touch, with accesses ordered by the
/// per-slot atomics of the shared state.
struct SlotMemory {
    bytes: UnsafeCell<Box<[u8]>>,
    slot_bytes: usize,
}

// SAFETY: a slot is written by exactly one side at a time; hand-over goes through the atomics.
unsafe impl Sync for SlotMemory {}
// SAFETY: plain memory.
unsafe impl Send for SlotMemory {}

impl SlotMemory {
    fn new(slot_bytes: usize) -> SlotMemory {
        SlotMemory {
            bytes: UnsafeCell::new(vec![0u8; NSLOTS * slot_bytes].into_boxed_slice()),
            slot_bytes,
        }
    }

    fn slot(&self, seq: u64) -> *mut u8 {
        let idx = (seq % NSLOTS as u64) as usize;
        // SAFETY: idx < NSLOTS, so the offset is in bounds.
        unsafe { (*self.bytes.get()).as_mut_ptr().add(idx * self.slot_bytes) }
    }
}

/// State shared between the executor and the socket streams of one connection end.
struct Shared {
    mem: SlotMemory,
    nsocks: usize,
    /// Sender: slots posted. Receiver: slots released (consumed) by the executor.
    counter: AtomicU64,
    /// Per slot: byte count + 1 once complete (sender: written to the socket; receiver: filled).
    state: [AtomicU64; NSLOTS],
    /// Sender: byte counts of posted slots.
    sizes: [AtomicU64; NSLOTS],
    /// First error a stream hit, in words.
    error: std::sync::Mutex<Option<String>>,
    failed: AtomicBool,
    shutdown: AtomicBool,
    /// Receiver: sockets that reached a clean end of stream. The peer is gone only once all
    /// have: with several sockets, one may close while another still carries the last frames.
    closed_socks: AtomicUsize,
}

impl Shared {
    fn new(slot_bytes: usize, nsocks: usize) -> Shared {
        Shared {
            mem: SlotMemory::new(slot_bytes),
            nsocks,
            counter: AtomicU64::new(0),
            state: std::array::from_fn(|_| AtomicU64::new(0)),
            sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            error: std::sync::Mutex::new(None),
            failed: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            closed_socks: AtomicUsize::new(0),
        }
    }

    fn fail(&self, msg: String) {
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if e.is_none() {
            *e = Some(msg);
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Receiver: every socket reached a clean end of stream.
    fn closed(&self) -> bool {
        self.closed_socks.load(Ordering::Acquire) >= self.nsocks
    }

    fn take_error(&self) -> Option<String> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Which direction a stream moves bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Send,
    Recv,
}

/// One socket of a connection and its position in the slot sequence.
struct Stream {
    sock: TcpStream,
    dir: Dir,
    /// Next slot sequence number this socket carries (index, index + nsocks, …).
    seq: u64,
    /// Bytes of the current frame (header included) done so far.
    done: usize,
    header: [u8; FRAME_HEADER],
    peer: String,
    /// Receiver: this socket reached a clean end of stream.
    eof: bool,
}

impl Stream {
    /// Moves as many bytes as the socket takes without blocking. Returns whether anything moved.
    fn progress(&mut self, sh: &Shared) -> Result<bool, String> {
        match self.dir {
            Dir::Send => self.progress_send(sh),
            Dir::Recv => self.progress_recv(sh),
        }
    }

    fn progress_send(&mut self, sh: &Shared) -> Result<bool, String> {
        let mut moved = false;
        loop {
            if self.seq >= sh.counter.load(Ordering::Acquire) {
                return Ok(moved);
            }
            let idx = (self.seq % NSLOTS as u64) as usize;
            let size = sh.sizes[idx].load(Ordering::Relaxed) as usize;
            if self.done == 0 {
                self.header[..4].copy_from_slice(&(size as u32).to_le_bytes());
                self.header[4..].copy_from_slice(&(self.seq as u32).to_le_bytes());
            }
            // SAFETY: the slot was posted (counter > seq) and is not reused until `state` says so.
            let data = unsafe { std::slice::from_raw_parts(sh.mem.slot(self.seq), size) };
            let r = if self.done < FRAME_HEADER {
                let bufs = [IoSlice::new(&self.header[self.done..]), IoSlice::new(data)];
                send_vectored(&self.sock, &bufs)
            } else {
                self.sock.write(&data[self.done - FRAME_HEADER..])
            };
            match r {
                Ok(0) => return Err(format!("connection to {} closed while sending", self.peer)),
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
                Err(e) => return Err(format!("sending to {}: {e}", self.peer)),
            }
        }
    }

    fn progress_recv(&mut self, sh: &Shared) -> Result<bool, String> {
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
                let size =
                    u32::from_le_bytes(self.header[..4].try_into().expect("4 bytes")) as usize;
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
                    sh.closed_socks.fetch_add(1, Ordering::AcqRel);
                    return Ok(moved);
                }
                Ok(0) => {
                    return Err(format!(
                        "{} closed the connection in the middle of a slot (it exited or aborted)",
                        self.peer
                    ));
                }
                Ok(n) => {
                    moved = true;
                    self.done += n;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(moved),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("receiving from {}: {e}", self.peer)),
            }
            if self.done < FRAME_HEADER {
                continue;
            }
            let size = u32::from_le_bytes(self.header[..4].try_into().expect("4 bytes")) as usize;
            let seq = u32::from_le_bytes(self.header[4..].try_into().expect("4 bytes"));
            if self.done == FRAME_HEADER && (size > sh.mem.slot_bytes || seq != self.seq as u32) {
                return Err(format!(
                    "malformed frame from {}: {size} bytes for slot {seq} (expected at most {} bytes for slot {})",
                    self.peer, sh.mem.slot_bytes, self.seq as u32
                ));
            }
            if self.done == FRAME_HEADER + size {
                let idx = (self.seq % NSLOTS as u64) as usize;
                sh.state[idx].store(size as u64 + 1, Ordering::Release);
                self.seq += sh.nsocks as u64;
                self.done = 0;
            }
        }
    }

    fn wants_poll(&self, sh: &Shared) -> Option<PollFlags> {
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
fn send_vectored(sock: &TcpStream, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
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

/// Sockets of an inline-driven connection end that have work waiting for readiness, with the
/// readiness they wait for (empty when helper threads drive the sockets).
fn interest(driver: &Driver, sh: &Shared) -> Vec<(std::os::fd::RawFd, PollFlags)> {
    use std::os::fd::AsRawFd;
    match driver {
        Driver::Inline(streams) => streams
            .iter()
            .filter_map(|s| s.wants_poll(sh).map(|f| (s.sock.as_raw_fd(), f)))
            .collect(),
        Driver::Threads { .. } => Vec::new(),
    }
}

/// Who drives a connection's sockets.
enum Driver {
    /// The executor calls [`Driver::progress`] from its loop.
    Inline(Vec<Stream>),
    /// Helper threads own the streams.
    Threads {
        handles: Vec<JoinHandle<()>>,
        wakers: Vec<Arc<Waker>>,
    },
}

/// Wakes a helper thread sleeping in `poll(2)`.
struct Waker {
    fd: EventFd,
    sleeping: AtomicBool,
}

impl Waker {
    fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            let _ = self.fd.write(1);
        }
    }
}

impl Driver {
    fn new(streams: Vec<Stream>, nthreads: usize, shared: &Arc<Shared>) -> Driver {
        if nthreads == 0 {
            return Driver::Inline(streams);
        }
        let mut groups: Vec<Vec<Stream>> = (0..nthreads).map(|_| Vec::new()).collect();
        for (i, s) in streams.into_iter().enumerate() {
            groups[i % nthreads].push(s);
        }
        let mut handles = Vec::new();
        let mut wakers = Vec::new();
        for group in groups.into_iter().filter(|g| !g.is_empty()) {
            let waker = Arc::new(Waker {
                fd: EventFd::from_value_and_flags(
                    0,
                    EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC,
                )
                .expect("eventfd"),
                sleeping: AtomicBool::new(false),
            });
            let (sh, wk) = (shared.clone(), waker.clone());
            let h = std::thread::Builder::new()
                .name("rnccl-socket".into())
                .spawn(move || helper_loop(group, &sh, &wk))
                .expect("spawn socket helper thread");
            handles.push(h);
            wakers.push(waker);
        }
        Driver::Threads { handles, wakers }
    }

    /// Wakes every helper thread (none when sockets are driven inline).
    fn wake(&self) {
        if let Driver::Threads { wakers, .. } = self {
            for w in wakers {
                w.wake();
            }
        }
    }

    fn progress(&mut self, sh: &Shared) -> Result<bool, String> {
        match self {
            Driver::Inline(streams) => {
                let mut moved = false;
                for s in streams {
                    moved |= s.progress(sh)?;
                }
                Ok(moved)
            }
            Driver::Threads { .. } => {
                self.wake();
                match sh.take_error() {
                    Some(e) => Err(e),
                    None => Ok(false),
                }
            }
        }
    }

    fn stop(&mut self, sh: &Shared) {
        if let Driver::Threads { handles, wakers } = self {
            sh.shutdown.store(true, Ordering::SeqCst);
            for w in wakers.iter() {
                let _ = w.fd.write(1);
            }
            for h in handles.drain(..) {
                let _ = h.join();
            }
        }
    }
}

fn helper_loop(mut streams: Vec<Stream>, sh: &Shared, waker: &Waker) {
    while !sh.shutdown.load(Ordering::SeqCst) {
        let mut moved = false;
        for s in &mut streams {
            match s.progress(sh) {
                Ok(m) => moved |= m,
                Err(e) => {
                    sh.fail(e);
                    return;
                }
            }
        }
        if moved {
            continue;
        }
        waker.sleeping.store(true, Ordering::SeqCst);
        let mut fds: Vec<PollFd> = streams
            .iter()
            .filter_map(|s| s.wants_poll(sh).map(|f| PollFd::new(s.sock.as_fd(), f)))
            .collect();
        fds.push(PollFd::new(waker.fd.as_fd(), PollFlags::POLLIN));
        if !sh.shutdown.load(Ordering::SeqCst) {
            let _ = poll(&mut fds, PollTimeout::from(50u16));
        }
        waker.sleeping.store(false, Ordering::SeqCst);
        let _ = waker.fd.read();
    }
}

/// Sets the options every data socket gets and makes it non-blocking.
pub fn prepare_socket(sock: &TcpStream) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    sock.set_nonblocking(true)
}

/// The sending end of a TCP connection.
pub struct TcpSender {
    shared: Arc<Shared>,
    driver: Driver,
    /// Slots fully handed to the kernel.
    completed: u64,
    posted: u64,
}

/// The shared slot state and the driver for one direction of a connection over `socks`
/// (stream `i` carries slots `i`, `i + nsocks`, …).
fn start(
    socks: Vec<TcpStream>,
    dir: Dir,
    slot_bytes: usize,
    nthreads: usize,
    peer: &str,
) -> (Arc<Shared>, Driver) {
    let shared = Arc::new(Shared::new(slot_bytes, socks.len()));
    let streams = socks
        .into_iter()
        .enumerate()
        .map(|(i, sock)| Stream {
            sock,
            dir,
            seq: i as u64,
            done: 0,
            header: [0; FRAME_HEADER],
            peer: peer.to_string(),
            eof: false,
        })
        .collect();
    let driver = Driver::new(streams, nthreads, &shared);
    (shared, driver)
}

impl TcpSender {
    /// Wraps connected, prepared sockets (index order = stream order) to `peer` (for messages).
    pub fn new(socks: Vec<TcpStream>, slot_bytes: usize, nthreads: usize, peer: &str) -> TcpSender {
        let (shared, driver) = start(socks, Dir::Send, slot_bytes, nthreads, peer);
        TcpSender {
            shared,
            driver,
            completed: 0,
            posted: 0,
        }
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.shared.mem.slot_bytes
    }

    fn reap(&mut self) {
        while self.completed < self.posted {
            let idx = (self.completed % NSLOTS as u64) as usize;
            if self.shared.state[idx].load(Ordering::Acquire) == 0 {
                break;
            }
            self.shared.state[idx].store(0, Ordering::Relaxed);
            self.completed += 1;
        }
    }

    /// The next free slot, or `None` while all slots wait for the socket.
    pub fn acquire(&mut self) -> Option<*mut u8> {
        if self.posted - self.completed >= NSLOTS as u64 {
            self.reap();
            if self.posted - self.completed >= NSLOTS as u64 {
                return None;
            }
        }
        Some(self.shared.mem.slot(self.posted))
    }

    /// Queues the acquired slot with `nbytes` of data for sending.
    pub fn post(&mut self, nbytes: usize) {
        let idx = (self.posted % NSLOTS as u64) as usize;
        self.shared.sizes[idx].store(nbytes as u64, Ordering::Relaxed);
        self.posted += 1;
        self.shared.counter.store(self.posted, Ordering::SeqCst);
        self.driver.wake();
    }

    /// Drives the sockets. Errors: the socket failed or the peer went away.
    pub fn progress(&mut self) -> Result<bool, String> {
        let moved = self.driver.progress(&self.shared)?;
        self.reap();
        Ok(moved)
    }

    /// True while posted slots have not all reached the kernel.
    pub fn pending(&self) -> bool {
        self.completed < self.posted
    }

    /// Sockets waiting to become writable (see [`crate::exec::Waiter::idle_or_block`]).
    pub fn poll_interest(&self) -> Vec<(std::os::fd::RawFd, PollFlags)> {
        interest(&self.driver, &self.shared)
    }
}

impl Drop for TcpSender {
    fn drop(&mut self) {
        self.driver.stop(&self.shared);
    }
}

/// The receiving end of a TCP connection.
pub struct TcpReceiver {
    shared: Arc<Shared>,
    driver: Driver,
    released: u64,
}

impl TcpReceiver {
    /// Wraps accepted, prepared sockets (index order = stream order) from `peer`.
    pub fn new(
        socks: Vec<TcpStream>,
        slot_bytes: usize,
        nthreads: usize,
        peer: &str,
    ) -> TcpReceiver {
        let (shared, driver) = start(socks, Dir::Recv, slot_bytes, nthreads, peer);
        TcpReceiver {
            shared,
            driver,
            released: 0,
        }
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.shared.mem.slot_bytes
    }

    /// The oldest filled slot and its byte count, or `None` while it is still arriving.
    pub fn peek(&mut self) -> Option<(*const u8, usize)> {
        let idx = (self.released % NSLOTS as u64) as usize;
        match self.shared.state[idx].load(Ordering::Acquire) {
            0 => None,
            s => Some((
                self.shared.mem.slot(self.released).cast_const(),
                s as usize - 1,
            )),
        }
    }

    /// Frees the slot returned by the last [`TcpReceiver::peek`].
    pub fn release(&mut self) {
        let idx = (self.released % NSLOTS as u64) as usize;
        self.shared.state[idx].store(0, Ordering::Relaxed);
        self.released += 1;
        self.shared.counter.store(self.released, Ordering::SeqCst);
        self.driver.wake();
    }

    /// Drives the sockets. Errors: the socket failed, the peer closed mid-slot, or a frame was
    /// malformed.
    pub fn progress(&mut self) -> Result<bool, String> {
        self.driver.progress(&self.shared)
    }

    /// Whether the sender is still there: gone once its side closed and no filled slot remains.
    pub fn peer_state(&self) -> PeerState {
        if self.shared.closed() && self.peek_state() == 0 {
            PeerState::Gone
        } else {
            PeerState::Alive
        }
    }

    /// Sockets waiting to become readable (see [`crate::exec::Waiter::idle_or_block`]).
    pub fn poll_interest(&self) -> Vec<(std::os::fd::RawFd, PollFlags)> {
        if self.shared.closed() {
            return Vec::new();
        }
        interest(&self.driver, &self.shared)
    }

    fn peek_state(&self) -> u64 {
        self.shared.state[(self.released % NSLOTS as u64) as usize].load(Ordering::Acquire)
    }
}

impl Drop for TcpReceiver {
    fn drop(&mut self) {
        self.driver.stop(&self.shared);
    }
}

#[cfg(test)]
mod tests;
