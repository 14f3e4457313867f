//! Communicator semantics beyond single collectives: groups, split, abort, failure and timeout
//! reporting, argument checking, and knobs that pick transports, algorithms and channels.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{all_ok, on_threads};
use rnccl::config::{Config, Source};
use rnccl::stats::Direction;
use rnccl::stats::Path;
use rnccl::{CommConfig, Communicator, Error, RedOp, SPLIT_NOCOLOR, UniqueId, group_start};

fn knobs(pairs: &[(&str, &str)]) -> Arc<Config> {
    let mut c = Config::defaults();
    for (k, v) in pairs {
        c.set(k, *v, Source::Program("test".into()));
    }
    Arc::new(c)
}

#[test]
fn one_thread_drives_several_communicators_in_a_group() {
    let comms = Communicator::init_all(3).unwrap();
    let sends: Vec<Vec<f64>> = (0..3).map(|r| vec![r as f64 + 1.0; 50_000]).collect();
    let mut recvs: Vec<Vec<f64>> = vec![vec![0.0; 50_000]; 3];
    let mut g = group_start();
    for ((c, s), r) in comms.iter().zip(&sends).zip(recvs.iter_mut()) {
        g.all_reduce(c, s, r, RedOp::Sum).unwrap();
    }
    g.end().unwrap();
    assert!(recvs.iter().all(|r| r.iter().all(|&v| v == 6.0)));
    // Point-to-point between communicators of one thread: a ring exchange.
    let mut got: Vec<Vec<u32>> = vec![vec![0; 1000]; 3];
    let data: Vec<Vec<u32>> = (0..3).map(|r| vec![r as u32; 1000]).collect();
    let mut g = group_start();
    for (r, (c, out)) in comms.iter().zip(got.iter_mut()).enumerate() {
        g.send(c, &data[r], (r + 1) % 3).unwrap();
        g.recv(c, out, (r + 2) % 3).unwrap();
    }
    g.end().unwrap();
    for (r, out) in got.iter().enumerate() {
        assert!(out.iter().all(|&v| v == ((r + 2) % 3) as u32), "rank {r}");
    }
}

#[test]
fn grouped_sends_and_receives_to_every_peer_and_self() {
    all_ok(on_threads(4, &[], |c| {
        let (r, n) = (c.rank(), c.nranks());
        let data: Vec<Vec<i64>> = (0..n).map(|p| vec![(r * 10 + p) as i64; 70_001]).collect();
        let mut got: Vec<Vec<i64>> = vec![vec![-1; 70_001]; n];
        let mut g = group_start();
        for (p, d) in data.iter().enumerate() {
            g.send(c, d, p).map_err(|e| e.to_string())?;
        }
        for (p, o) in got.iter_mut().enumerate() {
            g.recv(c, o, p).map_err(|e| e.to_string())?;
        }
        g.end().map_err(|e| e.to_string())?;
        for (p, o) in got.iter().enumerate() {
            if o.iter().any(|&v| v != (p * 10 + r) as i64) {
                return Err(format!("from {p}: {:?}", &o[..3]));
            }
        }
        // Several collectives in one group complete, in order per communicator.
        let a = vec![1u32; 1000];
        let mut b = vec![0u32; 1000];
        let mut x = vec![r as u32; 10];
        let mut g = group_start();
        g.all_reduce(c, &a, &mut b, RedOp::Sum)
            .map_err(|e| e.to_string())?;
        g.broadcast_in_place(c, &mut x, 2)
            .map_err(|e| e.to_string())?;
        g.end().map_err(|e| e.to_string())?;
        if b.iter().any(|&v| v != n as u32) || x.iter().any(|&v| v != 2) {
            return Err("grouped collectives gave wrong results".into());
        }
        Ok(())
    }));
}

#[test]
fn split_by_color_and_key() {
    all_ok(on_threads(5, &[], |c| {
        let r = c.rank();
        let color = if r == 4 {
            SPLIT_NOCOLOR
        } else {
            (r % 2) as i32
        };
        let child = c.split(color, -(r as i32)).map_err(|e| e.to_string())?;
        match child {
            None if r == 4 => {
                // The rank without a color still takes part in the parent's collectives.
                let mut p = vec![1u8; 3];
                c.all_reduce_in_place(&mut p, RedOp::Sum)
                    .map_err(|e| e.to_string())
            }
            None => Err("expected a child communicator".into()),
            Some(ch) => {
                // Colors {0,2} and {1,3}; keys are -rank, so higher parent ranks come first.
                let want_rank = usize::from(r < 2);
                if ch.nranks() != 2 || ch.rank() != want_rank {
                    return Err(format!(
                        "child rank {}/{} for parent rank {r}",
                        ch.rank(),
                        ch.nranks()
                    ));
                }
                let mut v = vec![r as u64; 4096];
                ch.all_reduce_in_place(&mut v, RedOp::Sum)
                    .map_err(|e| e.to_string())?;
                let want = if r % 2 == 0 { 2 } else { 4 };
                if v.iter().any(|&x| x != want) {
                    return Err(format!("child all_reduce gave {}", v[0]));
                }
                // The parent still works after the split.
                let mut p = vec![1u8; 3];
                c.all_reduce_in_place(&mut p, RedOp::Sum)
                    .map_err(|e| e.to_string())?;
                if p[0] != 5 {
                    Err(format!("parent all_reduce gave {}", p[0]))
                } else {
                    Ok(())
                }
            }
        }
    }));
}

#[test]
fn knobs_choose_transports_channels_and_algorithms() {
    // Threads normally use same-process FIFOs; with P2P disabled, shared memory; with both
    // disabled, TCP over loopback.
    for (pairs, want) in [
        (&[][..], Path::SameProcess),
        (&[("NCCL_P2P_DISABLE", "1")][..], Path::Shm),
        (
            &[
                ("NCCL_P2P_DISABLE", "1"),
                ("NCCL_SHM_DISABLE", "1"),
                ("NCCL_SOCKET_IFNAME", "lo"),
                ("NCCL_NSOCKS_PERTHREAD", "3"),
            ][..],
            Path::Tcp,
        ),
        (
            &[
                ("NCCL_P2P_DISABLE", "1"),
                ("NCCL_SHM_DISABLE", "1"),
                ("NCCL_SOCKET_IFNAME", "lo"),
                ("NCCL_SOCKET_NTHREADS", "2"),
            ][..],
            Path::Tcp,
        ),
    ] {
        all_ok(on_threads(3, pairs, |c| {
            let mut v = vec![1f32; 300_000];
            c.all_reduce_in_place(&mut v, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            if v.iter().any(|&x| x != 3.0) {
                return Err("wrong sum".into());
            }
            let t = c.traffic();
            if t.is_empty() || t.iter().any(|l| l.transport != want) {
                return Err(format!(
                    "expected {want:?} links, got {:?}",
                    t.iter().map(|l| l.transport).collect::<Vec<_>>()
                ));
            }
            if !t
                .iter()
                .any(|l| l.direction == Direction::Send && l.bytes > 0)
            {
                return Err("no bytes counted".into());
            }
            Ok(())
        }));
    }
    all_ok(on_threads(
        2,
        &[("NCCL_MIN_NCHANNELS", "4"), ("NCCL_BUFFSIZE", "4096")],
        |c| {
            if c.nchannels() != 4 || c.slot_bytes() != 512 {
                return Err(format!(
                    "{} channels, {}-byte slots",
                    c.nchannels(),
                    c.slot_bytes()
                ));
            }
            let mut v = vec![2u32; 100_000];
            c.all_reduce_in_place(&mut v, RedOp::Prod)
                .map_err(|e| e.to_string())?;
            if v.iter().any(|&x| x != 4) {
                Err("wrong product".into())
            } else {
                Ok(())
            }
        },
    ));
    // The algorithm that ran, not just the sum: a knob that were ignored would fail here.
    // Without NCCL_ALGO the tuning model picks the latency algorithm for small buffers and the
    // ring (on every channel) for large ones.
    for (algo, small, large, bcast) in [
        (None, "Tree", "Ring", "Tree"),
        (Some("Tree"), "Tree", "Tree", "Tree"),
        (Some("Ring"), "Ring", "Ring", "Ring"),
        (
            Some("AllReduce:Tree;Broadcast:Ring"),
            "Tree",
            "Tree",
            "Ring",
        ),
    ] {
        let env: Vec<(&str, &str)> = algo.iter().map(|a| ("NCCL_ALGO", *a)).collect();
        all_ok(on_threads(3, &env, |c| {
            let ran = |c: &Communicator| c.stats().op().last().expect("an operation ran");
            let mut v = vec![1i32; 4];
            c.all_reduce_in_place(&mut v, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            let s = ran(c);
            let mut big = vec![1i32; 2_000_000];
            c.all_reduce_in_place(&mut big, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            let l = ran(c);
            c.broadcast_in_place(&mut v, 0).map_err(|e| e.to_string())?;
            let b = ran(c);
            if v.iter().chain(&big).any(|&x| x != 3) {
                return Err(format!("NCCL_ALGO={algo:?}: wrong sum"));
            }
            let got = (s.algo, l.algo, b.algo);
            if got != (small, large, bcast) {
                return Err(format!(
                    "NCCL_ALGO={algo:?}: ran {got:?}, expected {:?}",
                    (small, large, bcast)
                ));
            }
            if l.algo == "Ring" && l.nchannels != c.nchannels() {
                return Err(format!(
                    "a 8 MB ring used {} of {} channels",
                    l.nchannels,
                    c.nchannels()
                ));
            }
            Ok(())
        }));
    }
    let errs = on_threads(2, &[("NCCL_ALGO", "NVLS")], |c| {
        let mut v = vec![1i32; 8];
        match c.all_reduce_in_place(&mut v, RedOp::Sum) {
            Err(Error::InvalidUsage(m)) if m.contains("NCCL_ALGO") => Ok(()),
            other => Err(format!("expected an NCCL_ALGO error, got {other:?}")),
        }
    });
    all_ok(errs);
}

#[test]
fn bad_arguments_are_rejected_with_clear_errors() {
    all_ok(on_threads(2, &[], |c| {
        let mut v = vec![0f32; 4];
        let e = c.broadcast_in_place(&mut v, 5).unwrap_err().to_string();
        if !e.contains("root 5") {
            return Err(e);
        }
        let e = c.send(&v, 9).unwrap_err().to_string();
        if !e.contains("peer 9") {
            return Err(e);
        }
        let e = c
            .all_reduce(&v, &mut [0f32; 3], RedOp::Sum)
            .unwrap_err()
            .to_string();
        if !e.contains("4 elements but receive has 3") {
            return Err(e);
        }
        let e = c.all_gather(&v, &mut [0f32; 5]).unwrap_err().to_string();
        if !e.contains("must have 8") {
            return Err(e);
        }
        let args = rnccl::CollArgs {
            func: rnccl::Func::AllGather,
            count: usize::MAX / 2,
            dtype: rnccl::DataType::Float64,
            op: RedOp::Sum,
            root: 0,
            in_place: false,
        };
        let e = args.validate(2).unwrap_err().to_string();
        if !e.contains("overflows") {
            return Err(e);
        }
        // The communicator is still usable after argument errors (nothing was launched).
        c.all_reduce_in_place(&mut v, RedOp::Sum)
            .map_err(|e| e.to_string())
    }));
    let e = "float128"
        .parse::<rnccl::DataType>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("float128"));
    let id = UniqueId::from_comm_id("127.0.0.1:1").unwrap();
    assert!(
        Communicator::init_rank(2, &id, 2, CommConfig::default())
            .unwrap_err()
            .to_string()
            .contains("rank 2 is out of range")
    );
    assert!(Communicator::init_rank(0, &id, 0, CommConfig::default()).is_err());
}

#[test]
fn a_rank_that_never_calls_is_named_in_the_timeout() {
    let config = CommConfig::with_knobs(knobs(&[])).timeout(Duration::from_secs(2));
    let comms = Communicator::init_all_with(3, config).unwrap();
    let start = Instant::now();
    let errs: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                s.spawn(move || {
                    if c.rank() == 2 {
                        std::thread::sleep(Duration::from_secs(4));
                        return String::new();
                    }
                    let mut v = vec![1u64; 1 << 20];
                    c.all_reduce_in_place(&mut v, RedOp::Sum)
                        .unwrap_err()
                        .to_string()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(
        errs[0].contains("timeout") || errs[1].contains("timeout"),
        "{errs:?}"
    );
    assert!(
        errs.iter().take(2).any(|e| e.contains("rank 2")),
        "the silent rank must be named: {errs:?}"
    );
}

#[test]
fn abort_from_a_watchdog_and_peers_fail_fast() {
    let config = CommConfig::with_knobs(knobs(&[])).timeout(Duration::from_secs(60));
    let mut comms = Communicator::init_all_with(2, config).unwrap();
    let c1 = comms.pop().unwrap();
    let c0 = comms.pop().unwrap();
    let handle = c0.abort_handle();
    let start = Instant::now();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        handle.abort();
    });
    let blocked = std::thread::spawn(move || {
        let mut v = vec![1u8; 64];
        let e = c0.all_reduce_in_place(&mut v, RedOp::Sum).unwrap_err();
        let again = c0.all_reduce_in_place(&mut v, RedOp::Sum).unwrap_err();
        (e, again)
    });
    let (e, again) = blocked.join().unwrap();
    watchdog.join().unwrap();
    assert!(matches!(e, Error::Aborted(_)), "{e}");
    assert!(
        again.to_string().contains("unusable") || matches!(again, Error::Aborted(_)),
        "{again}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    // Rank 1 was never called; now it is, and rank 0's connections are gone: it fails fast.
    drop(c1);
}

#[test]
fn a_peer_dropped_mid_collective_makes_the_others_fail_fast() {
    let config = CommConfig::with_knobs(knobs(&[])).timeout(Duration::from_secs(60));
    let comms = Communicator::init_all_with(3, config).unwrap();
    let start = Instant::now();
    let results: Vec<Option<String>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                s.spawn(move || {
                    let mut v = vec![1f32; 1 << 16];
                    c.all_reduce_in_place(&mut v, RedOp::Sum).unwrap();
                    if c.rank() == 1 {
                        c.abort();
                        return None;
                    }
                    let mut big = vec![1f32; 8 << 20];
                    Some(
                        c.all_reduce_in_place(&mut big, RedOp::Sum)
                            .unwrap_err()
                            .to_string(),
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
    for e in results.into_iter().flatten() {
        assert!(
            e.contains("rank 1")
                || e.contains("aborted")
                || e.contains("rank 0")
                || e.contains("rank 2"),
            "{e}"
        );
    }
}

#[test]
fn ranks_disagreeing_on_the_count_get_an_error_not_a_hang() {
    let config =
        CommConfig::with_knobs(knobs(&[("NCCL_ALGO", "Ring")])).timeout(Duration::from_secs(5));
    let comms = Communicator::init_all_with(2, config).unwrap();
    let start = Instant::now();
    let errs: Vec<Option<String>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                s.spawn(move || {
                    let mut v = vec![1f32; if c.rank() == 0 { 100_000 } else { 150_000 }];
                    c.all_reduce_in_place(&mut v, RedOp::Sum)
                        .err()
                        .map(|e| e.to_string())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(start.elapsed() < Duration::from_secs(15));
    assert!(
        errs.iter().any(|e| e
            .as_deref()
            .is_some_and(|e| e.contains("same count") || e.contains("timeout"))),
        "{errs:?}"
    );
}

/// The group runner is enqueue then wait: operations enqueued on every rank run when waited
/// on, and a pending group dropped before it is waited on fails its communicator with a clear
/// error while its peers fail fast instead of waiting out their timeout.
#[test]
fn enqueue_then_wait_and_a_dropped_pending_group() {
    all_ok(on_threads(3, &[], |c| {
        let send = vec![c.rank() as f32 + 1.0; 1000];
        let mut recv = vec![0f32; 1000];
        let mut g = group_start();
        g.all_reduce(c, &send, &mut recv, RedOp::Sum)
            .map_err(|e| e.to_string())?;
        let pending = g.enqueue().map_err(|e| e.to_string())?;
        pending.wait().map_err(|e| e.to_string())?;
        if recv.iter().any(|&x| x != 6.0) {
            return Err(format!("wrong sum {}", recv[0]));
        }
        Ok(())
    }));
    let start = Instant::now();
    let results = on_threads(2, &[], |c| {
        let send = vec![1f32; 1 << 16];
        let mut recv = vec![0f32; 1 << 16];
        if c.rank() == 0 {
            let mut g = group_start();
            g.all_reduce(c, &send, &mut recv, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            drop(g.enqueue().map_err(|e| e.to_string())?);
            return match c.all_reduce(&send, &mut recv, RedOp::Sum) {
                Err(Error::InvalidUsage(m)) if m.contains("dropped before it was waited on") => {
                    Ok(())
                }
                other => Err(format!("expected the dropped group's error, got {other:?}")),
            };
        }
        match c.all_reduce(&send, &mut recv, RedOp::Sum) {
            Err(Error::Remote(m)) if m.contains("rank 0") => Ok(()),
            other => Err(format!("expected rank 0 to be named, got {other:?}")),
        }
    });
    all_ok(results);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?} with a 60 s timeout",
        start.elapsed()
    );
}

/// Another thread reads a communicator's counters while it runs: the operation in flight with
/// its progress, bytes per link, operations completed.
#[test]
fn live_counters_are_read_while_operations_run() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut comms = Communicator::init_all(2).unwrap();
    let stats = comms[0].stats();
    let stop = Arc::new(AtomicBool::new(false));
    let caught = Arc::new(AtomicBool::new(false));
    let count = 8 << 20;
    let watcher = {
        let (stats, stop, caught) = (stats.clone(), stop.clone(), caught.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Some(s) = stats.op().snapshot() {
                    if s.bytes_done > 0 && s.steps_done < s.steps_total {
                        caught.store(true, Ordering::Relaxed);
                    }
                    seen.push(s);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            seen
        })
    };
    // Rounds of ten all-reduces until the watcher has caught one part-way: on a loaded machine
    // (this binary's other tests run beside it on two cores) the watcher may not be scheduled
    // while the ranks are mid-operation for a whole round.
    let mut ops = 0;
    while ops < 200 && !caught.load(Ordering::Relaxed) {
        comms = std::thread::scope(|s| {
            let ranks: Vec<_> = comms
                .into_iter()
                .map(|c| {
                    s.spawn(move || {
                        let mut v = vec![1f32; count];
                        for _ in 0..10 {
                            c.all_reduce_in_place(&mut v, RedOp::Sum).unwrap();
                        }
                        c
                    })
                })
                .collect();
            ranks.into_iter().map(|h| h.join().unwrap()).collect()
        });
        ops += 10;
    }
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    assert!(
        !seen.is_empty(),
        "the watcher never saw an operation in flight"
    );
    for s in &seen {
        assert_eq!(
            (s.info.func, s.info.count, s.info.algo),
            (rnccl::Func::AllReduce, count, "Ring"),
            "{s:?}"
        );
        assert!(s.steps_done <= s.steps_total, "{s:?}");
    }
    assert!(
        seen.iter()
            .any(|s| s.bytes_done > 0 && s.steps_done < s.steps_total),
        "never caught an operation part-way in {ops} operations: {seen:?}"
    );
    assert_eq!(stats.op().completed(), ops);
    let sent: u64 = stats
        .links()
        .iter()
        .filter(|l| l.direction == Direction::Send)
        .map(|l| l.bytes)
        .sum();
    assert!(sent >= ops * (count as u64 * 4) / 2, "{sent} bytes sent");
}

/// A rank that waits for a late peer counts the stall on the links to it: after a first
/// all-reduce (which opens the connections), rank 1 comes 300 ms late to the second, so rank
/// 0's links to it gain about 300 ms of waiting more than rank 1's, for a small all-reduce and a
/// large one. (Both ranks also wait while the bytes cross, longer on a loaded machine: the
/// ranks compare their waits rather than bound the late rank's.)
#[test]
fn waiting_for_a_late_peer_is_counted_on_its_link() {
    let late = Duration::from_millis(300);
    for count in [4096usize, 4 << 20] {
        all_ok(on_threads(2, &[], |c| {
            let mut v = vec![1f32; count];
            let waited = || c.traffic().iter().map(|l| l.wait_ns).sum::<u64>();
            c.all_reduce_in_place(&mut v, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            let before = waited();
            if c.rank() == 1 {
                std::thread::sleep(late);
            }
            c.all_reduce_in_place(&mut v, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            let t = c.traffic();
            let mine = [waited() - before];
            let mut both = [0u64; 2];
            c.all_gather(&mine, &mut both).map_err(|e| e.to_string())?;
            let [on_time, late_rank] = both.map(|ns| ns / 1_000_000);
            if on_time < 200 || on_time < late_rank + 150 {
                return Err(format!(
                    "{count} floats: rank 0 waited {on_time} ms and the late rank {late_rank} \
                     ms; rank 0 should wait about 300 ms longer: {t:?}"
                ));
            }
            Ok(())
        }));
    }
}

/// `ncclCommInitRankScalable` with several ids: three thread ranks join from two ids (the
/// rendezvous runs on the first), and rank 0 tells the second id's root to stand down, so a
/// late check-in there is refused at once with the reason instead of waiting out a timeout.
#[test]
fn init_from_several_ids_uses_the_first_and_stops_the_other_roots() {
    let ids = vec![UniqueId::new().unwrap(), UniqueId::new().unwrap()];
    let config = || CommConfig::default().timeout(Duration::from_secs(20));
    let ranks: Vec<_> = (0..3)
        .map(|r| {
            let ids = ids.clone();
            std::thread::spawn(move || {
                let c = Communicator::init_rank_scalable(3, &ids, r, config()).unwrap();
                let mut v = vec![1.0f32; 1024];
                c.all_reduce_in_place(&mut v, RedOp::Sum).unwrap();
                assert!(v.iter().all(|&x| x == 3.0));
                (c.rank(), c.nranks())
            })
        })
        .collect();
    let got: Vec<_> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, vec![(0, 3), (1, 3), (2, 3)]);
    let start = Instant::now();
    let late = Communicator::init_rank(2, &ids[1], 0, config()).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(late.to_string().contains("not used"), "{late}");
    let none = Communicator::init_rank_scalable(2, &[], 0, config()).unwrap_err();
    assert!(none.to_string().contains("0 unique ids"), "{none}");
}

/// A collective of no elements is discarded as NCCL discards it: it takes no operation number
/// and no rank waits for another, so one rank may issue it alone. It still fails on an
/// aborted communicator, and a Send/Recv of none still pairs with its peer's.
#[test]
fn empty_collectives_are_discarded_but_still_checked() {
    let comms = Communicator::init_all(2).unwrap();
    let stats = comms[0].stats();
    let (mut none, mut out) = (Vec::<f32>::new(), Vec::<f32>::new());
    comms[0].all_reduce_in_place(&mut none, RedOp::Sum).unwrap();
    comms[0].all_gather(&none, &mut out).unwrap();
    comms[0].all_to_all(&none, &mut out).unwrap();
    assert_eq!(
        stats.op().completed(),
        0,
        "an empty collective took a number"
    );
    let comms: Vec<Communicator> = std::thread::scope(|s| {
        let ranks: Vec<_> = comms
            .into_iter()
            .map(|c| {
                s.spawn(move || {
                    let peer = 1 - c.rank();
                    let mut got: [f32; 0] = [];
                    let mut g = group_start();
                    g.send(&c, &[] as &[f32], peer).unwrap();
                    g.recv(&c, &mut got, peer).unwrap();
                    g.end().unwrap();
                    c
                })
            })
            .collect();
        ranks.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(stats.op().completed(), 1, "the empty Send/Recv pair");
    comms[1].abort_handle().abort();
    let e = comms[1]
        .all_reduce_in_place(&mut none, RedOp::Sum)
        .unwrap_err();
    assert!(matches!(e, Error::Aborted(_)), "{e}");
}
