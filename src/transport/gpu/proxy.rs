//! The proxy thread of GPU connections between hosts (NCCL's proxy for the NET transport): it
//! moves FIFO slots between this rank's FIFOs in host memory, which its GPU kernel reads and
//! writes exactly as it would a peer's on the same host, and the peers, through the network ends
//! CPU ranks use — TCP ([`crate::transport::tcp`]) or InfiniBand/RoCE
//! ([`crate::transport::ib`]) — whose slots are the FIFO's slots in place
//! ([`InPlaceSend`], [`InPlaceRecv`]): no byte is copied on either host.
//!
//! Unit of work: one pass over every connection of the communicator, round robin. Nothing
//! blocks: the ends are non-blocking and driven from this thread, each trying its sockets in its
//! own progress. Only once no connection has moved anything for [`SPIN`] does the thread
//! `poll(2)` their sockets, sleeping at most [`IDLE_SLEEP`] (the kernel's flags live in memory,
//! which no file descriptor announces); a poll on every pass cost a system call over every
//! socket and lengthened each pass with the connections' count. For the same reason a pass
//! starts with one `epoll_wait(2)` that says which receiving connections have data
//! ([`gate`]): the others are not read. The proxy sees the FIFOs only as addresses
//! ([`FifoAddrs`]), so tests drive it with ordinary host memory and threads playing the kernel.
//!
//! **Sending end.** The kernel waits for `head >= s + 1 - NSLOTS`, writes slot `s % NSLOTS`,
//! stores `sizes[s % NSLOTS]`, fences and stores `tail = s + 1`. The proxy sees `tail` advance
//! and posts slot `s` to the end with its size; once the end has handed it over
//! ([`InPlaceSend::completed`]: the frame is in the socket, or the RDMA write completed) it
//! stores `head = s + 1`, so the kernel may reuse the slot. Up to [`NSLOTS`] slots are in
//! flight, never one slot waiting for another's transfer.
//!
//! **Receiving end.** The end fills slot `s % NSLOTS` only once the kernel has freed it (`head`,
//! local memory written by this rank's kernel, handed back to the end with
//! [`RecvEnd::release`]); a slot that arrived whole is published to the kernel with its size
//! and `tail = s + 1`, with release ordering. Flow control is the end's: a TCP end reads no
//! frame it has no free slot for, so the peer's socket fills and its writes stop; an IB end
//! offers a slot to its sender only once it is free.
//!
//! **Failures.** An end's error (a socket error, a peer that closes in the middle of a slot or
//! while this rank still has slots to send it, a malformed frame, a peer that says it aborted,
//! a failed work request or a port that went down), or a connection with bytes to move that
//! moves none for the stall timeout: the proxy records an error naming the peer (rank, host,
//! pid) and channel, raises the abort flag the kernels poll (so a kernel waiting on the
//! connection stops at once), says goodbye to every peer as aborted, and exits. A peer that
//! closes cleanly between slots is no error by itself (a process may exit after its last send
//! without destroying its communicator): the kernel's own timeout covers a wait for data that
//! will never come, and [`Proxy::closed_without_goodbye`] lets its report say why. Raising the
//! communicator's abort flag (or the kernels') stops the proxy within a pass; so does
//! [`Proxy::stop`], which says goodbye to every peer first.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::conn::NSLOTS;
use crate::error::{Error, Result};
use crate::transport::{InPlaceRecv, InPlaceSend, TransportError};

mod conn;
mod gate;
use conn::Conn;
use gate::Gate;

/// Slots per FIFO, as a sequence-number stride.
const SLOTS: u64 = NSLOTS as u64;
/// How long the proxy keeps polling without sleeping after anything last moved.
pub(crate) const SPIN: Duration = Duration::from_millis(2);
/// Longest sleep in `poll(2)` once idle: the latency a newly posted slot may wait.
pub(crate) const IDLE_SLEEP: Duration = Duration::from_millis(1);

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

/// The network end of one connection, whose slots are its FIFO's.
pub(crate) enum Link {
    /// This rank's kernel posts slots; the end sends them.
    Send(Box<dyn InPlaceSend>),
    /// The end receives slots; this rank's kernel consumes them.
    Recv(Box<dyn InPlaceRecv>),
}

impl Link {
    /// What carries the slots, for messages: "TCP", "IB (mlx5_0:1)".
    pub(crate) fn via(&self) -> String {
        match self {
            Link::Send(s) => s.via(),
            Link::Recv(r) => r.via(),
        }
    }
}

/// One connection end for the proxy to drive.
pub(crate) struct NetConn {
    /// Its FIFO.
    pub fifo: FifoAddrs,
    /// The network end over the FIFO's slots.
    pub link: Link,
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
    /// Peers that closed a connection between slots without a goodbye.
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
        let mut conns: Vec<Conn> = conns.into_iter().map(Conn::new).collect();
        let gate = Gate::new(&mut conns);
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rnccl-proxy-{}", ctl.rank))
            .spawn(move || {
                let mut l = Loop {
                    conns,
                    gate,
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
    /// Errors returned: [`Error::Remote`] naming the peer, host and channel when a connection
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
    /// Which receiving connections have data, asked once per pass.
    gate: Option<Gate>,
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

    /// One pass over every connection, then, when idle, one poll of their sockets (sleeping).
    ///
    /// # Safety
    /// Every FIFO address is live ([`Proxy::start`]).
    unsafe fn pass(&mut self, now: Instant, last_moved: Instant) -> Result<bool, Failure> {
        let mut moved = false;
        if let Some(g) = &mut self.gate {
            g.mark(&mut self.conns)?;
        }
        for c in &mut self.conns {
            // SAFETY: forwarded contract.
            if unsafe { c.pass() }? {
                c.last_moved = now;
                moved = true;
            }
            if !c.busy() {
                c.last_moved = now;
            }
            if !c.noted && c.closed_without_goodbye() {
                c.noted = true;
                self.sh
                    .unannounced
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.peer);
            }
        }
        self.check_stalls(now)?;
        let idle = !moved && now.duration_since(last_moved) > SPIN;
        if !idle {
            // Spinning: every end tries its sockets without waiting in its own progress, so a
            // poll(2) here would only cost a system call over every socket per pass.
            if !moved {
                std::thread::yield_now();
            }
            return Ok(moved);
        }
        let timeout = PollTimeout::try_from(IDLE_SLEEP).unwrap_or(PollTimeout::ZERO);
        let interest: Vec<_> = self.conns.iter().flat_map(Conn::poll_interest).collect();
        let mut fds: Vec<PollFd<'_>> = interest
            .iter()
            .map(|&(fd, flags)| {
                // SAFETY: the descriptor belongs to an end of `self.conns`, alive across this
                // poll.
                PollFd::new(unsafe { BorrowedFd::borrow_raw(fd) }, flags)
            })
            .collect();
        fds.push(PollFd::new(
            self.sh.waker.as_fd(),
            nix::poll::PollFlags::POLLIN,
        ));
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                return Err(Failure::Internal(format!(
                    "poll(2) over the GPU network sockets failed: {e}"
                )));
            }
        }
        if fds
            .last()
            .and_then(PollFd::revents)
            .is_some_and(|f| !f.is_empty())
        {
            let _ = self.sh.waker.read();
        }
        Ok(moved)
    }

    /// Fails a connection that had bytes to move and moved none for the stall timeout.
    fn check_stalls(&self, now: Instant) -> Result<(), Failure> {
        for c in &self.conns {
            if c.busy() && now.duration_since(c.last_moved) > self.ctl.stall_timeout {
                let (what, slot) = match c.link {
                    Link::Send(_) => ("sending", c.head),
                    Link::Recv(_) => ("receiving", c.tail),
                };
                return Err(Failure::Stalled {
                    what: format!(
                        "{what} slot {slot} on channel {} over {} (the GPU network proxy moved \
                         no byte of it)",
                        c.channel,
                        c.link.via()
                    ),
                    peer: c.peer_name.clone(),
                    after: self.ctl.stall_timeout,
                });
            }
        }
        Ok(())
    }

    /// Tells every peer this end is going (best effort, within about 100 ms per end).
    fn goodbye(&mut self, aborted: bool) {
        for c in &mut self.conns {
            c.goodbye(aborted);
        }
    }
}
