//! Whether the far end of a connection that carries nothing towards this end is gone: a look at
//! the socket that neither reads nor waits.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, recv};

/// How the far end of `s` is gone, in words, if it is: it closed its end (its process exited),
/// reset the connection, or its host stopped answering keepalive probes. `None` while it is
/// there, or when the socket cannot tell.
pub(crate) fn far_end_gone(s: &TcpStream) -> Option<&'static str> {
    let mut byte = [0u8; 1];
    match recv(
        s.as_raw_fd(),
        &mut byte,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => Some("closed its end of the connection"),
        Err(Errno::ETIMEDOUT) => Some(
            "stopped answering on the connection (TCP keepalive got no reply: its host or the \
             network between is down)",
        ),
        Err(Errno::ECONNRESET | Errno::EPIPE) => Some("reset the connection"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::far_end_gone;

    #[test]
    fn a_closed_far_end_is_seen_and_a_live_one_is_not() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        assert_eq!(far_end_gone(&c), None);
        drop(a);
        let mut seen = None;
        for _ in 0..100 {
            seen = far_end_gone(&c);
            if seen.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(seen, Some("closed its end of the connection"));
    }
}
