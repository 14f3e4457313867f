//! The IB transport chosen and used by communicators, on an in-process fake fabric installed as
//! the verbs provider: chosen over TCP when both ranks have a usable port, not with
//! `NCCL_IB_DISABLE=1` or an `NCCL_IB_HCA` that matches nothing; collectives and point-to-point
//! operations correct over one or several queue pairs; and a peer whose port dies mid-run
//! makes the other ranks fail with an error instead of hanging. (Tests that install a provider
//! share this binary and run one at a time.)

mod common;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{all_ok, on_threads};
use rnccl::config::{Config, Source};
use rnccl::ib::Provider;
use rnccl::ib::fake::{FakeFabric, FakePort};

use rnccl::stats::Path;
use rnccl::{CommConfig, Communicator, RedOp};

/// Installs a fake fabric with an InfiniBand and a RoCE adapter for the test holding the guard.
fn fabric() -> (MutexGuard<'static, ()>, FakeFabric) {
    static ONE: Mutex<()> = Mutex::new(());
    let g = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let f = FakeFabric::new();
    f.add_device("mlx5_0", vec![FakePort::infiniband(0x11)]);
    f.add_device("mlx5_1", vec![FakePort::infiniband(0x12)]);
    Provider::install(Some(f.host(&["mlx5_0", "mlx5_1"])));
    (g, f)
}

const NET_ONLY: [(&str, &str); 3] = [
    ("NCCL_P2P_DISABLE", "1"),
    ("NCCL_SHM_DISABLE", "1"),
    ("NCCL_SOCKET_IFNAME", "lo"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    NET_ONLY.iter().chain(extra).copied().collect()
}

fn all_reduce_over(knobs: &[(&str, &str)], want: Path) {
    all_ok(on_threads(3, knobs, |c| {
        let mut v: Vec<f32> = (0..100_003)
            .map(|i| (i % 7) as f32 + c.rank() as f32)
            .collect();
        c.all_reduce_in_place(&mut v, RedOp::Sum)
            .map_err(|e| e.to_string())?;
        for (i, x) in v.iter().enumerate() {
            if *x != 3.0 * (i % 7) as f32 + 3.0 {
                return Err(format!("element {i} is {x}"));
            }
        }
        let t = c.traffic();
        if t.is_empty() || t.iter().any(|l| l.transport != want) {
            return Err(format!(
                "expected {want:?} links, got {:?}",
                t.iter().map(|l| l.transport).collect::<Vec<_>>()
            ));
        }
        Ok(())
    }));
}

#[test]
fn ib_is_chosen_over_tcp_when_a_usable_port_exists() {
    let (_g, _f) = fabric();
    all_reduce_over(&with(&[]), Path::Ib);
    all_reduce_over(
        &with(&[
            ("NCCL_IB_QPS_PER_CONNECTION", "4"),
            ("NCCL_IB_SPLIT_DATA_ON_QPS", "1"),
        ]),
        Path::Ib,
    );
    all_reduce_over(&with(&[("NCCL_IB_HCA", "=mlx5_1")]), Path::Ib);
    Provider::install(None);
}

#[test]
fn ib_disable_or_no_matching_port_falls_back_to_tcp() {
    let (_g, _f) = fabric();
    all_reduce_over(&with(&[("NCCL_IB_DISABLE", "1")]), Path::Tcp);
    all_reduce_over(&with(&[("NCCL_IB_HCA", "=mlx5_9")]), Path::Tcp);
    Provider::install(None);
}

#[test]
fn point_to_point_and_gathers_over_ib() {
    let (_g, _f) = fabric();
    all_ok(on_threads(2, &with(&[]), |c| {
        let n = 70_000;
        let mut out = vec![0u8; 2 * n];
        let mine: Vec<u8> = (0..n).map(|i| (i * (c.rank() + 1)) as u8).collect();
        c.all_gather(&mine, &mut out).map_err(|e| e.to_string())?;
        for r in 0..2 {
            if (0..n).any(|i| out[r * n + i] != (i * (r + 1)) as u8) {
                return Err(format!("rank {r}'s part is wrong"));
            }
        }
        let peer = 1 - c.rank();
        let mut got = vec![0u32; 5000];
        let send: Vec<u32> = (0..5000).map(|i| i * 10 + c.rank() as u32).collect();
        let mut g = rnccl::group_start();
        g.send(c, &send, peer).map_err(|e| e.to_string())?;
        g.recv(c, &mut got, peer).map_err(|e| e.to_string())?;
        rnccl::group_end(g).map_err(|e| e.to_string())?;
        if got
            .iter()
            .enumerate()
            .any(|(i, &x)| x != i as u32 * 10 + peer as u32)
        {
            return Err("received the wrong data".into());
        }
        Ok(())
    }));
    Provider::install(None);
}

#[test]
fn a_port_dying_mid_run_fails_the_collective_instead_of_hanging() {
    let (_g, f) = fabric();
    let mut cfg = Config::defaults();
    for (k, v) in with(&[("NCCL_IB_TIMEOUT", "8"), ("NCCL_IB_HCA", "=mlx5_0")]) {
        cfg.set(k, v, Source::Program("test".into()));
    }
    let config = CommConfig::with_knobs(Arc::new(cfg)).timeout(Duration::from_secs(30));
    let comms = Communicator::init_all_with(2, config).unwrap();
    let aborts: Vec<_> = comms.iter().map(|c| c.abort_handle()).collect();
    let t = Instant::now();
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                let f = f.clone();
                s.spawn(move || {
                    let mut v = vec![1f32; 1 << 20];
                    for round in 0..200 {
                        if round == 3 && c.rank() == 0 {
                            f.pull_cable("mlx5_0");
                        }
                        c.all_reduce_in_place(&mut v, RedOp::Sum)
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let errs: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errs.len(), 2, "a rank missed the dead port: {results:?}");
    assert!(
        errs.iter().any(|e| e.contains("mlx5_0:1")
            && (e.contains("transport retry counter exceeded") || e.contains("port went DOWN"))),
        "{errs:?}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(25),
        "took {:?}",
        t.elapsed()
    );
    for a in aborts {
        a.abort();
    }
    Provider::install(None);
}
