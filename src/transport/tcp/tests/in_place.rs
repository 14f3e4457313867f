//! Slots in the caller's memory ([`InPlaceSend`], [`InPlaceRecv`], [`RecvEnd::receive_into`]):
//! how they cross and come back, the frames a pass reads, the peers' goodbyes and aborts, and
//! requests the consumer withdraws.

use super::*;

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

/// Waits (at most 10 s) until each of `fds` holds at least `bytes` unread bytes.
fn queued_everywhere(fds: &[std::os::fd::RawFd], bytes: usize) {
    let start = std::time::Instant::now();
    for &fd in fds {
        loop {
            let mut queued: libc::c_int = 0;
            // SAFETY: FIONREAD writes one c_int through the pointer, which is valid for it;
            // `fd` is an open socket the receiver owns for the whole test.
            let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) };
            assert_eq!(rc, 0, "FIONREAD on socket {fd}");
            if queued as usize >= bytes {
                break;
            }
            assert!(
                start.elapsed().as_secs() < 10,
                "{queued} of {bytes} bytes queued"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
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
        // Loopback may hand the bytes over later (softirq work deferred on a loaded machine):
        // the pass is only meaningful once every socket holds its whole frame.
        queued_everywhere(&r.data_sockets(), framing::FRAME_HEADER + size);
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
