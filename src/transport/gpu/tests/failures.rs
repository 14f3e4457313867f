//! What the proxy makes of failures over loopback: peers closing mid-slot or between slots,
//! receivers going away, goodbyes, aborts, stalled and oversized frames. Each failure stops
//! the kernel and names the peer and the channel.

use super::*;

/// The frame header for `size` bytes of slot `seq`.
fn header(size: u32, seq: u32) -> Vec<u8> {
    [size.to_le_bytes(), seq.to_le_bytes()].concat()
}

/// A receiving end over `e`'s slots whose sockets raw peers write into, in the name of rank
/// `peer`.
fn recv_link(e: &End, nsocks: usize, peer: usize) -> (Link, Vec<testing::RawPeer>) {
    let (r, raw) =
        testing::receiver_with_raw_peers(nsocks, e.fifo.slot_bytes, e.slots(), &name(peer));
    (Link::Recv(Box::new(r)), raw)
}

/// A peer whose socket ends in the middle of a slot: the receiving side reports it, naming the
/// peer, its host and the channel, and stops its kernel.
#[test]
fn a_peer_closing_mid_slot_is_an_error_naming_it() {
    let slot = 1000;
    let rb = Rank::new();
    let eb = End::new(slot);
    let (lb, mut raw) = recv_link(&eb, 1, 3);
    let pb = start(vec![conn(lb, &eb, 3, 5)], &rb, LONG);
    let kb = Kernel::new(&eb, &rb, LONG);
    raw[0].write(&header(500, 0));
    raw[0].write(&[7u8; 100]);
    let t0 = Instant::now();
    raw.clear();
    let err = kb.recv(0..1).unwrap_err();
    assert!(err.contains("aborted"), "{err}");
    let e = pb
        .failure()
        .expect("the proxy reports the peer")
        .to_string();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    for want in [
        "rank 3",
        "host host3",
        "pid 1003",
        "channel 5",
        "middle of a slot",
    ] {
        assert!(e.contains(want), "{want:?} missing from: {e}");
    }
    assert!(rb.kernel_aborted());
}

/// A peer that closes between slots without a goodbye (a process that exited after its last
/// send without destroying its communicator) is no error by itself: what arrived is delivered,
/// and the proxy remembers the peer for the kernel's timeout report.
#[test]
fn a_close_between_slots_is_remembered_not_fatal() {
    let rb = Rank::new();
    let eb = End::new(100);
    let (lb, mut raw) = recv_link(&eb, 1, 4);
    let pb = start(vec![conn(lb, &eb, 4, 0)], &rb, LONG);
    raw[0].write(&header(size_of(0, 100) as u32, 0));
    raw[0].write(
        &(0..size_of(0, 100))
            .map(|i| pattern(0, i))
            .collect::<Vec<u8>>(),
    );
    raw.clear();
    Kernel::new(&eb, &rb, LONG).recv(0..1).unwrap();
    assert!(eventually(Duration::from_secs(2), || pb.closed_without_goodbye(4)));
    assert!(pb.failure().is_none(), "{:?}", pb.failure());
    assert!(!rb.kernel_aborted());
}

/// A receiver whose sockets go away while the sender still posts: the sending side fails
/// within its deadline, names the peer, and stops its kernel.
#[test]
fn a_receiver_going_away_fails_the_sender() {
    let slot = 4096;
    let ra = Rank::new();
    let ea = End::new(slot);
    let (s, mut raw) = testing::sender_with_raw_peers(2, slot, ea.slots(), &name(1), None);
    let pa = start(vec![conn(Link::Send(Box::new(s)), &ea, 1, 7)], &ra, LONG);
    let ka = Kernel::new(&ea, &ra, LONG);
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..u64::MAX));
        // Let some slots through, then the receiving "process" dies.
        raw[0].read(1000);
        let t0 = Instant::now();
        raw.clear();
        let err = t.join().unwrap().unwrap_err();
        assert!(err.contains("aborted"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    });
    let e = pa
        .failure()
        .expect("the proxy reports the peer")
        .to_string();
    for want in ["rank 1", "host host1", "channel 7"] {
        assert!(e.contains(want), "{want:?} missing from: {e}");
    }
}

/// A proxy that stops says goodbye: its peer's proxy takes a clean one quietly, and one after an
/// abort as the peer's failure (so peers of an aborted rank fail fast).
#[test]
fn goodbyes_are_quiet_unless_the_peer_aborted() {
    for aborted in [false, true] {
        let slot = 300;
        let (ra, rb) = (Rank::new(), Rank::new());
        let (ea, eb) = (End::new(slot), End::new(slot));
        let (la, lb) = tcp_links(2, &ea, 1, &eb, 0);
        let mut pa = start(vec![conn(la, &ea, 1, 1)], &ra, LONG);
        let pb = start(vec![conn(lb, &eb, 0, 1)], &rb, LONG);
        let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
        std::thread::scope(|sc| {
            let t = sc.spawn(move || ka.send(0..20));
            kb.recv(0..20).unwrap();
            t.join().unwrap().unwrap();
        });
        if aborted {
            ra.abort.store(true, Ordering::SeqCst);
            assert!(eventually(Duration::from_secs(2), || !pa.running()));
        }
        pa.stop();
        if aborted {
            assert!(eventually(Duration::from_secs(2), || pb
                .failure()
                .is_some()));
            let e = pb.failure().unwrap().to_string();
            assert!(e.contains("rank 0") && e.contains("aborted"), "{e}");
            assert!(rb.kernel_aborted());
        } else {
            std::thread::sleep(Duration::from_millis(50));
            assert!(pb.failure().is_none(), "{:?}", pb.failure());
            assert!(!pb.closed_without_goodbye(0));
            assert!(pb.running());
        }
    }
}

/// Raising the communicator's abort flag stops a proxy that waits: a sender whose peer reads
/// nothing, and a receiver whose peer sends nothing.
#[test]
fn abort_unblocks_waiting_proxies() {
    let slot = 1 << 20;
    let r = Rank::new();
    let (es, er) = (End::new(slot), End::new(slot));
    let (s, sink) = testing::sender_with_raw_peers(1, slot, es.slots(), &name(1), Some(8192));
    sink[0].shrink_buffers(8192);
    let (lr, _silent) = recv_link(&er, 1, 1);
    let p = start(
        vec![
            conn(Link::Send(Box::new(s)), &es, 1, 0),
            conn(lr, &er, 1, 1),
        ],
        &r,
        LONG,
    );
    let k = Kernel::new(&es, &r, LONG);
    k.send(0..SLOTS).unwrap(); // 8 MiB that the peer never reads
    std::thread::sleep(Duration::from_millis(20));
    assert!(es.load(es.fifo.head) < SLOTS, "the peer read nothing");
    assert!(p.running());
    let t0 = Instant::now();
    r.abort.store(true, Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(1), || !p.running()));
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert!(p.failure().is_none(), "an abort is not the proxy's failure");
    drop(sink);
}

/// A frame that stops arriving half way fails the connection after the stall timeout.
#[test]
fn a_stalled_frame_times_out_naming_the_peer() {
    let rb = Rank::new();
    let eb = End::new(1000);
    let (lb, mut raw) = recv_link(&eb, 1, 2);
    let pb = start(vec![conn(lb, &eb, 2, 4)], &rb, Duration::from_millis(300));
    raw[0].write(&header(800, 0));
    raw[0].write(&[1u8; 10]);
    assert!(eventually(Duration::from_secs(3), || pb
        .failure()
        .is_some()));
    let e = pb.failure().unwrap();
    assert!(matches!(e, crate::error::Error::Timeout { .. }), "{e}");
    let e = e.to_string();
    assert!(e.contains("rank 2") && e.contains("channel 4"), "{e}");
    assert!(rb.kernel_aborted());
    drop(raw);
}

/// A frame larger than a slot is a protocol error, not a buffer overrun.
#[test]
fn an_oversized_frame_is_refused() {
    let rb = Rank::new();
    let eb = End::new(64);
    let (lb, mut raw) = recv_link(&eb, 1, 1);
    let pb = start(vec![conn(lb, &eb, 1, 0)], &rb, LONG);
    raw[0].write(&header(65, 0));
    assert!(eventually(Duration::from_secs(3), || pb
        .failure()
        .is_some()));
    let e = pb.failure().unwrap().to_string();
    assert!(e.contains("malformed") && e.contains("rank 1"), "{e}");
    assert_eq!(eb.load(eb.fifo.tail), 0);
}
