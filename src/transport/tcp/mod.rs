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

use crate::bootstrap::silence::detect_silence;

/// Sets the options every data socket gets and makes it non-blocking; `silent` as
/// [`detect_silence`].
///
/// Errors: the socket option calls' I/O errors.
pub(crate) fn prepare_socket(sock: &TcpStream, silent: Option<Duration>) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    detect_silence(sock, silent);
    sock.set_nonblocking(true)
}

#[cfg(test)]
mod tests;
