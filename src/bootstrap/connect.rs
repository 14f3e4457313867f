//! Connecting to a peer's listener with NCCL's retry policy.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::Deadline;
use crate::config::Config;
use crate::error::{Error, Result};

/// Connect retry policy (`NCCL_SOCKET_RETRY_CNT`, `NCCL_SOCKET_RETRY_SLEEP_MSEC`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry {
    /// Attempts after the first.
    pub count: u32,
    /// Linear back-off step.
    pub step: Duration,
}

impl Retry {
    /// From the knobs.
    ///
    /// Errors: a bad knob value.
    pub(crate) fn from_config(cfg: &Config) -> Result<Retry> {
        Ok(Retry {
            count: cfg.int("NCCL_SOCKET_RETRY_CNT")?.max(0) as u32,
            step: Duration::from_millis(cfg.int("NCCL_SOCKET_RETRY_SLEEP_MSEC")?.max(1) as u64),
        })
    }
}

/// Connects to `addr`, retrying refused/unreachable connections with linear back-off until the
/// retry count or the deadline runs out.
///
/// Errors: [`Error::Remote`] naming `what` and the address.
pub(crate) fn connect_retry(
    addr: SocketAddr,
    what: &str,
    retry: Retry,
    deadline: Deadline,
) -> Result<TcpStream> {
    connect_unless(addr, what, retry, deadline, &|| None)
}

/// As [`connect_retry`], with `prepare` applied to each new socket before it connects (options
/// such as the congestion control must be set then, tcp(7)).
///
/// Errors: as [`connect_retry`]; [`Error::System`] when `prepare` fails.
pub(crate) fn connect_prepared(
    addr: SocketAddr,
    what: &str,
    retry: Retry,
    deadline: Deadline,
    prepare: &dyn Fn(&socket2::Socket) -> std::io::Result<()>,
) -> Result<TcpStream> {
    connect_loop(addr, what, retry, deadline, &|| None, prepare)
}

/// As [`connect_retry`], giving up with the error `hopeless` returns when, between attempts,
/// it says retrying is pointless (the listener's process is known gone, or its job gave up).
///
/// Errors: as [`connect_retry`], or the error `hopeless` returned.
pub(crate) fn connect_unless(
    addr: SocketAddr,
    what: &str,
    retry: Retry,
    deadline: Deadline,
    hopeless: &dyn Fn() -> Option<Error>,
) -> Result<TcpStream> {
    connect_loop(addr, what, retry, deadline, hopeless, &|_| Ok(()))
}

/// One connection attempt: a new socket, prepared, connected within `wait`.
fn attempt(
    addr: SocketAddr,
    wait: Duration,
    prepare: &dyn Fn(&socket2::Socket) -> std::io::Result<()>,
) -> Result<std::io::Result<TcpStream>> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(|e| Error::system(format!("opening a socket to {addr}"), e))?;
    prepare(&sock).map_err(|e| Error::system(format!("preparing a socket to {addr}"), e))?;
    Ok(sock
        .connect_timeout(&addr.into(), wait)
        .map(|()| sock.into()))
}

fn connect_loop(
    addr: SocketAddr,
    what: &str,
    retry: Retry,
    deadline: Deadline,
    hopeless: &dyn Fn() -> Option<Error>,
    prepare: &dyn Fn(&socket2::Socket) -> std::io::Result<()>,
) -> Result<TcpStream> {
    let mut attempt_no = 0u32;
    loop {
        let wait = deadline
            .remaining()
            .max(Duration::from_millis(10))
            .min(Duration::from_secs(10));
        match attempt(addr, wait, prepare)? {
            Ok(s) => return Ok(s),
            Err(e) => {
                attempt_no += 1;
                let transient = matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::HostUnreachable
                        | std::io::ErrorKind::NetworkUnreachable
                );
                if !transient || attempt_no > retry.count || deadline.passed() {
                    return Err(Error::Remote(format!(
                        "cannot connect to {what} at {addr}: {e} (gave up after {attempt_no} attempts)"
                    )));
                }
                // Pause in short slices, so a peer found gone meanwhile ends the wait at once.
                let until =
                    std::time::Instant::now() + (retry.step * attempt_no).min(deadline.remaining());
                loop {
                    if let Some(e) = hopeless() {
                        return Err(e);
                    }
                    let left = until.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(50)));
                }
            }
        }
    }
}
