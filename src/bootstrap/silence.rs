//! A peer host that stops answering (`RNCCL_SILENT_LINK`): the TCP options that make its
//! sockets fail within a bound instead of the kernel's defaults (hours idle, about 15 minutes
//! with data in flight). The bootstrap's sockets and every data socket (`crate::transport::tcp`)
//! get them.

use std::net::TcpStream;
use std::time::Duration;

use crate::config::Config;
use crate::error::Result;

/// `RNCCL_SILENT_LINK` as a duration (None when 0: the kernel's defaults).
///
/// Errors: a bad knob value.
pub(crate) fn silent_link(cfg: &Config) -> Result<Option<Duration>> {
    let s = cfg.int("RNCCL_SILENT_LINK")?;
    Ok((s > 0).then(|| Duration::from_secs(s as u64)))
}

/// Makes a peer host that stops answering fail `sock` with `ETIMEDOUT` after about `after`
/// (`RNCCL_SILENT_LINK`) instead of the kernel's defaults: TCP keepalive probes after
/// `after / 2` idle, every `after / 8`, 4 of them, and `TCP_USER_TIMEOUT` = `after` for data the
/// peer's host never acknowledges (tcp(7)). A host that answers keeps the connection, however
/// long its process takes to read (Linux resets the count on every acknowledged zero-window
/// probe). `None` leaves the kernel's defaults. Best effort: a socket that refuses the options
/// keeps the defaults.
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
