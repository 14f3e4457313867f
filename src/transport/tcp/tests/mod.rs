//! TCP transport tests over loopback socket pairs: slots streamed through the sockets, the
//! ends closing and the listener ([`streams`]), and slots in the caller's memory with their
//! frames, goodbyes and aborts ([`in_place`]). The helpers both use live here.

mod in_place;
mod streams;

use super::testing::{ends, receiver_with_raw_peers, sender_with_raw_peers};
use super::*;
use crate::transport::{InPlaceRecv, InPlaceSend, PeerState, RecvEnd, SendEnd, TransportError};
use std::io::Write;
use std::net::TcpListener;

/// `n` connected loopback socket pairs, prepared as the transport prepares its sockets:
/// the connecting ends, then the accepted ones.
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

/// 300 slots of `size(i)` bytes each (at most `slot`) through `nsocks` sockets, checked.
fn stream_slots(nsocks: usize, nthreads: usize, slot: usize, size: impl Fn(usize) -> usize) {
    let (tx, rx) = socket_pairs(nsocks);
    let mut s = TcpSender::new(tx, slot, nthreads, "rank 1", Slots::owned()).unwrap();
    let mut r = TcpReceiver::new(rx, slot, nthreads, "rank 0", Slots::owned()).unwrap();
    exchange_slots(&mut s, &mut r, 300, size, |_, _, _| {}, |_, _, _| {});
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
