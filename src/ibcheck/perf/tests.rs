//! The active tests on the in-process fake fabric: a local pair, a loopback, a peer against
//! a server, and a dead link.

use super::*;
use crate::ib::verbs::fake::{FakeFabric, FakePort};

fn params() -> IbParams {
    IbParams::from_config(&crate::config::Config::defaults()).unwrap()
}

fn spec() -> PerfSpec {
    PerfSpec {
        size: 64 << 10,
        iters: 200,
        tx_depth: 16,
        lat_size: 2,
        lat_iters: 100,
        timeout: Duration::from_secs(20),
    }
}

#[test]
fn local_pair_and_loopback_measure() {
    let f = FakeFabric::new();
    f.add_device("mlx5_0", vec![FakePort::roce([10, 0, 0, 1])]);
    f.add_device("mlx5_1", vec![FakePort::roce([10, 0, 0, 2])]);
    let v = f.host(&["mlx5_0", "mlx5_1"]);
    let r = run_local(&v, ("mlx5_0", 1), ("mlx5_1", 1), &spec(), &params()).unwrap();
    assert!(r.bw_gbps > 0.0 && r.latency.min > 0.0, "{r:?}");
    assert_eq!((r.link_gbps, r.to.as_str()), (Some(200.0), "mlx5_1:1"));
    assert!(r.latency.min <= r.latency.median && r.latency.median <= r.latency.max);
    let r = run_local(&v, ("mlx5_0", 1), ("mlx5_0", 1), &spec(), &params()).unwrap();
    assert_eq!(r.from, r.to);
}

#[test]
fn peer_against_a_server_and_a_dead_link() {
    let f = FakeFabric::new();
    f.add_device("mlx5_0", vec![FakePort::infiniband(0x11)]);
    f.add_device("mlx5_9", vec![FakePort::infiniband(0x12)]);
    let (client, server) = (f.host(&["mlx5_0"]), f.host(&["mlx5_9"]));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        serve(&l, &server, ("mlx5_9", 1), &params(), Some(1), &|_| {}).unwrap()
    });
    let r = run_peer(&client, ("mlx5_0", 1), &addr, &spec(), &params()).unwrap();
    t.join().unwrap();
    assert!(r.to.ends_with("/mlx5_9:1"), "{r:?}");
    assert_eq!(r.link_gbps, Some(400.0));
    // Nobody listening: a clear error naming the peer.
    let e = run_peer(&client, ("mlx5_0", 1), "127.0.0.1:1", &spec(), &params()).unwrap_err();
    assert!(e.to_string().contains("ibcheck --serve"), "{e}");
    // A link that goes down fails with the retry error, within the ACK timeout.
    f.set_link("mlx5_9", false);
    let mut p = params();
    p.timeout = 8;
    let e = run_local(
        &f.host(&["mlx5_0", "mlx5_9"]),
        ("mlx5_0", 1),
        ("mlx5_9", 1),
        &spec(),
        &p,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("transport retry counter exceeded"),
        "{e}"
    );
}
