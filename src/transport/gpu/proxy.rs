//! The proxy thread of GPU connections between hosts (NCCL's proxy for the NET transport): it
//! moves FIFO slots between this rank's FIFOs in host memory, which its GPU kernel reads and
//! writes exactly as it would a peer's on the same host, and the peers: over TCP sockets, or
//! over InfiniBand/RoCE ([`conn_ib`]), where the FIFO's slots are registered with the HCA and
//! written in place by RDMA, with no copy on either host.
//!
//! Unit of work: one pass over every connection of the communicator, round robin, then one
//! `poll(2)` over their sockets. Nothing blocks: the sockets are non-blocking, and while no
//! connection has moved anything for [`SPIN`] the thread sleeps in `poll(2)` at most
//! [`IDLE_SLEEP`] (the kernel's flags live in memory, which no file descriptor announces).
//! The proxy sees the FIFOs only as addresses ([`FifoAddrs`]), so tests drive it with ordinary
//! host memory and threads playing the kernel.
//!
//! **Sending end.** The kernel waits for `head >= s + 1 - NSLOTS`, writes slot `s % NSLOTS`,
//! stores `sizes[s % NSLOTS]`, fences and stores `tail = s + 1`. The proxy sees `tail` advance
//! and frames slot `s` onto socket `s % nsocks` (an 8-byte header — `u32` byte count, `u32` low
//! bits of `s`, little endian, as the CPU TCP transport frames its slots — then the bytes);
//! once the whole frame is in the socket it stores `head = s + 1`, so the kernel may reuse the
//! slot. Every posted slot is written as soon as its socket takes it: up to [`NSLOTS`] slots are
//! in flight, never one slot waiting for another's transfer.
//!
//! **Receiving end.** The proxy reads the frame of slot `s` from socket `s % nsocks` straight
//! into slot `s % NSLOTS` only once the kernel has freed it (`head >= s + 1 - NSLOTS`, head
//! being local memory here, written by this rank's kernel), then stores `sizes`, and `tail =
//! s + 1` with release ordering.
//!
//! **Flow control** is TCP's: a receiving proxy reads no frame it has no free slot for, so the
//! peer's socket fills and its writes stop. End to end, a connection holds up to `NSLOTS` slots
//! in the sender's FIFO, what the two sockets buffer, and `NSLOTS` slots in the receiver's.
//!
//! **Failures.** A socket error, a peer that closes in the middle of a frame, a malformed
//! frame, a peer that closes while this rank still has slots to send it, a peer that says it
//! aborted, or a connection with bytes to move that moves none for the stall timeout: the
//! proxy records an error naming the peer (rank, host, pid) and channel, raises the abort flag
//! the kernels poll (so a kernel waiting on the connection stops at once), tells every peer
//! it aborted, and exits. A peer that closes cleanly between frames is no error by itself (a
//! process may exit after its last send without destroying its communicator): the kernel's
//! own timeout covers a wait for data that will never come, and
//! [`Proxy::closed_without_goodbye`] lets its report say why. Raising the communicator's abort
//! flag (or the kernels') stops the proxy within a pass; so does [`Proxy::stop`], which says
//! goodbye to every peer first.

use std::collections::BTreeSet;
use std::io::{IoSlice, Read};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::conn::NSLOTS;
use crate::error::{Error, Result};
use crate::transport::tcp::framing::send_vectored;

mod conn;
mod conn_ib;
use conn::{Conn, Far};
pub(crate) use conn_ib::IbLink;

/// Slots per FIFO, as a sequence-number stride.
const SLOTS: u64 = NSLOTS as u64;
/// Bytes of a frame header (and of a goodbye record).
const HEADER: usize = 8;
/// The byte count that marks a goodbye record instead of a slot.
const BYE: u32 = u32::MAX;
/// Goodbye flag: the sender's communicator was aborted (or its proxy failed).
const BYE_ABORTED: u32 = 1;
/// How long the proxy keeps polling without sleeping after anything last moved.
pub(crate) const SPIN: Duration = Duration::from_millis(2);
/// Longest sleep in `poll(2)` once idle: the latency a newly posted slot may wait.
pub(crate) const IDLE_SLEEP: Duration = Duration::from_millis(1);
/// How long a stopping proxy tries to hand its goodbyes to full sockets.
const GOODBYE_WAIT: Duration = Duration::from_millis(100);

/// Where one end's FIFO lives: addresses in this process's memory (pinned host memory mapped
/// into the GPU, or any host memory in tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FifoAddrs {
    /// `u64`: slots posted (sending end: the kernel stores it; receiving end: the proxy does).
    pub tail: u64,
    /// `u64`: slots freed (sending end: the proxy stores it; receiving end: the kernel does).
    pub head: u64,
    /// `u64[NSLOTS]`: bytes in each slot.
    pub sizes: u64,
    /// `NSLOTS` slots of `slot_bytes` bytes each.
    pub slots: u64,
    /// Bytes per slot.
    pub slot_bytes: usize,
}

impl FifoAddrs {
    fn slot(&self, seq: u64) -> *mut u8 {
        let at = self.slots + (seq % SLOTS) * self.slot_bytes as u64;
        std::ptr::with_exposed_provenance_mut(at as usize)
    }
}

/// Which end of a connection this rank holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// This rank's kernel posts slots; the proxy sends them.
    Send,
    /// The proxy receives slots; this rank's kernel consumes them.
    Recv,
}

/// One connection end for the proxy to drive.
pub(crate) struct NetConn {
    /// Which end.
    pub side: Side,
    /// Its FIFO.
    pub fifo: FifoAddrs,
    /// Connected sockets in stream order (socket `i` carries slots `i`, `i + n`, …); none
    /// when `ib` carries the slots.
    pub socks: Vec<TcpStream>,
    /// The IB connection whose slots are this FIFO's, when the pair uses IB.
    pub ib: Option<IbLink>,
    /// The peer's communicator rank.
    pub peer: usize,
    /// The peer for messages: "rank 3 (host b, pid 812)".
    pub peer_name: String,
    /// The channel.
    pub channel: u16,
}

/// What the proxy watches and raises, shared with its communicator.
pub(crate) struct ProxyControl {
    /// The communicator's abort flag (raised by `ncclCommAbort` and its watchdogs).
    pub comm_abort: Arc<AtomicBool>,
    /// Address of the `u32` abort flag the kernels poll (host memory).
    pub kernel_abort: u64,
    /// How long a connection with bytes to move may move none before the proxy gives up.
    pub stall_timeout: Duration,
    /// This rank (names the thread).
    pub rank: usize,
}

/// Why the proxy stopped, kept until the communicator asks ([`Proxy::failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// A peer or the network failed.
    Remote(String),
    /// A connection made no progress for the stall timeout.
    Stalled {
        what: String,
        peer: String,
        after: Duration,
    },
    /// The FIFO protocol was broken on this side (a bug).
    Internal(String),
}

impl Failure {
    fn to_error(&self) -> Error {
        match self {
            Failure::Remote(m) => Error::Remote(m.clone()),
            Failure::Stalled { what, peer, after } => Error::Timeout {
                what: what.clone(),
                waited_for: peer.clone(),
                after: *after,
            },
            Failure::Internal(m) => Error::Internal(m.clone()),
        }
    }
}

/// State the proxy thread shares with its owner.
struct Shared {
    stop: AtomicBool,
    running: AtomicBool,
    failure: Mutex<Option<Failure>>,
    /// Peers whose sockets closed between frames without a goodbye.
    unannounced: Mutex<BTreeSet<usize>>,
    waker: EventFd,
}

/// The proxy thread of one communicator; stopped and joined on drop.
pub(crate) struct Proxy {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Starts the thread over `conns`.
    ///
    /// # Safety
    /// Every address in `conns` and `ctl.kernel_abort` stays valid until [`Proxy::stop`]
    /// returns or the proxy is dropped: FIFO flags 8-byte aligned and accessed by others only
    /// atomically, slots as the FIFO protocol allows, the abort flag 4-byte aligned.
    ///
    /// Errors: [`Error::System`] when the thread or its eventfd cannot be created.
    pub(crate) unsafe fn start(conns: Vec<NetConn>, ctl: ProxyControl) -> Result<Proxy> {
        let waker =
            EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
                .map_err(|e| {
                    Error::system(
                        "creating the GPU network proxy's eventfd (out of file descriptors? raise \
                     `ulimit -n`)",
                        e.into(),
                    )
                })?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            running: AtomicBool::new(true),
            failure: Mutex::new(None),
            unannounced: Mutex::new(BTreeSet::new()),
            waker,
        });
        let conns: Vec<Conn> = conns.into_iter().map(Conn::new).collect();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rnccl-proxy-{}", ctl.rank))
            .spawn(move || {
                let mut l = Loop {
                    conns,
                    ctl,
                    sh: &sh,
                };
                l.run();
                sh.running.store(false, Ordering::SeqCst);
            })
            .map_err(|e| Error::system("starting the GPU network proxy thread", e))?;
        Ok(Proxy {
            shared,
            thread: Some(thread),
        })
    }

    /// The error that stopped the proxy, if one did (not an abort from this side).
    ///
    /// Errors returned: [`Error::Remote`] naming the peer, host and channel when a socket
    /// failed, a peer closed mid-transfer or aborted; [`Error::Timeout`] when a connection
    /// stalled; [`Error::Internal`] when this rank's FIFO broke the protocol.
    pub(crate) fn failure(&self) -> Option<Error> {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(Failure::to_error)
    }

    /// Whether a connection failed (cheaper than building [`Proxy::failure`]'s error).
    pub(crate) fn failed(&self) -> bool {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Whether `peer` closed a connection between frames without saying goodbye (its process
    /// exited or was killed).
    pub(crate) fn closed_without_goodbye(&self, peer: usize) -> bool {
        self.shared
            .unannounced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&peer)
    }

    /// Whether the thread still moves data (false once it stopped, failed or saw an abort).
    #[cfg(test)]
    pub(crate) fn running(&self) -> bool {
        self.shared.running.load(Ordering::SeqCst)
    }

    /// Ends the current sleep at once (after a launch that posts slots, say).
    pub(crate) fn wake(&self) {
        let _ = self.shared.waker.write(1);
    }

    /// Says goodbye to every peer and joins the thread (idempotent).
    pub(crate) fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `u64` at `addr`.
///
/// # Safety
/// `addr` is 8-byte aligned and live, and others access it only atomically.
unsafe fn word<'a>(addr: u64) -> &'a AtomicU64 {
    let p = std::ptr::with_exposed_provenance_mut::<u64>(addr as usize);
    // SAFETY: the caller's contract is `AtomicU64::from_ptr`'s.
    unsafe { AtomicU64::from_ptr(p) }
}

/// The proxy thread's state.
struct Loop<'a> {
    conns: Vec<Conn>,
    ctl: ProxyControl,
    sh: &'a Shared,
}

impl Loop<'_> {
    fn kernel_abort(&self) -> &AtomicU32 {
        let p = std::ptr::with_exposed_provenance_mut::<u32>(self.ctl.kernel_abort as usize);
        // SAFETY: the flag is a live, aligned u32 that others access atomically
        // ([`Proxy::start`]).
        unsafe { AtomicU32::from_ptr(p) }
    }

    fn aborted(&self) -> bool {
        self.ctl.comm_abort.load(Ordering::Relaxed)
            || self.kernel_abort().load(Ordering::Relaxed) != 0
    }

    fn run(&mut self) {
        let mut last_moved = Instant::now();
        loop {
            if self.sh.stop.load(Ordering::SeqCst) {
                let aborted = self.aborted();
                self.goodbye(aborted);
                return;
            }
            if self.aborted() {
                self.goodbye(true);
                return;
            }
            let now = Instant::now();
            // SAFETY: the owner keeps every address live while the thread runs
            // ([`Proxy::start`]).
            let r = unsafe { self.pass(now, last_moved) };
            match r {
                Ok(true) => last_moved = now,
                Ok(false) => {}
                Err(f) => {
                    self.fail(f);
                    return;
                }
            }
        }
    }

    /// Records `f`, stops the kernels and tells every peer.
    fn fail(&mut self, f: Failure) {
        tracing::warn!(target: "rnccl::net", "GPU network proxy: {}", f.to_error());
        self.sh
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(f);
        self.kernel_abort().store(1, Ordering::Release);
        self.goodbye(true);
    }

    /// One pass over every connection, then one poll of their sockets.
    ///
    /// # Safety
    /// Every FIFO address is live ([`Proxy::start`]).
    unsafe fn pass(&mut self, now: Instant, last_moved: Instant) -> Result<bool, Failure> {
        let mut moved = false;
        for c in &mut self.conns {
            // SAFETY: forwarded contract.
            let m = unsafe {
                match (&c.ib, c.side) {
                    (Some(_), _) => c.pass_ib()?,
                    (None, Side::Send) => c.pass_send()?,
                    (None, Side::Recv) => c.publish()?,
                }
            };
            if m {
                c.last_moved = now;
                moved = true;
            }
        }
        // Which sockets to wait on, and for what.
        let mut want: Vec<(usize, usize, PollFlags)> = Vec::new();
        for (ci, c) in self.conns.iter().enumerate() {
            let head = match c.side {
                // SAFETY: forwarded contract.
                Side::Recv => unsafe { c.kernel_head() }?,
                Side::Send => 0,
            };
            for (k, s) in c.socks.iter().enumerate() {
                let mut f = PollFlags::empty();
                if s.far == Far::Open {
                    match c.side {
                        // A sending socket hears only a goodbye or the end of the stream.
                        Side::Send => f |= PollFlags::POLLIN,
                        Side::Recv if s.seq < head + SLOTS => f |= PollFlags::POLLIN,
                        Side::Recv => {}
                    }
                }
                if c.side == Side::Send && s.blocked && s.seq < c.tail {
                    f |= PollFlags::POLLOUT;
                }
                if !f.is_empty() {
                    want.push((ci, k, f));
                }
            }
        }
        let idle = !moved && now.duration_since(last_moved) > SPIN;
        let timeout = if idle {
            PollTimeout::try_from(IDLE_SLEEP).unwrap_or(PollTimeout::ZERO)
        } else {
            PollTimeout::ZERO
        };
        let ready: Vec<PollFlags> = {
            let mut fds: Vec<PollFd<'_>> = want
                .iter()
                .map(|&(ci, k, f)| PollFd::new(self.conns[ci].socks[k].stream.as_fd(), f))
                .collect();
            fds.push(PollFd::new(self.sh.waker.as_fd(), PollFlags::POLLIN));
            match poll(&mut fds, timeout) {
                Ok(_) => fds
                    .iter()
                    .map(|f| f.revents().unwrap_or(PollFlags::empty()))
                    .collect(),
                Err(nix::errno::Errno::EINTR) => vec![PollFlags::empty(); fds.len()],
                Err(e) => {
                    return Err(Failure::Internal(format!(
                        "poll(2) over the GPU network sockets failed: {e}"
                    )));
                }
            }
        };
        if ready.last().is_some_and(|f| !f.is_empty()) {
            let _ = self.sh.waker.read();
        }
        if !idle && !moved {
            std::thread::yield_now();
        }
        for (&(ci, k, _), r) in want.iter().zip(&ready) {
            if r.is_empty() {
                continue;
            }
            let c = &mut self.conns[ci];
            let mut m = false;
            match c.side {
                Side::Send => {
                    if r.intersects(PollFlags::POLLOUT | PollFlags::POLLERR | PollFlags::POLLHUP) {
                        c.socks[k].blocked = false;
                    }
                    if r.intersects(PollFlags::POLLIN | PollFlags::POLLERR | PollFlags::POLLHUP) {
                        m |= c.read_back(k)?;
                    }
                    // SAFETY: forwarded contract.
                    m |= unsafe { c.write_sock(k) }?;
                }
                Side::Recv => {
                    // SAFETY: forwarded contract.
                    m |= unsafe { c.read_sock(k) }?;
                }
            }
            if m {
                c.last_moved = now;
                moved = true;
            }
        }
        for c in &mut self.conns {
            if !c.busy() {
                c.last_moved = now;
            }
        }
        for c in &mut self.conns {
            if !c.noted && c.socks.iter().any(|s| s.far == Far::Eof) {
                c.noted = true;
                self.sh
                    .unannounced
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.peer);
            }
        }
        self.check_stalls(now)?;
        Ok(moved)
    }

    /// Fails a connection that had bytes to move and moved none for the stall timeout.
    fn check_stalls(&self, now: Instant) -> Result<(), Failure> {
        for c in &self.conns {
            if c.busy() && now.duration_since(c.last_moved) > self.ctl.stall_timeout {
                let (what, slot) = match c.side {
                    Side::Send => ("sending", c.head),
                    Side::Recv => ("receiving", c.tail),
                };
                return Err(Failure::Stalled {
                    what: format!(
                        "{what} slot {slot} on channel {} over {} (the GPU network proxy moved \
                         no byte of it)",
                        c.channel,
                        c.via()
                    ),
                    peer: c.peer_name.clone(),
                    after: self.ctl.stall_timeout,
                });
            }
        }
        Ok(())
    }

    /// Tells every peer this end is going (best effort, within [`GOODBYE_WAIT`]): a socket in
    /// the middle of a frame gets no goodbye, so its peer sees the frame cut short.
    fn goodbye(&mut self, aborted: bool) {
        let mut rec = [0u8; HEADER];
        rec[..4].copy_from_slice(&BYE.to_le_bytes());
        rec[4..].copy_from_slice(&(if aborted { BYE_ABORTED } else { 0 }).to_le_bytes());
        let deadline = Instant::now() + GOODBYE_WAIT;
        for c in &mut self.conns {
            for s in &mut c.socks {
                // A receiving socket's bytes are the sender's business: a goodbye on it goes
                // back the other way, where the sender reads only goodbyes.
                if c.side == Side::Send && s.done != 0 {
                    continue;
                }
                let mut sent = 0;
                while sent < HEADER && Instant::now() < deadline {
                    match send_vectored(&s.stream, &[IoSlice::new(&rec[sent..])]) {
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
                // Unread bytes at close turn it into a reset, which may discard what this end
                // still has queued for the peer: read them first.
                let mut sink = [0u8; 4096];
                while Instant::now() < deadline
                    && matches!((&s.stream).read(&mut sink), Ok(n) if n > 0)
                {}
            }
        }
    }
}
