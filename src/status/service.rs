//! The process's status service: a thread answering status queries about the communicators
//! this process publishes (NCCL RAS's role), on a TCP port of the bootstrap interface, and
//! logging the hang reports ranks of its jobs send. It only reads counters the collectives keep
//! anyway, so querying never disturbs a job.
//!
//! One thread serves every client at once with `poll`: a client that connects and sends
//! nothing, or sends slowly, holds only its own slot. Each client has [`CLIENT_TIMEOUT`] to
//! send its request and as long to take the answer, a peer address holds at most
//! [`PER_PEER`] connections and the service [`MAX_CLIENTS`]; past either cap the oldest
//! connection that has not sent a whole request is closed to make room, so idle or hostile
//! connections can never keep `rnccl status` out.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::wire::{CommStatus, LinkStatus, MAX_REQUEST, OpNow, ProcessStatus, Request, VERSION};
use crate::stats::page::publisher::registered;

/// How long a client may take to send its request, and then to read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections one peer address may hold open at once.
pub(crate) const PER_PEER: usize = 16;
/// Connections the service holds open at once.
pub(crate) const MAX_CLIENTS: usize = 256;

static SERVICE: OnceLock<Option<SocketAddr>> = OnceLock::new();

/// Starts the process's service on `ip` (port chosen by the kernel) the first time, and returns
/// its address; later calls return the first one's. `None` when it could not start (a rank
/// still works; only status queries and hang reports go without it).
pub(crate) fn start(ip: IpAddr) -> Option<SocketAddr> {
    *SERVICE.get_or_init(|| {
        let listener = TcpListener::bind(SocketAddr::new(ip, 0)).ok()?;
        listener.set_nonblocking(true).ok()?;
        let addr = listener.local_addr().ok()?;
        std::thread::Builder::new()
            .name("rnccl-status".into())
            .spawn(move || serve(&listener))
            .ok()?;
        tracing::info!(target: "rnccl::init", "Status: answering on {addr} (rnccl status {addr})");
        crate::stats::page::announce_status(addr);
        Some(addr)
    })
}

/// The address the process's status service answers on, once started.
pub fn address() -> Option<SocketAddr> {
    SERVICE.get().copied().flatten()
}

/// One client connection.
struct Client {
    stream: TcpStream,
    peer: IpAddr,
    /// When it must have sent its request (then: taken its answer).
    deadline: Instant,
    /// The request read so far.
    request: Vec<u8>,
    /// The answer, once the request is complete, and how much of it was sent.
    answer: Option<(Vec<u8>, usize)>,
}

impl Client {
    /// Reads what arrived; once the request is whole (a line, or everything before the client
    /// closed its side), prepares the answer. Returns false when the connection is done for.
    fn read(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    if self.request.is_empty() {
                        return false;
                    }
                    self.respond();
                    return true;
                }
                Ok(n) => {
                    self.request.extend_from_slice(&buf[..n]);
                    if let Some(end) = self.request.iter().position(|&b| b == b'\n') {
                        self.request.truncate(end);
                        self.respond();
                        return true;
                    }
                    if self.request.len() > MAX_REQUEST {
                        self.request.clear();
                        self.answer = Some((
                            format!("{{\"error\":\"request longer than {MAX_REQUEST} bytes\"}}\n")
                                .into_bytes(),
                            0,
                        ));
                        self.deadline = Instant::now() + CLIENT_TIMEOUT;
                        return true;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    fn respond(&mut self) {
        let mut text = reply(&String::from_utf8_lossy(&self.request));
        text.push('\n');
        self.answer = Some((text.into_bytes(), 0));
        self.deadline = Instant::now() + CLIENT_TIMEOUT;
    }

    /// Sends what the socket takes. Returns false when the answer is out (or cannot be).
    fn write(&mut self) -> bool {
        let Some((answer, sent)) = &mut self.answer else {
            return true;
        };
        while *sent < answer.len() {
            match self.stream.write(&answer[*sent..]) {
                Ok(n) => *sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        false
    }
}

fn serve(listener: &TcpListener) {
    let mut clients: Vec<Client> = Vec::new();
    loop {
        let now = Instant::now();
        // Clients past their deadline: silent, too slow, or not taking their answer.
        clients.retain(|c| c.deadline > now);
        let wait = clients
            .iter()
            .map(|c| c.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_secs(60))
            .max(Duration::from_millis(1));
        let mut fds = Vec::with_capacity(clients.len() + 1);
        fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
        for c in &clients {
            let want = if c.answer.is_some() {
                PollFlags::POLLOUT
            } else {
                PollFlags::POLLIN
            };
            fds.push(PollFd::new(c.stream.as_fd(), want));
        }
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        if poll(&mut fds, timeout).is_err() {
            // EINTR; anything else cannot happen with valid descriptors.
            continue;
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        let mut keep = Vec::with_capacity(clients.len());
        for (c, ready) in clients.drain(..).zip(&ready[1..]) {
            let mut c = c;
            let alive = !*ready
                || if c.answer.is_some() {
                    c.write()
                } else {
                    c.read() && (c.answer.is_none() || c.write())
                };
            if alive {
                keep.push(c);
            }
        }
        clients = keep;
        if ready[0] {
            accept(listener, &mut clients);
        }
    }
}

/// Takes every pending connection, making room under the caps by closing the oldest
/// connections that have not sent a whole request.
fn accept(listener: &TcpListener, clients: &mut Vec<Client>) {
    loop {
        let (stream, addr) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // WouldBlock: all taken; anything else (EMFILE): try again at the next wakeup.
            Err(_) => return,
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let peer = addr.ip();
        let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
        for c in clients.iter() {
            *per_peer.entry(c.peer).or_default() += 1;
        }
        let over_peer = per_peer.get(&peer).copied().unwrap_or(0) >= PER_PEER;
        if over_peer || clients.len() >= MAX_CLIENTS {
            // Connections still waiting for their request, oldest first (deadline order).
            let victim = clients
                .iter()
                .enumerate()
                .filter(|(_, c)| c.answer.is_none() && (!over_peer || c.peer == peer))
                .min_by_key(|(_, c)| c.deadline)
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    tracing::debug!(target: "rnccl::status", "closing an idle status connection from {} to make room", clients[i].peer);
                    clients.swap_remove(i);
                }
                // Every slot is busy answering: this client tries again.
                None => continue,
            }
        }
        clients.push(Client {
            stream,
            peer,
            deadline: Instant::now() + CLIENT_TIMEOUT,
            request: Vec::new(),
            answer: None,
        });
    }
}

/// The answer to one request line.
fn reply(line: &str) -> String {
    match serde_json::from_str::<Request>(line) {
        Ok(Request::Query) => serde_json::to_string(&status_now()).unwrap_or_default(),
        Ok(Request::Report { magic, text }) => {
            let ours = magic != 0 && registered().iter().any(|c| c.magic() == Some(magic));
            if ours {
                tracing::warn!(target: "rnccl::status", "hang report from a rank of this job: {text}");
            }
            format!("{{\"logged\":{ours}}}")
        }
        Err(e) => format!("{{\"error\":{:?}}}", e.to_string()),
    }
}

/// This process's communicators now.
pub(crate) fn status_now() -> ProcessStatus {
    let comms = registered()
        .iter()
        .map(|c| {
            let meta = c.meta();
            let op = c.op();
            CommStatus {
                comm_id: meta.comm_id,
                rank: meta.rank,
                nranks: meta.nranks,
                device: meta.device,
                ops_started: op.started_seq(),
                ops_completed: op.completed(),
                op: op.snapshot().map(|o| OpNow {
                    seq: o.info.seq,
                    func: o.info.func,
                    count: o.info.count,
                    dtype: o.info.dtype,
                    algo: o.info.algo.to_string(),
                    elapsed_s: o.elapsed_s,
                    steps_total: o.steps_total,
                    steps_done: o.steps_done,
                }),
                links: c
                    .links()
                    .into_iter()
                    .map(|l| LinkStatus {
                        peer: l.peer,
                        channel: l.channel,
                        direction: l.direction,
                        transport: l.transport,
                        bytes: l.bytes,
                        wait_s: l.wait_ns as f64 / 1e9,
                        stalled_s: l.stalled_ns as f64 / 1e9,
                    })
                    .collect(),
                history: op.history(),
                peers: c.peers(),
            }
        })
        .collect();
    ProcessStatus {
        version: VERSION,
        pid: std::process::id(),
        host: crate::os::host::short_hostname(),
        comms,
    }
}
