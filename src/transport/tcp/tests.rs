//! TCP transport tests over loopback socket pairs.

use super::testing::{ends, receiver_with_raw_peers, sender_with_raw_peers};
use super::*;
use crate::transport::{InPlaceRecv, InPlaceSend, PeerState, RecvEnd, SendEnd, TransportError};
use std::io::Write;
use std::net::TcpListener;

fn socket_pairs(n: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut tx = Vec::new();
    let mut rx = Vec::new();
    for _ in 0..n {
        let c = TcpStream::connect(addr).unwrap();
        let (a, _) = l.accept().unwrap();
        prepare_socket(&c, None).unwrap();
        prepare_socket(&a, None).unwrap();
        tx.push(c);
        rx.push(a);
    }
    (tx, rx)
}

fn stream_through(nsocks: usize, nthreads: usize) {
    stream_slots(nsocks, nthreads, 4096, |i| 1 + (i * 37) % 4096);
}

/// 300 slots of `size(i)` bytes each (at most `slot`) through `nsocks` sockets, checked.
fn stream_slots(nsocks: usize, nthreads: usize, slot: usize, size: impl Fn(usize) -> usize) {
    let (tx, rx) = socket_pairs(nsocks);
    let mut s = TcpSender::new(tx, slot, nthreads, "rank 1", Slots::owned()).unwrap();
    let mut r = TcpReceiver::new(rx, slot, nthreads, "rank 0", Slots::owned()).unwrap();
    exchange_slots(&mut s, &mut r, 300, size, |_, _, _| {}, |_, _, _| {});
}

#[test]
fn one_socket_inline() {
    stream_through(1, 0);
}

#[test]
fn several_sockets_inline() {
    stream_through(3, 0);
}

#[test]
fn several_sockets_with_helper_threads() {
    stream_through(4, 2);
}

/// Tiny frames, whose headers and bytes share one read-ahead buffer (several to a read), among
/// frames larger than it, whose bytes past it go straight into their slots.
#[test]
fn small_and_large_frames_share_the_read_ahead() {
    let slot = 64 << 10;
    let size = |i: usize| match i % 4 {
        0 | 1 => 1 + i % 13,
        // Just past what one read-ahead buffer holds with the header.
        2 => framing::READ_AHEAD - framing::FRAME_HEADER + 1 + i,
        _ => slot - i,
    };
    stream_slots(1, 0, slot, size);
    stream_slots(2, 0, slot, size);
}

/// A receiving socket keeps its acknowledgements delayed (one way, the kernel would send one
/// per small frame from inside the read that drains it) and asks again after the kernel left
/// that mode; a sending socket is left as it was.
#[test]
fn receiving_sockets_delay_acknowledgements_and_ask_again() {
    let (tx, rx) = socket_pairs(1);
    let (tx_view, rx_view) = (tx[0].try_clone().unwrap(), rx[0].try_clone().unwrap());
    let quick = |s: &TcpStream| socket2::SockRef::from(s).tcp_quickack().unwrap();
    assert!(quick(&rx_view), "a fresh socket acknowledges at once");
    let mut s = TcpSender::new(tx, 64, 0, "rank 1", Slots::owned()).unwrap();
    let mut r = TcpReceiver::new(rx, 64, 0, "rank 0", Slots::owned()).unwrap();
    assert!(!quick(&rx_view));
    assert!(quick(&tx_view));
    // The kernel leaves delayed mode when its timer fires: stand in for it.
    socket2::SockRef::from(&rx_view)
        .set_tcp_quickack(true)
        .unwrap();
    let n = framing::DELAY_ACKS_EVERY as usize;
    exchange_slots(&mut s, &mut r, n - 1, |_| 8, |_, _, _| {}, |_, _, _| {});
    assert!(quick(&rx_view), "asked again too early");
    exchange_slots(&mut s, &mut r, 1, |_| 8, |_, _, _| {}, |_, _, _| {});
    assert!(!quick(&rx_view), "not asked again after {n} frames");
}

/// Slots sent from the caller's memory (`post_from`, no copy into the slot) and from the slot
/// itself, interleaved, arrive in order with their bytes, on one socket and on several driven
/// by helper threads.
fn post_from_the_callers_memory(nsocks: usize, nthreads: usize) {
    let (tx, rx) = socket_pairs(nsocks);
    let slot = 4096;
    let mut s = TcpSender::new(tx, slot, nthreads, "rank 1", Slots::owned()).unwrap();
    let mut r = TcpReceiver::new(rx, slot, nthreads, "rank 0", Slots::owned()).unwrap();
    assert!(s.sends_from_caller());
    let total = 200usize;
    let size = |i: usize| 1 + (i * 53) % slot;
    // The caller's buffer: slot i's bytes at i * slot, as a collective's input would hold them.
    let buf: Vec<u8> = (0..total * slot)
        .map(|j| (j / slot * 7 + j) as u8)
        .collect();
    let (mut sent, mut got) = (0usize, 0usize);
    while got < total {
        if sent < total
            && let Some(p) = s.acquire()
        {
            if sent % 3 == 0 {
                // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
                unsafe {
                    std::ptr::copy_nonoverlapping(buf[sent * slot..].as_ptr(), p, size(sent))
                };
                s.post(size(sent));
            } else {
                // SAFETY: `buf` outlives the sender's use of it (the loop below waits until
                // nothing is pending) and is not written.
                unsafe { s.post_from(buf[sent * slot..].as_ptr(), size(sent)) };
            }
            sent += 1;
        }
        s.progress().unwrap();
        r.progress().unwrap();
        if let Some((p, n)) = r.peek() {
            assert_eq!(n, size(got), "slot {got}");
            // SAFETY: the slot from peek() holds the bytes it reports until release().
            let data = unsafe { std::slice::from_raw_parts(p, n) };
            assert_eq!(data, &buf[got * slot..got * slot + n], "slot {got}");
            r.release();
            got += 1;
        }
    }
    while s.pending() {
        s.progress().unwrap();
    }
}

#[test]
fn post_from_the_callers_memory_inline() {
    post_from_the_callers_memory(1, 0);
}

#[test]
fn post_from_the_callers_memory_with_helper_threads() {
    post_from_the_callers_memory(3, 2);
}

#[test]
fn clean_close_after_data_is_not_an_error_until_more_is_wanted() {
    let (tx, rx) = socket_pairs(1);
    let mut s = TcpSender::new(tx, 1024, 0, "rank 1", Slots::owned()).unwrap();
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 0", Slots::owned()).unwrap();
    let p = s.acquire().unwrap();
    // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
    unsafe { *p = 9 };
    s.post(1);
    while s.pending() {
        s.progress().unwrap();
    }
    drop(s);
    let start = std::time::Instant::now();
    while r.peer_state() == PeerState::Alive || r.peek().is_none() {
        r.progress().unwrap();
        assert!(start.elapsed().as_secs() < 10);
        if r.peek().is_some() {
            break;
        }
    }
    // SAFETY: the slot from peek() holds the bytes it reports, and the FIFO keeps it until release().
    assert_eq!(r.peek().map(|(p, n)| (unsafe { *p }, n)), Some((9, 1)));
    assert_eq!(
        r.peer_state(),
        PeerState::Alive,
        "a filled slot is still there"
    );
    r.release();
    while r.peer_state() == PeerState::Alive {
        r.progress().unwrap();
        assert!(start.elapsed().as_secs() < 10);
    }
    assert_eq!(r.peer_state(), PeerState::Gone);
}

/// Posts `n` one-byte slots holding 0, 1, … and hands them all to the kernel.
fn send_byte_slots(s: &mut TcpSender, n: u8) {
    for i in 0..n {
        let p = s.acquire().unwrap();
        // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
        unsafe { *p = i };
        s.post(1);
    }
    while s.pending() {
        s.progress().unwrap();
    }
}

#[test]
fn every_socket_is_drained_before_the_peer_counts_as_gone() {
    // The sender posts six slots over three sockets and closes them all before the receiver
    // reads anything: the first socket's end of stream must not abandon the others' frames.
    let (tx, rx) = socket_pairs(3);
    let mut s = TcpSender::new(tx, 1024, 0, "rank 1", Slots::owned()).unwrap();
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 0", Slots::owned()).unwrap();
    send_byte_slots(&mut s, 6);
    drop(s);
    let start = std::time::Instant::now();
    let mut got = Vec::new();
    while r.peer_state() == PeerState::Alive {
        r.progress().unwrap();
        if let Some((p, n)) = r.peek() {
            // SAFETY: the slot from peek() holds the bytes it reports, and the FIFO keeps it until release().
            got.push((unsafe { *p }, n));
            r.release();
        }
        assert!(start.elapsed().as_secs() < 10, "received {got:?}");
    }
    assert_eq!(got, (0..6u8).map(|i| (i, 1)).collect::<Vec<_>>());
}

/// A sender that vanishes (its sockets closed, no goodbye) is seen gone at once even with more
/// sockets than slots, where the sockets after the first NSLOTS wait for room and do not read:
/// what decides is the socket that carries the slot the consumer waits for. Inline and with
/// helper threads.
#[test]
fn a_vanished_sender_is_seen_with_more_sockets_than_slots() {
    for nthreads in [0, 3] {
        let nsocks = crate::conn::NSLOTS + 4;
        let (tx, rx) = socket_pairs(nsocks);
        let mut r = TcpReceiver::new(rx, 1024, nthreads, "rank 1", Slots::owned()).unwrap();
        let mut s = TcpSender::new(tx, 1024, 0, "rank 0", Slots::owned()).unwrap();
        // Three slots arrive and are consumed, then the sender's sockets close unannounced.
        send_byte_slots(&mut s, 3);
        let start = std::time::Instant::now();
        let mut got = 0;
        while got < 3 {
            r.progress().unwrap();
            if r.peek().is_some() {
                r.release();
                got += 1;
            }
            assert!(
                start.elapsed().as_secs() < 10,
                "{nthreads} threads: got {got}"
            );
        }
        // Dropped without its goodbye: as a killed process's sockets close.
        drop(s);
        while r.peer_state() == PeerState::Alive {
            r.progress().unwrap();
            assert!(
                start.elapsed().as_secs() < 10,
                "{nthreads} threads: the vanished sender was never seen"
            );
        }
        assert_eq!(r.peer_state(), PeerState::Gone);
        assert!(r.closed_without_goodbye(), "{nthreads} threads");
    }
}

#[test]
fn close_mid_slot_is_an_error_naming_the_peer() {
    let (mut tx, rx) = socket_pairs(1);
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 7 (host x)", Slots::owned()).unwrap();
    tx[0].set_nonblocking(false).unwrap();
    tx[0]
        .write_all(&[100, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3])
        .unwrap();
    drop(tx);
    let err = loop {
        match r.progress() {
            Err(e) => break e,
            Ok(_) => std::thread::yield_now(),
        }
    };
    assert!(
        matches!(&err, crate::transport::TransportError::Closed { peer, .. } if peer == "rank 7 (host x)"),
        "{err:?}"
    );
    assert!(err.to_string().contains("middle of a slot"), "{err}");
}

#[test]
fn garbage_frame_is_rejected() {
    let (mut tx, rx) = socket_pairs(1);
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 2", Slots::owned()).unwrap();
    tx[0].set_nonblocking(false).unwrap();
    tx[0].write_all(&[0xff; 16]).unwrap();
    let err = loop {
        match r.progress() {
            Err(e) => break e,
            Ok(_) => std::thread::yield_now(),
        }
    };
    assert!(
        matches!(err, crate::transport::TransportError::Malformed { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("malformed frame from rank 2"),
        "{err}"
    );
}

/// Peers open every channel's data sockets before this rank accepts one: far more than std's
/// backlog of 128 must connect at once (a GPU communicator between hosts opens hundreds).
#[test]
fn the_data_listener_holds_hundreds_of_unaccepted_connections() {
    let l = super::listener::DataListener::bind("127.0.0.1".parse().unwrap(), 1).unwrap();
    let t = std::time::Instant::now();
    let socks: Vec<TcpStream> = (0..600)
        .map(|i| {
            TcpStream::connect_timeout(&l.addr(), std::time::Duration::from_secs(3))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    assert_eq!(socks.len(), 600, "{:?}", t.elapsed());
}

/// A sending end's data sockets take the congestion control it is given before they connect,
/// and the kernel's default without one; the receiver still collects them by their hello.
#[test]
fn dialed_sockets_take_the_congestion_control() {
    let l = super::listener::DataListener::bind("127.0.0.1".parse().unwrap(), 5).unwrap();
    let deadline = Deadline::after(std::time::Duration::from_secs(10));
    let dial = |token: u64, sockets: usize, congestion: Option<&'static str>| Dial {
        addr: l.addr(),
        peer: "rank 1",
        what: "rank 1",
        magic: 5,
        token,
        sockets,
        retry: Retry {
            count: 3,
            step: std::time::Duration::from_millis(10),
        },
        deadline,
        silent: None,
        congestion,
    };
    let cc = |s: &TcpStream| {
        let name = socket2::SockRef::from(s).tcp_congestion().unwrap();
        String::from_utf8_lossy(&name)
            .trim_end_matches('\0')
            .to_string()
    };
    let reno = super::listener::connect(&dial(9, 2, Some("reno"))).unwrap();
    assert!(reno.iter().all(|s| cc(s) == "reno"));
    let plain = super::listener::connect(&dial(10, 1, None)).unwrap();
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    assert_eq!(cc(&plain[0]), default.trim());
    let abort = std::sync::atomic::AtomicBool::new(false);
    let got = l
        .accept(9, 2, "rank 0", deadline, &abort, &|| None)
        .unwrap();
    assert_eq!(got.len(), 2);
    // A name the kernel refuses fails the dial, before any connection is made.
    let e = super::listener::connect(&dial(11, 1, Some("no-such-cc")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("preparing a socket to 127.0.0.1:"), "{e}");
}

/// Drives `end` until it fails (at most 10 s).
fn failure(mut progress: impl FnMut() -> Result<bool, TransportError>) -> TransportError {
    let start = std::time::Instant::now();
    loop {
        match progress() {
            Err(e) => return e,
            Ok(_) => std::thread::yield_now(),
        }
        assert!(start.elapsed().as_secs() < 10, "no failure within 10 s");
    }
}

/// A header for `size` bytes of slot `seq`.
fn header(size: u32, seq: u32) -> Vec<u8> {
    [size.to_le_bytes(), seq.to_le_bytes()].concat()
}

/// Slots in place: the sender frames the caller's slots and the receiver fills the caller's,
/// reporting slots as they arrive whole and handing them back in order.
#[test]
fn slots_in_place_cross_and_come_back() {
    let slot = 512;
    let mut a = vec![0u8; crate::conn::NSLOTS * slot];
    let mut b = vec![0u8; crate::conn::NSLOTS * slot];
    // SAFETY: both buffers hold NSLOTS slots and outlive the ends (dropped at the end of this
    // test, after the ends); the test writes a's slots only before posting them and reads b's
    // only after they arrived.
    let (sa, sb) = unsafe {
        (
            Slots::borrowed(a.as_mut_ptr()),
            Slots::borrowed(b.as_mut_ptr()),
        )
    };
    let (mut s, mut r) = ends(2, slot, sa, sb, "rank 1", "rank 0");
    for round in 0..5u64 {
        for i in 0..crate::conn::NSLOTS as u64 {
            let seq = round * 8 + i;
            let at = (seq % 8) as usize * slot;
            a[at..at + 100].fill(seq as u8);
            s.post(100 + i as usize);
        }
        let start = std::time::Instant::now();
        while r.arrived() < (round + 1) * 8 {
            s.progress().unwrap();
            r.progress().unwrap();
            assert!(start.elapsed().as_secs() < 10);
        }
        assert_eq!(s.completed(), (round + 1) * 8);
        for i in 0..8u64 {
            let seq = round * 8 + i;
            assert_eq!(r.arrived_bytes(seq), 100 + i as usize);
            let at = (seq % 8) as usize * slot;
            assert!(
                b[at..at + 100].iter().all(|&x| x == seq as u8),
                "slot {seq}"
            );
            r.release();
        }
    }
    drop((s, r));
}

/// A clean goodbye ends the receiver's stream quietly (the peer is gone, not failed, and not
/// unannounced); one after an abort fails it, naming the peer.
#[test]
fn goodbyes_are_quiet_unless_the_peer_aborted() {
    for aborted in [false, true] {
        let (mut s, mut r) = ends(2, 256, Slots::owned(), Slots::owned(), "rank 1", "rank 0");
        s.goodbye(aborted);
        if aborted {
            let e = failure(|| r.progress());
            assert!(
                matches!(&e, TransportError::Aborted { peer } if peer == "rank 0"),
                "{e:?}"
            );
            assert!(e.to_string().contains("aborted"), "{e}");
        } else {
            let start = std::time::Instant::now();
            while r.peer_state() == PeerState::Alive {
                r.progress().unwrap();
                assert!(start.elapsed().as_secs() < 10);
            }
            assert!(!r.closed_without_goodbye());
        }
    }
}

/// A receiver that goes after an abort fails a sender that still sends to it.
#[test]
fn a_receiver_saying_it_aborted_fails_the_sender() {
    let (mut s, mut r) = ends(
        1,
        1 << 16,
        Slots::owned(),
        Slots::owned(),
        "rank 1",
        "rank 0",
    );
    r.goodbye(true);
    let e = failure(|| {
        if s.acquire().is_some() {
            s.post(1 << 16);
        }
        s.progress()
    });
    assert!(
        matches!(
            &e,
            TransportError::Aborted { .. } | TransportError::Io { .. }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("rank 1"), "{e}");
}

/// A sender whose receiver's socket goes away while it still has slots for it fails, naming
/// the peer.
#[test]
fn a_receiver_going_away_fails_the_sender() {
    let (mut s, mut raw) = sender_with_raw_peers(2, 4096, Slots::owned(), "rank 1 (host h1)", None);
    let mut posted = 0;
    while posted < 4 {
        if s.acquire().is_some() {
            s.post(4096);
            posted += 1;
        }
        s.progress().unwrap();
    }
    raw[0].read(1000);
    raw.clear();
    let e = failure(|| {
        if s.acquire().is_some() {
            s.post(4096);
        }
        s.progress()
    });
    assert!(e.to_string().contains("rank 1 (host h1)"), "{e}");
}

/// A peer that closes between slots without a goodbye is remembered, not an error: what
/// arrived is delivered.
#[test]
fn a_close_between_slots_is_remembered_not_fatal() {
    let (mut r, mut raw) = receiver_with_raw_peers(1, 100, Slots::owned(), "rank 4");
    raw[0].write(&header(3, 0));
    raw[0].write(&[7, 8, 9]);
    raw.clear();
    let start = std::time::Instant::now();
    while r.peer_state() == PeerState::Alive || r.arrived() == 0 {
        r.progress().unwrap();
        if r.arrived() == 1 && r.closed_without_goodbye() {
            break;
        }
        assert!(start.elapsed().as_secs() < 10);
    }
    assert_eq!((r.arrived(), r.arrived_bytes(0)), (1, 3));
    assert!(r.closed_without_goodbye());
}

/// A frame that stops half way is a frame in progress (`receiving`), which the proxy times.
#[test]
fn half_a_frame_is_a_slot_being_received() {
    let (mut r, mut raw) = receiver_with_raw_peers(1, 1000, Slots::owned(), "rank 2");
    assert!(!r.receiving());
    raw[0].write(&header(800, 0));
    raw[0].write(&[1; 10]);
    let start = std::time::Instant::now();
    while !r.receiving() {
        r.progress().unwrap();
        assert!(start.elapsed().as_secs() < 10);
    }
    assert_eq!(r.arrived(), 0);
}

/// One inline pass reads up to the first small frame it finishes (the consumer takes it before
/// the next socket is read, which a small message's next frame is not sent before), but goes on
/// across sockets after a large frame, which streams on all of them at once.
#[test]
fn a_pass_stops_after_a_small_frame_and_goes_on_after_a_large_one() {
    for (size, per_pass) in [(8, 1), (framing::READ_AHEAD + 100, 2)] {
        let (mut r, mut raw) = receiver_with_raw_peers(2, 8192, Slots::owned(), "rank 2");
        for (seq, peer) in raw.iter_mut().enumerate() {
            peer.write(&header(size as u32, seq as u32));
            peer.write(&vec![seq as u8; size]);
        }
        // Loopback queues the bytes as they are written; the pause covers a slow machine.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(r.progress().unwrap());
        assert_eq!(
            r.arrived(),
            per_pass,
            "frames of {size} bytes after one pass"
        );
        while r.arrived() < 2 {
            r.progress().unwrap();
        }
        for seq in 0..2u8 {
            let (at, n) = r.peek().unwrap();
            // SAFETY: peek's slot holds `n` arrived bytes until it is released.
            let got = unsafe { std::slice::from_raw_parts(at, n) };
            assert!(n == size && got.iter().all(|&b| b == seq), "slot {seq}");
            r.release();
        }
    }
}

/// A frame larger than a slot is refused before a byte of it lands.
#[test]
fn an_oversized_frame_is_refused() {
    let mut mem = vec![0u8; crate::conn::NSLOTS * 64 + 64];
    // SAFETY: the buffer holds NSLOTS slots of 64 bytes (and 64 more) and outlives the end.
    let slots = unsafe { Slots::borrowed(mem.as_mut_ptr()) };
    let (mut r, mut raw) = receiver_with_raw_peers(1, 64, slots, "rank 1");
    raw[0].write(&header(65, 0));
    raw[0].write(&[0xee; 65]);
    let e = failure(|| r.progress());
    assert!(e.to_string().contains("malformed frame from rank 1"), "{e}");
    drop(r);
    assert!(mem.iter().all(|&b| b == 0), "nothing landed");
}

/// Sends `n` slots of `size(i)` bytes (byte `j` of slot `i` is `byte(i, j)`) from `s` while
/// `r` receives them; `ask(i, got)` runs for each slot `i` before it may arrive (the consumer's
/// requests), `check(i, p, n)` for each slot shown, before its release. Checks every byte.
fn exchange_slots(
    s: &mut TcpSender,
    r: &mut TcpReceiver,
    n: usize,
    size: impl Fn(usize) -> usize,
    mut ask: impl FnMut(&mut TcpReceiver, usize, usize),
    mut check: impl FnMut(usize, *const u8, usize),
) {
    let byte = |i: usize, j: usize| (i * 31 + j) as u8;
    let (mut sent, mut got, mut asked) = (0usize, 0usize, 0usize);
    while got < n {
        while asked < n && asked < got + crate::conn::NSLOTS {
            ask(r, asked, got);
            asked += 1;
        }
        if sent < n
            && let Some(p) = s.acquire()
        {
            // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
            let data = unsafe { std::slice::from_raw_parts_mut(p, size(sent)) };
            for (j, b) in data.iter_mut().enumerate() {
                *b = byte(sent, j);
            }
            s.post(size(sent));
            sent += 1;
        }
        s.progress().unwrap();
        r.progress().unwrap();
        if let Some((p, len)) = r.peek() {
            assert_eq!(len, size(got));
            // SAFETY: peek() shows len bytes that stay until release().
            let data = unsafe { std::slice::from_raw_parts(p, len) };
            assert!(
                data.iter().enumerate().all(|(j, &b)| b == byte(got, j)),
                "slot {got}"
            );
            check(got, p, len);
            r.release();
            got += 1;
        }
    }
    while s.pending() {
        s.progress().unwrap();
    }
}

/// Slots the consumer asks for in its memory ([`RecvEnd::receive_into`]) land there, with
/// their bytes and nothing past them; slots not asked for, or asked for with too little room,
/// land in the end's slots as usual, and the consumer's memory keeps its bytes.
#[test]
fn slots_land_where_the_consumer_asks() {
    let slot = 8192;
    let (tx, rx) = socket_pairs(2);
    let mut s = TcpSender::new(tx, slot, 0, "rank 1", Slots::owned()).unwrap();
    let mut r = TcpReceiver::new(rx, slot, 0, "rank 0", Slots::owned()).unwrap();
    assert!(r.receives_into_caller());
    let total = 120usize;
    // Small frames (through the read-ahead buffer) and large ones.
    let size = |i: usize| {
        if i.is_multiple_of(2) {
            1 + i % 97
        } else {
            slot - i
        }
    };
    // Slot i may land at out[i * slot..]: asked for unless i % 5 == 0, with one byte too few
    // when i % 7 == 0.
    let mut out = vec![0xEEu8; total * slot];
    let base = out.as_mut_ptr();
    let wants = |i: usize| !i.is_multiple_of(5);
    let room = |i: usize| {
        if i.is_multiple_of(7) {
            size(i) - 1
        } else {
            size(i)
        }
    };
    let lands = |i: usize| wants(i) && room(i) >= size(i);
    let mut landed = 0;
    exchange_slots(
        &mut s,
        &mut r,
        total,
        size,
        |r, i, got| {
            if wants(i) {
                // SAFETY: out[i * slot..] holds slot >= room(i) bytes, which the test reads
                // only once the slot was shown.
                unsafe { r.receive_into(i - got, base.wrapping_add(i * slot), room(i)) };
            }
        },
        |i, p, _| {
            let mine = base.wrapping_add(i * slot).cast_const();
            assert_eq!(p == mine, lands(i), "slot {i} landed in the wrong place");
            landed += usize::from(lands(i));
        },
    );
    assert_eq!(landed, (0..total).filter(|&i| lands(i)).count());
    for i in 0..total {
        let region = &out[i * slot..(i + 1) * slot];
        let filled = if lands(i) { size(i) } else { 0 };
        assert!(
            region[filled..].iter().all(|&b| b == 0xEE),
            "bytes past slot {i}'s landing were written"
        );
    }
}

/// Requests withdrawn before their slots arrive ([`RecvEnd::withdraw`]: an operation that
/// failed) leave the consumer's memory alone; with helper threads, which could be inside a read
/// into it when it is taken back, nothing lands there at all.
#[test]
fn withdrawn_requests_and_helper_threads_leave_the_callers_memory_alone() {
    for nthreads in [0, 1] {
        let slot = 4096;
        let (tx, rx) = socket_pairs(1);
        let mut s = TcpSender::new(tx, slot, nthreads, "rank 1", Slots::owned()).unwrap();
        let mut r = TcpReceiver::new(rx, slot, nthreads, "rank 0", Slots::owned()).unwrap();
        assert_eq!(r.receives_into_caller(), nthreads == 0);
        let mut out = vec![0xEEu8; crate::conn::NSLOTS * slot];
        let base = out.as_mut_ptr();
        exchange_slots(
            &mut s,
            &mut r,
            crate::conn::NSLOTS,
            |i| 100 + i,
            |r, i, got| {
                // SAFETY: out[i * slot..] holds slot bytes, untouched by the test meanwhile.
                unsafe { r.receive_into(i - got, base.wrapping_add(i * slot), slot) };
                if nthreads == 0 && i + 1 == crate::conn::NSLOTS {
                    r.withdraw();
                }
            },
            |i, p, _| {
                assert_ne!(p, base.wrapping_add(i * slot).cast_const(), "slot {i}");
            },
        );
        assert!(out.iter().all(|&b| b == 0xEE));
    }
}
