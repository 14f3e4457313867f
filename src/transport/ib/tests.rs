//! The IB transport's protocol on the in-process fake fabric: data and sizes arrive in order
//! over one or several queue pairs, split or round-robin; the sender never writes more than
//! the receiver offered; a peer that dies or a link that goes down mid-transfer fails the other
//! end with an error naming the peer, within the ACK timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{IbReceiver, IbSender};
use crate::config::Config;
use crate::conn::NSLOTS;
use crate::ib::endpoint::PortHandle;
use crate::ib::params::IbParams;
use crate::ib::verbs::fake::{FakeFabric, FakePort};
use crate::transport::{RecvEnd, SendEnd, TransportError};

fn params(qps: usize, split: bool, timeout: u8) -> IbParams {
    let mut p = IbParams::from_config(&Config::defaults()).unwrap();
    p.qps_per_connection = qps;
    p.split_data_on_qps = split;
    p.timeout = timeout;
    p
}

fn pair(f: &FakeFabric, roce: bool, p: &IbParams, slot: usize) -> (IbSender, IbReceiver) {
    let port = |i: u8| {
        if roce {
            FakePort::roce([10, 0, 0, i])
        } else {
            FakePort::infiniband(0x10 + u16::from(i))
        }
    };
    f.add_device("mlx5_0", vec![port(1)]);
    f.add_device("mlx5_1", vec![port(2)]);
    let open = |h: &str| Arc::new(PortHandle::open(&*f.host(&[h]).0, h, 1, &p.gid).unwrap());
    let mut r = IbReceiver::new(open("mlx5_1"), p, slot, "rank 0 (host a, pid 1)").unwrap();
    let s = IbSender::new(open("mlx5_0"), p, slot, "rank 1 (host b, pid 2)", &r.addr()).unwrap();
    r.connect(&s.addr(), p).unwrap();
    (s, r)
}

fn size_of(i: usize, slot: usize) -> usize {
    // Sizes that are not multiples of the 128-byte chunk, zero and full slots included.
    match i % 5 {
        0 => slot,
        1 => 0,
        2 => 1 + (i * 37) % slot,
        3 => slot - 3,
        _ => 129,
    }
}

/// Streams `n` slots through the pair in one thread and checks every byte and size.
fn stream(s: &mut IbSender, r: &mut IbReceiver, n: usize, slot: usize) {
    let until = Instant::now() + Duration::from_secs(20);
    let (mut sent, mut got) = (0usize, 0usize);
    while got < n {
        assert!(
            Instant::now() < until,
            "stalled at {sent} sent, {got} received"
        );
        s.progress().unwrap();
        r.progress().unwrap();
        if sent < n
            && let Some(p) = s.acquire()
        {
            let len = size_of(sent, slot);
            for k in 0..len {
                // SAFETY: the slot holds `slot` bytes and len <= slot.
                unsafe { *p.add(k) = (sent * 31 + k) as u8 };
            }
            s.post(len);
            sent += 1;
        }
        if let Some((p, len)) = r.peek() {
            assert_eq!(len, size_of(got, slot), "slot {got}");
            // SAFETY: peek shows `len` readable bytes.
            let data = unsafe { std::slice::from_raw_parts(p, len) };
            assert!(
                data.iter()
                    .enumerate()
                    .all(|(k, &b)| b == (got * 31 + k) as u8),
                "slot {got} corrupted"
            );
            r.release();
            got += 1;
        }
        assert!(sent - got <= NSLOTS, "more than NSLOTS in flight");
    }
    while s.pending() {
        assert!(Instant::now() < until, "sender never drained");
        s.progress().unwrap();
    }
}

#[test]
fn slots_arrive_in_order_over_one_or_several_queue_pairs() {
    for (qps, split, roce) in [
        (1, false, false),
        (4, false, true),
        (3, true, true),
        (2, true, false),
    ] {
        let f = FakeFabric::new();
        let p = params(qps, split, 14);
        let (mut s, mut r) = pair(&f, roce, &p, 1000);
        stream(&mut s, &mut r, 300, 1000);
    }
}

#[test]
fn flow_control_waits_for_clear_to_send_across_latency() {
    let f = FakeFabric::new();
    f.set_latency(Duration::from_micros(300));
    let p = params(2, true, 14);
    let (mut s, mut r) = pair(&f, true, &p, 4096);
    stream(&mut s, &mut r, 60, 4096);
}

#[test]
fn the_sender_never_writes_past_what_the_receiver_offered() {
    let f = FakeFabric::new();
    let p = params(1, false, 14);
    let (mut s, mut r) = pair(&f, false, &p, 256);
    // Fill every slot; the receiver takes nothing.
    for i in 0..NSLOTS {
        s.acquire().expect("a free slot");
        s.post(8 + i);
    }
    let until = Instant::now() + Duration::from_secs(5);
    while s.pending() {
        assert!(Instant::now() < until);
        s.progress().unwrap();
        r.progress().unwrap();
    }
    assert!(
        s.acquire().is_some(),
        "written slots are free again at the sender"
    );
    s.post(1);
    for _ in 0..50 {
        s.progress().unwrap();
        r.progress().unwrap();
    }
    assert!(s.pending(), "slot NSLOTS must wait for a clear-to-send");
    // The receiver holds exactly NSLOTS filled slots.
    for i in 0..NSLOTS {
        let (_, len) = r.peek().expect("filled");
        assert_eq!(len, 8 + i);
        r.release();
        r.progress().unwrap();
    }
    let until = Instant::now() + Duration::from_secs(5);
    while r.peek().is_none() {
        assert!(Instant::now() < until, "the extra slot never came");
        s.progress().unwrap();
        r.progress().unwrap();
    }
    assert_eq!(r.peek().unwrap().1, 1);
}

fn fails_within(
    end: &mut dyn FnMut() -> Result<bool, TransportError>,
    within: Duration,
) -> TransportError {
    let t = Instant::now();
    loop {
        match end() {
            Err(e) => return e,
            Ok(_) => assert!(t.elapsed() < within, "no error within {within:?}"),
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn a_receiver_dying_mid_transfer_fails_the_sender() {
    let f = FakeFabric::new();
    // NCCL_IB_TIMEOUT=8: 1 ms per try, 8 tries.
    let p = params(2, false, 8);
    let (mut s, mut r) = pair(&f, true, &p, 512);
    stream(&mut s, &mut r, 20, 512);
    // Some slots are offered but not yet written when the receiving process goes away.
    drop(r);
    s.acquire().unwrap();
    s.post(100);
    let e = fails_within(&mut || s.progress(), Duration::from_secs(5));
    let msg = e.to_string();
    assert!(
        msg.contains("transport retry counter exceeded")
            && msg.contains("rank 1 (host b, pid 2)")
            && msg.contains("mlx5_0:1"),
        "{msg}"
    );
    // The error sticks.
    assert_eq!(s.progress().unwrap_err(), e);
}

#[test]
fn a_sender_dying_mid_transfer_fails_the_receiver() {
    let f = FakeFabric::new();
    let p = params(1, false, 8);
    let (mut s, mut r) = pair(&f, false, &p, 512);
    for i in 0..3 {
        s.acquire().unwrap();
        s.post(10 + i);
    }
    let until = Instant::now() + Duration::from_secs(5);
    while r.peek().is_none() {
        assert!(Instant::now() < until);
        s.progress().unwrap();
        r.progress().unwrap();
    }
    drop(s);
    // Freeing the slot offers it again, to a sender that is gone.
    r.release();
    let e = fails_within(&mut || r.progress(), Duration::from_secs(5));
    assert!(
        e.to_string()
            .contains("writing a clear-to-send entry failed: transport retry counter exceeded"),
        "{e}"
    );
}

#[test]
fn a_link_going_down_fails_both_ends() {
    let f = FakeFabric::new();
    let p = params(1, false, 8);
    let (mut s, mut r) = pair(&f, true, &p, 256);
    stream(&mut s, &mut r, 10, 256);
    // Every clear-to-send entry is delivered: the receiver has nothing of its own in flight.
    for _ in 0..10 {
        s.progress().unwrap();
        r.progress().unwrap();
    }
    f.pull_cable("mlx5_1");
    s.acquire().unwrap();
    s.post(5);
    let e = fails_within(&mut || s.progress(), Duration::from_secs(5));
    assert!(matches!(e, TransportError::Fabric { .. }), "{e}");
    // The receiver only waits; it learns of the dead link from its port's state.
    let e = fails_within(&mut || r.progress(), Duration::from_secs(1));
    let msg = e.to_string();
    assert!(
        msg.contains("the port went DOWN") && msg.contains("mlx5_1:1"),
        "{msg}"
    );
}

#[test]
fn mismatched_queue_pair_counts_are_refused() {
    let f = FakeFabric::new();
    f.add_device("mlx5_0", vec![FakePort::infiniband(1)]);
    f.add_device("mlx5_1", vec![FakePort::infiniband(2)]);
    let (p1, p4) = (params(1, false, 14), params(4, false, 14));
    let open = |h: &str| Arc::new(PortHandle::open(&*f.host(&[h]).0, h, 1, &p1.gid).unwrap());
    let r = IbReceiver::new(open("mlx5_1"), &p4, 64, "rank 0").unwrap();
    let e = IbSender::new(open("mlx5_0"), &p1, 64, "rank 0", &r.addr())
        .err()
        .unwrap();
    assert!(e.to_string().contains("NCCL_IB_QPS_PER_CONNECTION"), "{e}");
}
