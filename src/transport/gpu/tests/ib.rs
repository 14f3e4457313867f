//! The proxy over InfiniBand on the in-process fake fabric: FIFO slots registered in place
//! cross in order with their sizes, over one or several queue pairs; the receiver's freed
//! slots are the flow control; a pulled cable stops both proxies and their kernels, naming
//! the port and the channel.

use super::*;
use crate::config::Config;
use crate::ib::endpoint::PortHandle;
use crate::ib::params::IbParams;
use crate::ib::verbs::fake::{FakeFabric, FakePort};
use crate::transport::ib::{IbReceiver, IbSender};

/// A fabric with one IB port per "host".
fn fabric() -> FakeFabric {
    let f = FakeFabric::new();
    f.add_device("mlx5_0", vec![FakePort::infiniband(0x21)]);
    f.add_device("mlx5_1", vec![FakePort::infiniband(0x22)]);
    f
}

fn params(qps: usize, split: bool) -> IbParams {
    let mut p = IbParams::from_config(&Config::defaults()).unwrap();
    p.qps_per_connection = qps;
    p.split_data_on_qps = split;
    p.timeout = 8;
    p
}

/// An IB connection from `ea`'s slots (host "a", mlx5_0) to `eb`'s (host "b", mlx5_1), set up
/// in the order transport::gpu::net does: offer, answer, connect.
fn ib_links(f: &FakeFabric, ea: &End, eb: &End, p: &IbParams) -> (Link, Link) {
    let open = |h: &str| Arc::new(PortHandle::open(&*f.host(&[h]).0, h, 1, &p.gid).unwrap());
    let slots = |e: &End| {
        Some(std::ptr::with_exposed_provenance_mut::<u8>(
            e.fifo.slots as usize,
        ))
    };
    let slot = ea.fifo.slot_bytes;
    // SAFETY: the FIFOs' memory outlives the proxies, which own (and drop) these ends.
    let mut r =
        unsafe { IbReceiver::with_slots(open("mlx5_1"), p, slot, "rank 0", slots(eb)) }.unwrap();
    // SAFETY: as above.
    let s =
        unsafe { IbSender::with_slots(open("mlx5_0"), p, slot, "rank 1", &r.addr(), slots(ea)) }
            .unwrap();
    r.connect(&s.addr(), p).unwrap();
    (Link::Send(Box::new(s)), Link::Recv(Box::new(r)))
}

fn ib_stream(qps: usize, split: bool, slot: usize, count: u64) {
    let f = fabric();
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let (la, lb) = ib_links(&f, &ea, &eb, &params(qps, split));
    let _pa = start(vec![conn(la, &ea, 1, 2)], &ra, LONG);
    let _pb = start(vec![conn(lb, &eb, 0, 2)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..count));
        kb.recv(0..count).unwrap();
        t.join().unwrap().unwrap();
    });
    assert!(
        eventually(Duration::from_secs(5), || ea.load(ea.fifo.head) == count),
        "every slot's write completed"
    );
}

#[test]
fn slots_cross_over_ib_in_order() {
    ib_stream(1, false, 1000, 300);
}

#[test]
fn slots_cross_over_ib_split_over_queue_pairs() {
    ib_stream(3, true, 4099, 200);
    ib_stream(2, false, 640, 200);
}

/// The receiving kernel holds its slots: the receiver offers no more, so the sender's writes
/// stop after one FIFO's worth and its kernel, after two, waits for `head`.
#[test]
fn freed_slots_are_the_flow_control() {
    let slot = 512;
    let f = fabric();
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let (la, lb) = ib_links(&f, &ea, &eb, &params(1, false));
    let _pa = start(vec![conn(la, &ea, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(lb, &eb, 0, 0)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..3 * SLOTS));
        assert!(eventually(Duration::from_secs(5), || eb.load(eb.fifo.tail) == SLOTS));
        assert!(eventually(Duration::from_secs(5), || ea.load(ea.fifo.head) == SLOTS));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            eb.load(eb.fifo.tail),
            SLOTS,
            "a slot not yet freed was written"
        );
        assert_eq!(ea.load(ea.fifo.tail), 2 * SLOTS, "the kernel ran past head");
        kb.recv(0..3 * SLOTS).unwrap();
        t.join().unwrap().unwrap();
    });
}

/// A cable pulled mid-stream: both proxies fail within two seconds (writes time out, or the
/// port reads DOWN), stop their kernels and name the port and channel.
#[test]
fn a_pulled_cable_stops_both_proxies() {
    let slot = 256;
    let f = fabric();
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let (la, lb) = ib_links(&f, &ea, &eb, &params(1, false));
    let pa = start(vec![conn(la, &ea, 1, 4)], &ra, LONG);
    let pb = start(vec![conn(lb, &eb, 0, 4)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..10));
        kb.recv(0..10).unwrap();
        t.join().unwrap().unwrap();
    });
    let t0 = Instant::now();
    f.pull_cable("mlx5_1");
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(10..40));
        assert!(kb.recv(10..40).unwrap_err().contains("aborted"));
        assert!(t.join().unwrap().unwrap_err().contains("aborted"));
    });
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(ra.kernel_aborted() && rb.kernel_aborted());
    let (ea_msg, eb_msg) = (
        pa.failure().expect("the sender reports").to_string(),
        pb.failure().expect("the receiver reports").to_string(),
    );
    assert!(
        ea_msg.contains("channel 4") && ea_msg.contains("mlx5_0:1") && ea_msg.contains("rank 1"),
        "{ea_msg}"
    );
    // The receiver learns it from a clear-to-send write of its own, if one was in flight, or
    // else from its port's state.
    assert!(
        eb_msg.contains("channel 4")
            && eb_msg.contains("mlx5_1:1")
            && (eb_msg.contains("the port went DOWN")
                || eb_msg.contains("transport retry counter exceeded")),
        "{eb_msg}"
    );
}
