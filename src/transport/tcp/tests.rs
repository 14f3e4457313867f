//! TCP transport tests over loopback socket pairs.

use super::*;
use crate::transport::{PeerState, RecvEnd, SendEnd};
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
    let (tx, rx) = socket_pairs(nsocks);
    let slot = 4096;
    let mut s = TcpSender::new(tx, slot, nthreads, "rank 1").unwrap();
    let mut r = TcpReceiver::new(rx, slot, nthreads, "rank 0").unwrap();
    let total = 300usize;
    let (mut sent, mut got) = (0usize, 0usize);
    while got < total {
        if sent < total
            && let Some(p) = s.acquire()
        {
            let n = 1 + (sent * 37) % slot;
            // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
            unsafe { std::ptr::write_bytes(p, (sent % 251) as u8, n) };
            s.post(n);
            sent += 1;
        }
        s.progress().unwrap();
        r.progress().unwrap();
        if let Some((p, n)) = r.peek() {
            assert_eq!(n, 1 + (got * 37) % slot);
            // SAFETY: the slot from peek() holds the bytes it reports, and the FIFO keeps it until release().
            let data = unsafe { std::slice::from_raw_parts(p, n) };
            assert!(data.iter().all(|&b| b == (got % 251) as u8), "slot {got}");
            r.release();
            got += 1;
        }
    }
    while s.pending() {
        s.progress().unwrap();
    }
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

#[test]
fn clean_close_after_data_is_not_an_error_until_more_is_wanted() {
    let (tx, rx) = socket_pairs(1);
    let mut s = TcpSender::new(tx, 1024, 0, "rank 1").unwrap();
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 0").unwrap();
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

#[test]
fn every_socket_is_drained_before_the_peer_counts_as_gone() {
    // The sender posts six slots over three sockets and closes them all before the receiver
    // reads anything: the first socket's end of stream must not abandon the others' frames.
    let (tx, rx) = socket_pairs(3);
    let mut s = TcpSender::new(tx, 1024, 0, "rank 1").unwrap();
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 0").unwrap();
    for i in 0..6u8 {
        let p = s.acquire().unwrap();
        // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
        unsafe { *p = i };
        s.post(1);
    }
    while s.pending() {
        s.progress().unwrap();
    }
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

#[test]
fn close_mid_slot_is_an_error_naming_the_peer() {
    let (mut tx, rx) = socket_pairs(1);
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 7 (host x)").unwrap();
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
    let mut r = TcpReceiver::new(rx, 1024, 0, "rank 2").unwrap();
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
