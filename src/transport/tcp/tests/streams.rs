//! Slots streamed through one or more sockets, inline and with helper threads; the ends
//! closing, cleanly or not, and the peer counted as gone; the data listener and the socket
//! options a dialed socket takes.

use super::*;

fn stream_through(nsocks: usize, nthreads: usize) {
    stream_slots(nsocks, nthreads, 4096, |i| 1 + (i * 37) % 4096);
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
