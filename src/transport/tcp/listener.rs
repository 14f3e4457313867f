//! The listener a rank's TCP receiving ends accept their data sockets on, and the sender side's
//! connect. Each data socket opens with a hello naming the connection (a token from the
//! receiver's offer) and its index among the connection's sockets, so sockets of many
//! connections can share one listener and arrive in any order.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::bootstrap::wire::{FrameError, HelloKind, MAX_HELLO, read_hello, write_hello};
use crate::bootstrap::{Deadline, connect_prepared};
use crate::error::{Error, Result};

/// A data socket's hello.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct DataHello {
    /// The connection this socket belongs to.
    token: u64,
    /// Its index among the connection's sockets.
    index: u32,
}

/// One rank's data listener, shared by its communicator and every communicator split from it.
pub(crate) struct DataListener {
    addr: SocketAddr,
    magic: u64,
    state: Mutex<Accepted>,
}

/// The listening socket and the sockets it accepted that no receiving end claimed yet.
struct Accepted {
    listener: TcpListener,
    pending: HashMap<u64, Vec<(u32, TcpStream)>>,
}

/// The data listener's backlog: connections peers may open before this rank accepts them.
const LISTEN_BACKLOG: i32 = 4096;

impl DataListener {
    /// Listens on `ip` (the interface the bootstrap chose) on a free port; hellos must carry
    /// the job's `magic`.
    ///
    /// Errors: [`Error::System`] when the socket cannot be bound.
    pub(crate) fn bind(ip: IpAddr, magic: u64) -> Result<DataListener> {
        let at = SocketAddr::new(ip, 0);
        let opening = |e| Error::system(format!("opening the TCP data listener on {ip}"), e);
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(at),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .map_err(opening)?;
        sock.bind(&at.into()).map_err(opening)?;
        // Peers connect every channel's sockets before this rank accepts any (a GPU
        // communicator: up to 64 channels × 2 directions × NCCL_SOCKET_NTHREADS ×
        // NCCL_NSOCKS_PERTHREAD). std's backlog of 128 drops the SYNs beyond it, and those
        // connections time out; the kernel caps this at net.core.somaxconn (4096 by default).
        sock.listen(LISTEN_BACKLOG).map_err(opening)?;
        let listener: TcpListener = sock.into();
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::system("configuring the TCP data listener", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::system("reading the TCP data listener's address", e))?;
        Ok(DataListener {
            addr,
            magic,
            state: Mutex::new(Accepted {
                listener,
                pending: HashMap::new(),
            }),
        })
    }

    /// Where senders connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits for `count` data sockets announcing `token`, in index order; `from` names the
    /// sender for messages, and `gave_up` says what the sender reported if it gave up.
    ///
    /// Errors: [`Error::Timeout`] naming `from` at the deadline; [`Error::Remote`] when the
    /// sender gave up; [`Error::Aborted`] once `abort` is raised; [`Error::System`] when
    /// accepting fails.
    pub(crate) fn accept(
        &self,
        token: u64,
        count: usize,
        from: &str,
        deadline: Deadline,
        abort: &AtomicBool,
        gave_up: &dyn Fn() -> Option<String>,
    ) -> Result<Vec<TcpStream>> {
        loop {
            if abort.load(Ordering::Relaxed) {
                return Err(Error::Aborted(
                    "connecting TCP data sockets interrupted: the communicator was aborted".into(),
                ));
            }
            if let Some(why) = gave_up() {
                return Err(Error::Remote(format!(
                    "{from} gave up before connecting its TCP data sockets: {why}"
                )));
            }
            {
                let mut d = self.state.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    match d.listener.accept() {
                        Ok((mut s, addr)) => {
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                            match read_hello::<DataHello>(
                                &mut s,
                                self.magic,
                                HelloKind::DataSocket,
                                MAX_HELLO,
                            ) {
                                Ok(h) => d.pending.entry(h.token).or_default().push((h.index, s)),
                                Err(e) => log_dropped(addr, &e),
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(Error::system("accepting a data socket", e)),
                    }
                }
                if d.pending.get(&token).is_some_and(|v| v.len() >= count) {
                    let mut socks = d.pending.remove(&token).unwrap_or_default();
                    socks.sort_by_key(|(i, _)| *i);
                    return Ok(socks.into_iter().map(|(_, s)| s).collect());
                }
            }
            if deadline.passed() {
                return Err(Error::Timeout {
                    what: "connecting TCP data sockets".into(),
                    waited_for: from.to_string(),
                    after: deadline.timeout,
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Opens `d.sockets` data sockets to the listener at `d.addr` (`d.what` names the peer for
/// messages), each announcing `d.token` with the job's `d.magic`, each set to the congestion
/// control `d.congestion` before it connects (None: the kernel's default;
/// [`crate::bootstrap::congestion`]).
///
/// Errors: [`Error::Remote`] when the peer cannot be reached or greeted; [`Error::System`]
/// when the congestion control cannot be set.
pub(crate) fn connect(d: &super::Dial<'_>) -> Result<Vec<TcpStream>> {
    let what = format!("{}'s data listener", d.what);
    let prepare = |s: &socket2::Socket| match d.congestion {
        Some(cc) => s.set_tcp_congestion(cc.as_bytes()),
        None => Ok(()),
    };
    (0..d.sockets)
        .map(|index| {
            let mut s = connect_prepared(d.addr, &what, d.retry, d.deadline, &prepare)?;
            let hello = DataHello {
                token: d.token,
                index: index as u32,
            };
            write_hello(&mut s, d.magic, HelloKind::DataSocket, &hello)
                .map_err(|e| Error::Remote(format!("greeting {what}: {e}")))?;
            Ok(s)
        })
        .collect()
}

fn log_dropped(addr: SocketAddr, e: &FrameError) {
    tracing::debug!(target: "rnccl::net", "dropped a data connection from {addr}: {e}");
}
