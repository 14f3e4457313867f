//! Who drives a connection's sockets: the caller's progress loop (zero helper threads,
//! `NCCL_SOCKET_NTHREADS=0`) or helper threads that each own a share of the sockets and sleep in
//! `poll(2)` once they have had nothing to do for [`HELPER_SPIN`].

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::framing::Stream;
use super::slots::{GOODBYE_ABORTED, GOODBYE_CLEAN, GOODBYE_NONE, Shared};
use crate::error::{Error, Result};
use crate::transport::{PollInterest, TransportError};

/// A receiver driven inline reads every socket once in this many calls that moved nothing;
/// the other calls stop at the first socket with nothing for its next slot
/// ([`progress_in_order`]).
const FULL_PASS_EVERY: u32 = 16;

/// Drives a connection's streams.
pub(super) enum Driver {
    /// The executor calls [`Driver::progress`] from its loop; a receiver counts the calls that
    /// moved nothing since it last read every socket.
    Inline(Vec<Stream>, u32),
    /// Helper threads own the streams.
    Threads {
        handles: Vec<JoinHandle<()>>,
        wakers: Vec<Arc<Waker>>,
    },
}

/// Wakes a helper thread sleeping in `poll(2)`.
pub(super) struct Waker {
    fd: EventFd,
    sleeping: AtomicBool,
}

impl Waker {
    fn new() -> Result<Waker> {
        let fd = EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
            .map_err(|e| {
            Error::system(
                "creating an eventfd for a socket helper thread (out of file descriptors? \
                     raise `ulimit -n` or lower NCCL_SOCKET_NTHREADS)",
                e.into(),
            )
        })?;
        Ok(Waker {
            fd,
            sleeping: AtomicBool::new(false),
        })
    }

    fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            let _ = self.fd.write(1);
        }
    }
}

impl Driver {
    /// Starts driving `streams`: inline when `nthreads` is 0, else on up to `nthreads` helper
    /// threads (stream `i` on thread `i % nthreads`).
    ///
    /// Errors: [`Error::System`] when an eventfd or a thread cannot be created (threads already
    /// started are stopped first).
    pub(super) fn new(
        streams: Vec<Stream>,
        nthreads: usize,
        shared: &Arc<Shared>,
    ) -> Result<Driver> {
        if nthreads == 0 {
            return Ok(Driver::Inline(streams, 0));
        }
        let mut groups: Vec<Vec<Stream>> = (0..nthreads).map(|_| Vec::new()).collect();
        for (i, s) in streams.into_iter().enumerate() {
            groups[i % nthreads].push(s);
        }
        let (mut handles, mut wakers) = (Vec::new(), Vec::new());
        for group in groups.into_iter().filter(|g| !g.is_empty()) {
            match start_helper(group, shared) {
                Ok((h, w)) => {
                    handles.push(h);
                    wakers.push(w);
                }
                Err(e) => {
                    Driver::Threads { handles, wakers }.stop(shared);
                    return Err(e);
                }
            }
        }
        Ok(Driver::Threads { handles, wakers })
    }

    /// Whether the caller's loop drives the sockets (no helper threads).
    pub(super) fn inline(&self) -> bool {
        matches!(self, Driver::Inline(..))
    }

    /// Wakes every helper thread (none when sockets are driven inline).
    pub(super) fn wake(&self) {
        if let Driver::Threads { wakers, .. } = self {
            for w in wakers {
                w.wake();
            }
        }
    }

    /// Moves bytes (inline) or collects a helper thread's failure.
    ///
    /// Errors: the first [`TransportError`] any stream hit.
    pub(super) fn progress(&mut self, sh: &Shared) -> Result<bool, TransportError> {
        match self {
            Driver::Inline(streams, idle) if streams.len() > 1 && streams[0].receives() => {
                progress_in_order(streams, idle, sh)
            }
            Driver::Inline(streams, _) => {
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

    /// Sockets with work waiting for readiness, and for what (empty when helper threads drive
    /// the sockets).
    pub(super) fn interest(&self, sh: &Shared) -> Vec<PollInterest> {
        match self {
            Driver::Inline(streams, _) => streams
                .iter()
                .filter_map(|s| s.wants_poll(sh).map(|f| (s.sock.as_raw_fd(), f)))
                .collect(),
            Driver::Threads { .. } => Vec::new(),
        }
    }

    /// Every socket, when the caller's loop drives them (none with helper threads, which keep
    /// their sockets to themselves).
    pub(super) fn sockets(&self) -> Vec<std::os::fd::RawFd> {
        match self {
            Driver::Inline(streams, _) => streams.iter().map(|s| s.sock.as_raw_fd()).collect(),
            Driver::Threads { .. } => Vec::new(),
        }
    }

    /// Whether a socket is in the middle of a frame (always false with helper threads, which
    /// keep their sockets to themselves).
    pub(super) fn mid_frame(&self) -> bool {
        match self {
            Driver::Inline(streams, _) => streams.iter().any(Stream::mid_frame),
            Driver::Threads { .. } => false,
        }
    }

    /// Tells the far end this end is going, on every socket (within [`GOODBYE_WAIT`]), and
    /// stops the helper threads (which say it on theirs).
    pub(super) fn goodbye(&mut self, sh: &Shared, aborted: bool) {
        let until = Instant::now() + GOODBYE_WAIT;
        match self {
            Driver::Inline(streams, _) => {
                for s in streams {
                    s.goodbye(aborted, until);
                }
            }
            Driver::Threads { .. } => {
                let g = if aborted {
                    GOODBYE_ABORTED
                } else {
                    GOODBYE_CLEAN
                };
                sh.goodbye.store(g, Ordering::SeqCst);
                self.stop(sh);
            }
        }
    }

    /// Stops and joins the helper threads.
    pub(super) fn stop(&mut self, sh: &Shared) {
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

/// One inline pass over a receiver's sockets in the order their frames complete (slot `s`
/// travels on socket `s % nsocks`: the socket whose next slot is lowest first), stopping at the
/// first open socket that moved nothing: the slots after its are of no use before it arrives
/// (they are consumed in order) and their bytes wait in the kernel meanwhile. An idle
/// connection then costs one `read(2)` per pass instead of one per socket, which is what a
/// small message waits through. The pass also stops at a socket that finished a small frame
/// (one read-ahead buffer) and holds nothing more: the consumer takes that slot first (a small
/// message's next frame is not sent before), and the next pass reads on from the next socket.
/// Large frames stream on every socket at once, so after one the pass goes on. Every
/// [`FULL_PASS_EVERY`]th call that moved nothing reads every socket, so a goodbye or a failure
/// on a socket without data is still seen.
///
/// Errors: the first [`TransportError`] of a socket.
fn progress_in_order(
    streams: &mut [Stream],
    idle: &mut u32,
    sh: &Shared,
) -> Result<bool, TransportError> {
    let n = streams.len();
    let first = (0..n).min_by_key(|&i| streams[i].next_seq()).unwrap_or(0);
    let full = *idle + 1 >= FULL_PASS_EVERY;
    let mut moved = false;
    for k in 0..n {
        let s = &mut streams[(first + k) % n];
        let m = s.progress(sh)?;
        moved |= m;
        if !full && !s.ended() && (!m || (!s.mid_frame() && s.small_frames())) {
            break;
        }
    }
    *idle = if moved || full { 0 } else { *idle + 1 };
    Ok(moved)
}

/// Starts one helper thread over `group`.
fn start_helper(group: Vec<Stream>, shared: &Arc<Shared>) -> Result<(JoinHandle<()>, Arc<Waker>)> {
    let waker = Arc::new(Waker::new()?);
    let (sh, wk) = (shared.clone(), waker.clone());
    let handle = std::thread::Builder::new()
        .name("rnccl-socket".into())
        .spawn(move || helper_loop(group, &sh, &wk))
        .map_err(|e| {
            Error::system(
                "starting a socket helper thread (lower NCCL_SOCKET_NTHREADS)",
                e,
            )
        })?;
    Ok((handle, waker))
}

fn helper_loop(mut streams: Vec<Stream>, sh: &Shared, waker: &Waker) {
    run_helper(&mut streams, sh, waker);
    let g = sh.goodbye.load(Ordering::SeqCst);
    if g != GOODBYE_NONE {
        let until = Instant::now() + GOODBYE_WAIT;
        for s in &mut streams {
            s.goodbye(g == GOODBYE_ABORTED, until);
        }
    }
}

/// How long a helper thread keeps trying its sockets after it last moved something before it
/// sleeps in `poll(2)`: the next small message of a loop of them comes within it, and finds
/// the thread awake instead of paying an eventfd write and a wake-up on each side.
const HELPER_SPIN: Duration = Duration::from_micros(200);

/// How long an end that goes tries to hand its goodbyes to full sockets.
const GOODBYE_WAIT: Duration = Duration::from_millis(100);

fn run_helper(streams: &mut [Stream], sh: &Shared, waker: &Waker) {
    let mut last_moved = Instant::now();
    while !sh.shutdown.load(Ordering::SeqCst) {
        let mut moved = false;
        for s in streams.iter_mut() {
            match s.progress(sh) {
                Ok(m) => moved |= m,
                Err(e) => {
                    sh.fail(e);
                    return;
                }
            }
        }
        if moved {
            last_moved = Instant::now();
            continue;
        }
        if last_moved.elapsed() < HELPER_SPIN {
            std::thread::yield_now();
            continue;
        }
        waker.sleeping.store(true, Ordering::SeqCst);
        let mut fds: Vec<PollFd> = streams
            .iter()
            .filter_map(|s| s.wants_poll(sh).map(|f| PollFd::new(s.sock.as_fd(), f)))
            .collect();
        fds.push(PollFd::new(waker.fd.as_fd(), nix::poll::PollFlags::POLLIN));
        if !sh.shutdown.load(Ordering::SeqCst) {
            let _ = poll(&mut fds, PollTimeout::from(50u16));
        }
        waker.sleeping.store(false, Ordering::SeqCst);
        let _ = waker.fd.read();
    }
}
