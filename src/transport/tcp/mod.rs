//! TCP sockets between hosts (NCCL's Socket net, internals §7.4): the one socket protocol of
//! rnccl, for CPU ranks' connections and for the GPU proxy's.
//!
//! A connection carries the same slot FIFO as the memory transports, but each end keeps its own
//! [`crate::conn::NSLOTS`] slots ([`slots`]: in its own memory, or the caller's in place, as
//! the GPU proxy's FIFOs in pinned host memory) and the bytes cross the wire. A connection uses
//! `NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD` data sockets (at least one), framed per slot,
//! with goodbye records when an end goes ([`framing`]); with zero helper threads the caller's
//! progress loop drives the non-blocking sockets, otherwise helper threads do ([`driver`]). The
//! receiving end offers its rank's [`listener::DataListener`] and a token; the sending end
//! [`dial`]s it and the receiving end [`collect`]s the sockets; [`ends`] holds the two ends.
//!
//! Why each connection has sockets of its own, one way, rather than a peer pair sharing one
//! set both ways as Open MPI does: measured on 2026-12-04 with perf/cpu_vs_mpi.sh's namespaces,
//! a duplex build (the lower rank dialing, both directions' frames and goodbyes on those
//! sockets) left the 8 B all_reduce where it was (5.5 against 5.2 µs, within the noise: with
//! four sockets taking turns, a one-way socket's delayed acknowledgement already rides out
//! only every second frame on it, so there was little to save) and halved 32 MiB (1.7 against
//! 3.4 GB/s): one rank's thread then both writes and drains each socket, and the far side's
//! window fills while it writes.

mod driver;
mod ends;
pub(crate) mod framing;
pub(crate) mod listener;
mod slots;

pub(crate) use ends::{TcpReceiver, TcpSender};
pub(crate) use slots::Slots;

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::bootstrap::silence::detect_silence;
use crate::bootstrap::{Deadline, Retry};
use crate::error::{Error, Result};

/// Sets the options every data socket gets and makes it non-blocking; `silent` as
/// [`detect_silence`].
///
/// Errors: the socket option calls' I/O errors.
pub(crate) fn prepare_socket(sock: &TcpStream, silent: Option<Duration>) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    detect_silence(sock, silent);
    sock.set_nonblocking(true)
}

/// Prepares every socket of a connection.
///
/// Errors: [`Error::System`] when a socket option cannot be set.
fn prepare_all(socks: &[TcpStream], silent: Option<Duration>) -> Result<()> {
    for s in socks {
        prepare_socket(s, silent).map_err(|e| Error::system("configuring a data socket", e))?;
    }
    Ok(())
}

/// How a sending end reaches the receiving end's sockets: what the receiver's offer said, and
/// how this rank connects.
pub(crate) struct Dial<'a> {
    /// The receiver's data listener.
    pub addr: SocketAddr,
    /// The receiver, for the end's messages ("rank 3 (host b, pid 812)").
    pub peer: &'a str,
    /// The connection, for messages while connecting ("rank 3 (host b, pid 812) (channel 2)").
    pub what: &'a str,
    /// The job's magic, which every hello carries.
    pub magic: u64,
    /// The connection's token, from the receiver's offer.
    pub token: u64,
    /// Data sockets to open.
    pub sockets: usize,
    /// Connect retries.
    pub retry: Retry,
    /// Bound on connecting.
    pub deadline: Deadline,
    /// `RNCCL_SILENT_LINK`.
    pub silent: Option<Duration>,
    /// The congestion control set on each data socket before it connects (None: the kernel's
    /// default; `RNCCL_SOCKET_CC`, [`crate::bootstrap::congestion`]).
    pub congestion: Option<&'a str>,
}

/// Opens the sending end of a connection: `d.sockets` data sockets to the receiver's listener,
/// each greeting with the token, moving `slot_bytes`-byte `slots` (driven by `nthreads` helper
/// threads, 0: the caller's loop).
///
/// Errors: [`Error::Remote`] when the listener cannot be reached or greeted; [`Error::System`]
/// when a socket cannot be configured or a helper thread started.
pub(crate) fn dial(
    d: &Dial<'_>,
    slot_bytes: usize,
    nthreads: usize,
    slots: Slots,
) -> Result<TcpSender> {
    let socks = listener::connect(d)?;
    prepare_all(&socks, d.silent)?;
    TcpSender::new(socks, slot_bytes, nthreads, d.peer, slots)
}

/// How a receiving end collects its sockets from this rank's listener.
pub(crate) struct Collect<'a> {
    /// This rank's data listener.
    pub listener: &'a listener::DataListener,
    /// The token this end offered.
    pub token: u64,
    /// Data sockets to wait for.
    pub sockets: usize,
    /// The sender, for the end's messages.
    pub peer: &'a str,
    /// The connection, for messages while connecting.
    pub what: &'a str,
    /// Bound on waiting.
    pub deadline: Deadline,
    /// Raised to interrupt the wait.
    pub abort: &'a AtomicBool,
    /// What the sender reported if it gave up (its failure notice).
    pub gave_up: &'a dyn Fn() -> Option<String>,
    /// `RNCCL_SILENT_LINK`.
    pub silent: Option<Duration>,
}

/// Opens the receiving end of a connection: waits for the sender's `c.sockets` data sockets
/// on this rank's listener, moving `slot_bytes`-byte `slots` (driven by `nthreads` helper
/// threads, 0: the caller's loop).
///
/// Errors: as [`listener::DataListener::accept`]; [`Error::System`] when a socket cannot be
/// configured or a helper thread started.
pub(crate) fn collect(
    c: &Collect<'_>,
    slot_bytes: usize,
    nthreads: usize,
    slots: Slots,
) -> Result<TcpReceiver> {
    let socks = c
        .listener
        .accept(c.token, c.sockets, c.what, c.deadline, c.abort, c.gave_up)?;
    prepare_all(&socks, c.silent)?;
    TcpReceiver::new(socks, slot_bytes, nthreads, c.peer, slots)
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
