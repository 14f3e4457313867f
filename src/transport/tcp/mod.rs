//! TCP sockets between hosts (NCCL's Socket net, internals §7.4).
//!
//! A connection carries the same slot FIFO as the memory transports, but each end keeps its own
//! [`crate::conn::NSLOTS`] slots in local memory ([`slots`]) and the bytes cross the wire. A
//! connection uses `NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD` data sockets (at least one),
//! framed per slot ([`framing`]); with zero helper threads the caller's progress loop drives the
//! non-blocking sockets, otherwise helper threads do ([`driver`]). The receiving end's
//! [`listener::DataListener`] accepts the sender's sockets; [`ends`] holds the two ends.

mod driver;
mod ends;
pub(crate) mod framing;
pub(crate) mod listener;
mod slots;

pub(crate) use ends::{TcpReceiver, TcpSender};

use std::net::TcpStream;
use std::time::Duration;

/// Sets the options every data socket gets and makes it non-blocking; `silent` as
/// [`detect_silence`].
///
/// Errors: the socket option calls' I/O errors.
pub(crate) fn prepare_socket(sock: &TcpStream, silent: Option<Duration>) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    detect_silence(sock, silent);
    sock.set_nonblocking(true)
}

/// Makes a peer host that stops answering fail `sock` with `ETIMEDOUT` after about `after`
/// (`RNCCL_SILENT_LINK`) instead of the kernel's defaults (hours idle, about 15 minutes with data
/// in flight): TCP keepalive probes after `after / 2` idle, every `after / 8`, 4 of them, and
/// `TCP_USER_TIMEOUT` = `after` for data the peer's host never acknowledges (tcp(7)). A host
/// that answers keeps the connection, however long its process takes to read (Linux resets the
/// count on every acknowledged zero-window probe). `None` leaves the kernel's defaults. Best
/// effort: a socket that refuses the options keeps the defaults.
pub(crate) fn detect_silence(sock: &TcpStream, after: Option<Duration>) {
    let Some(after) = after.filter(|d| !d.is_zero()) else {
        return;
    };
    let s = socket2::SockRef::from(sock);
    let keep = socket2::TcpKeepalive::new()
        .with_time((after / 2).max(Duration::from_secs(1)))
        .with_interval((after / 8).max(Duration::from_secs(1)))
        .with_retries(4);
    let _ = s.set_tcp_keepalive(&keep);
    let _ = s.set_tcp_user_timeout(Some(after));
}

#[cfg(test)]
mod tests;
