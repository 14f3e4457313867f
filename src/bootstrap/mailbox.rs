//! The message service of one rank: a thread that accepts peers' message connections, splits
//! their byte streams into frames and files them in the mailbox.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::wire::{MAX_HELLO, take_messages};
use super::{Deadline, tags};
use crate::error::{Error, Result};

#[derive(Default)]
struct State {
    queues: HashMap<(usize, u64, u64), VecDeque<Vec<u8>>>,
    closed: Vec<bool>,
    /// Per communicator, the first rank that sent a failure notice, and its text.
    gave_up: HashMap<u64, (usize, String)>,
}

/// Messages received and not yet taken, and which peers' connections have closed.
pub(super) struct Mailbox {
    state: Mutex<State>,
    cv: Condvar,
}

impl Mailbox {
    /// An empty mailbox for `nranks` peers.
    pub(super) fn new(nranks: usize) -> Mailbox {
        Mailbox {
            state: Mutex::new(State {
                queues: HashMap::new(),
                closed: vec![false; nranks],
                gave_up: HashMap::new(),
            }),
            cv: Condvar::new(),
        }
    }

    /// Files a message. A failure notice is also remembered as its communicator's first, which
    /// ends every wait on that communicator (see [`Mailbox::take`]).
    pub(super) fn deliver(&self, from: usize, comm: u64, tag: u64, payload: Vec<u8>) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if tag == tags::failure_notice() {
            s.gave_up
                .entry(comm)
                .or_insert_with(|| (from, String::from_utf8_lossy(&payload).into_owned()));
        }
        s.queues
            .entry((from, comm, tag))
            .or_default()
            .push_back(payload);
        self.cv.notify_all();
    }

    fn close(&self, from: usize) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = s.closed.get_mut(from) {
            *c = true;
        }
        self.cv.notify_all();
    }

    /// The first rank that gave up on communicator `comm` (sent a failure notice), with its text.
    pub(super) fn gave_up(&self, comm: u64) -> Option<(usize, String)> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.gave_up.get(&comm).cloned()
    }

    /// Takes the oldest message from `from` under (`comm`, `tag`), waiting until `deadline` or
    /// until `abort` is raised (checked every 50 ms). A failure notice from another rank of
    /// `comm` ends the wait too: the communicator cannot complete what this rank waits for.
    pub(super) fn take(
        &self,
        from: usize,
        comm: u64,
        tag: u64,
        deadline: Deadline,
        abort: &AtomicBool,
    ) -> Result<Vec<u8>, Missing> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(q) = s.queues.get_mut(&(from, comm, tag))
                && let Some(m) = q.pop_front()
            {
                if q.is_empty() {
                    s.queues.remove(&(from, comm, tag));
                }
                return Ok(m);
            }
            if s.closed.get(from).copied().unwrap_or(false) {
                return Err(Missing::Closed);
            }
            if tag != tags::failure_notice()
                && let Some((rank, _)) = s.gave_up.get(&comm)
            {
                return Err(Missing::GaveUp(*rank));
            }
            if abort.load(Ordering::Relaxed) {
                return Err(Missing::Aborted);
            }
            let left = deadline.remaining();
            if left.is_zero() {
                return Err(Missing::Timeout);
            }
            let slice = left.min(Duration::from_millis(50));
            s = self
                .cv
                .wait_timeout(s, slice)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Why [`Mailbox::take`] returned without a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Missing {
    /// The sender's connection closed with nothing queued.
    Closed,
    /// The deadline passed.
    Timeout,
    /// The caller's abort flag was raised.
    Aborted,
    /// This rank sent a failure notice for the communicator.
    GaveUp(usize),
    /// The sender is gone, as the words say (found by the caller, never by `take`).
    Gone(&'static str),
}

struct Incoming {
    stream: TcpStream,
    from: Option<usize>,
    buf: Vec<u8>,
}

/// The service thread and the means to stop it.
pub(super) struct Service {
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    /// Starts serving `listener`.
    ///
    /// Errors: [`Error::System`] when the thread or its wake-up descriptor cannot be created.
    pub(super) fn start(
        listener: TcpListener,
        magic: u64,
        mailbox: Arc<Mailbox>,
        silent: Option<Duration>,
    ) -> Result<Service> {
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::system("configuring the bootstrap listener", e))?;
        let stop = Arc::new(
            EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
                .map_err(|e| {
                    Error::system(
                        "creating the bootstrap service wake-up descriptor",
                        e.into(),
                    )
                })?,
        );
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rnccl-bootstrap".into())
            .spawn(move || serve(listener, magic, &mailbox, &stop2, silent))
            .map_err(|e| Error::system("starting the bootstrap service thread", e))?;
        Ok(Service {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it.
    pub(super) fn stop(&mut self) {
        let _ = self.stop.write(1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    listener: TcpListener,
    magic: u64,
    mailbox: &Mailbox,
    stop: &EventFd,
    silent: Option<Duration>,
) {
    let mut conns: Vec<Incoming> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let mut fds: Vec<PollFd> = Vec::with_capacity(conns.len() + 2);
        fds.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
        fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
        for c in &conns {
            fds.push(PollFd::new(c.stream.as_fd(), PollFlags::POLLIN));
        }
        if poll(&mut fds, PollTimeout::from(1000u16)).is_err() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let stop_hit = fds[0].revents().is_some_and(|r| !r.is_empty());
        let readable: Vec<bool> = fds[2..]
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        if stop_hit {
            return;
        }
        while let Ok((s, _)) = listener.accept() {
            super::silence::detect_silence(&s, silent);
            if s.set_nonblocking(true).is_ok() {
                conns.push(Incoming {
                    stream: s,
                    from: None,
                    buf: Vec::new(),
                });
            }
        }
        let mut dead = Vec::new();
        for (i, c) in conns.iter_mut().enumerate() {
            if !readable.get(i).copied().unwrap_or(false) {
                continue;
            }
            // File whatever arrived before acting on an end of stream: a peer that sends its last
            // message and exits at once must not lose it.
            let open = read_some(c, &mut chunk);
            if dispatch(c, magic, mailbox).is_err() || open != Ok(true) {
                dead.push(i);
            }
        }
        for i in dead.into_iter().rev() {
            let c = conns.swap_remove(i);
            if let Some(from) = c.from {
                mailbox.close(from);
            }
        }
    }
}

/// Reads what is available. Ok(false) at end of stream.
fn read_some(c: &mut Incoming, chunk: &mut [u8]) -> Result<bool, ()> {
    loop {
        match c.stream.read(chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(()),
        }
    }
}

/// Parses the hello (once) and files complete messages. Err: drop the connection.
fn dispatch(c: &mut Incoming, magic: u64, mailbox: &Mailbox) -> Result<(), ()> {
    if c.from.is_none() {
        if c.buf.len() >= 8 && u64::from_le_bytes(c.buf[..8].try_into().expect("8 bytes")) != magic
        {
            tracing::debug!(target: "rnccl::bootstrap", "dropped a message connection with a wrong magic");
            return Err(());
        }
        if c.buf.len() < 16 {
            return Ok(());
        }
        let kind = u32::from_le_bytes(c.buf[8..12].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(c.buf[12..16].try_into().expect("4 bytes")) as usize;
        if kind != super::wire::HelloKind::PeerMessages as u32 || len > MAX_HELLO {
            return Err(());
        }
        if c.buf.len() < 16 + len {
            return Ok(());
        }
        let hello: super::wire::PeerHello =
            serde_json::from_slice(&c.buf[16..16 + len]).map_err(|_| ())?;
        c.from = Some(hello.from as usize);
        c.buf.drain(..16 + len);
    }
    let from = c.from.expect("hello parsed");
    for (comm, tag, payload) in take_messages(&mut c.buf).map_err(|_| ())? {
        mailbox.deliver(from, comm, tag, payload);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use super::super::Deadline;
    use super::super::wire::PeerHello;
    use super::super::wire::{HelloKind, encode_message, write_hello};
    use super::*;

    /// A peer that sends its last message and closes at once: the message must still arrive,
    /// and only then does the peer count as closed.
    #[test]
    fn last_message_before_close_is_delivered() {
        for round in 0..20u64 {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let mailbox = Arc::new(Mailbox::new(2));
            let mut service = Service::start(l, 42, mailbox.clone(), None).unwrap();
            let mut s = TcpStream::connect(addr).unwrap();
            let mut bytes = Vec::new();
            write_hello(
                &mut bytes,
                42,
                HelloKind::PeerMessages,
                &PeerHello { from: 1 },
            )
            .unwrap();
            bytes.extend(encode_message(7, round, b"bye"));
            s.write_all(&bytes).unwrap();
            drop(s);
            let wait = || Deadline::after(Duration::from_secs(5));
            let got = mailbox.take(1, 7, round, wait(), &AtomicBool::new(false));
            assert_eq!(got.as_deref(), Ok(&b"bye"[..]), "round {round}");
            assert_eq!(
                mailbox.take(1, 7, round, wait(), &AtomicBool::new(false)),
                Err(Missing::Closed)
            );
            service.stop();
        }
    }
}
