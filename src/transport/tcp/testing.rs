//! Connections for tests of what runs over TCP ends (this module's own tests, the GPU proxy's):
//! real ends connected over loopback through a [`DataListener`], and raw peers that write and
//! read bytes as a broken or hostile rank would.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::listener::DataListener;
use super::{Collect, Dial, Slots, TcpReceiver, TcpSender, collect, dial, prepare_socket};
use crate::bootstrap::{Deadline, Retry};

/// The job magic of test connections.
const MAGIC: u64 = 0x7e57;

/// A connected pair over loopback with `nsocks` sockets: the sending end (which names its peer
/// `to`) over `send`, the receiving end (naming its peer `from`) over `recv`, both driven by the
/// caller (no helper threads).
pub(crate) fn ends(
    nsocks: usize,
    slot_bytes: usize,
    send: Slots,
    recv: Slots,
    to: &str,
    from: &str,
) -> (TcpSender, TcpReceiver) {
    let l = DataListener::bind("127.0.0.1".parse().unwrap(), MAGIC).unwrap();
    let deadline = Deadline::after(Duration::from_secs(10));
    let d = Dial {
        addr: l.addr(),
        peer: to,
        what: to,
        magic: MAGIC,
        token: 1,
        sockets: nsocks,
        retry: Retry {
            count: 3,
            step: Duration::from_millis(10),
        },
        deadline,
        silent: None,
        congestion: None,
    };
    let s = dial(&d, slot_bytes, 0, send).unwrap();
    let abort = AtomicBool::new(false);
    let c = Collect {
        listener: &l,
        token: 1,
        sockets: nsocks,
        peer: from,
        what: from,
        deadline,
        abort: &abort,
        gave_up: &|| None,
        silent: None,
    };
    let r = collect(&c, slot_bytes, 0, recv).unwrap();
    (s, r)
}

/// One socket of a rank that does not follow the protocol, blocking.
pub(crate) struct RawPeer(TcpStream);

impl RawPeer {
    /// Writes all of `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).unwrap();
    }

    /// Reads exactly `n` bytes.
    pub(crate) fn read(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        self.0.read_exact(&mut b).unwrap();
        b
    }

    /// Shrinks the socket's buffers to about `bytes` (a peer that reads nothing fills them).
    pub(crate) fn shrink_buffers(&self, bytes: usize) {
        let s = socket2::SockRef::from(&self.0);
        s.set_send_buffer_size(bytes).unwrap();
        s.set_recv_buffer_size(bytes).unwrap();
    }
}

/// `n` loopback socket pairs, prepared as data sockets on the first side.
fn pairs(n: usize) -> Vec<(TcpStream, TcpStream)> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    (0..n)
        .map(|_| {
            let c = TcpStream::connect(addr).unwrap();
            let (s, _) = l.accept().unwrap();
            prepare_socket(&c, None).unwrap();
            (c, s)
        })
        .collect()
}

/// A receiving end (naming its peer `from`) whose `nsocks` sockets raw peers write into.
pub(crate) fn receiver_with_raw_peers(
    nsocks: usize,
    slot_bytes: usize,
    slots: Slots,
    from: &str,
) -> (TcpReceiver, Vec<RawPeer>) {
    let (mine, theirs): (Vec<_>, Vec<_>) = pairs(nsocks).into_iter().unzip();
    let r = TcpReceiver::new(mine, slot_bytes, 0, from, slots).unwrap();
    (r, theirs.into_iter().map(RawPeer).collect())
}

/// A sending end (naming its peer `to`) whose `nsocks` sockets raw peers read from; its own
/// sockets' send buffers shrunk to about `sndbuf` bytes when given.
pub(crate) fn sender_with_raw_peers(
    nsocks: usize,
    slot_bytes: usize,
    slots: Slots,
    to: &str,
    sndbuf: Option<usize>,
) -> (TcpSender, Vec<RawPeer>) {
    let (mine, theirs): (Vec<_>, Vec<_>) = pairs(nsocks).into_iter().unzip();
    for s in mine.iter().filter(|_| sndbuf.is_some()) {
        let b = sndbuf.unwrap_or_default();
        socket2::SockRef::from(s).set_send_buffer_size(b).unwrap();
    }
    let s = TcpSender::new(mine, slot_bytes, 0, to, slots).unwrap();
    (s, theirs.into_iter().map(RawPeer).collect())
}
