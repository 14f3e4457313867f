//! Faults of GPU collectives, on the device machine (`perf/gpu_suite.sh` runs it there):
//! a peer that never joins → the waiting kernel gives up after the timeout and the async-error
//! query names it with the job's status; ranks that break the symmetric-window promise time out
//! naming each other; an abort stops a waiting kernel; a rank process killed
//! mid-collective is reported and leaves nothing in /dev/shm; a host communicator refuses device
//! buffers; `rnccl status` names a GPU rank that skipped an operation.
//!
//! On a host without a GPU (CI) the GPU tests are reported as ignored, with the reason; with
//! `RNCCL_REQUIRE_GPU=1` as failed.

mod common;

use std::time::{Duration, Instant};

use common::gpu::*;
use cudarc::driver::sys;
use rnccl::{CollArgs, Communicator, DataType, Func, RedOp};

/// Rank 1 never takes part: rank 0's kernel gives up after the timeout and the async-error
/// query names rank 1 and says what the job looks like; the stream is free again.
fn a_silent_peer_times_out_and_is_named() {
    let devs = devices(2);
    // Longer than the first launch's kernel build (NVRTC, a few seconds without a cache).
    let timeout = Duration::from_secs(8);
    let comms = Communicator::init_all_devices(&devs, config(timeout, &[])).expect("init");
    let c = &comms[0];
    let s = stream(c.gpu_ordinal().unwrap());
    let k = case::<f32>(Func::AllReduce, RedOp::Sum, 0, 2, 1 << 20, 9);
    let mut b = prepare(c, &s, &k, false);
    let t0 = Instant::now();
    {
        let mut g = rnccl::group_start();
        g.push_cuda(c, k.args, &b.send, &mut b.recv, &s)
            .expect("queue");
        g.end().expect("launch returns before the data moves");
    }
    assert!(t0.elapsed() < timeout, "the launch waited for the GPU");
    s.synchronize().expect("the kernel ends by itself");
    let waited = t0.elapsed();
    assert!(
        waited >= timeout && waited < timeout * 4,
        "waited {waited:?}"
    );
    let e = c.async_error().expect_err("a timeout");
    assert_eq!(e.code(), rnccl::ResultCode::Timeout, "{e}");
    assert!(e.to_string().contains("rank 1"), "{e}");
    // The error carries the job's status, as a host rank's timeout does, made once: asking
    // again gives the same text at once.
    let text = e.to_string();
    assert!(
        text.contains("job status: operation AllReduce #1")
            && text.contains("rank 1 (host ")
            && text.contains("has not reached it"),
        "{text}"
    );
    let again = Instant::now();
    assert_eq!(c.async_error().expect_err("still").to_string(), text);
    assert!(again.elapsed() < Duration::from_millis(500));
    // The communicator refuses further work instead of hanging.
    let mut g = rnccl::group_start();
    g.push_cuda(c, k.args, &b.send, &mut b.recv, &s)
        .expect("queue");
    assert!(g.end().is_err());
}

/// A broken symmetric promise: rank 0's buffers lie in symmetric windows and rank 1's do not,
/// so rank 0 runs the symmetric kernel and rank 1 the direct kernel. Neither kernel hears from
/// the other: both give up after the timeout, and each rank's async error names the other.
/// (`NCCL_P2P_DIRECT_DISABLE=1`: otherwise the one thread's group hands both ranks each other's
/// own buffers, and both run the symmetric kernel correctly, promise or not.)
fn a_broken_symmetric_promise_times_out() {
    use cudarc::driver::DevicePtr;
    let devs = devices(2);
    let timeout = Duration::from_secs(8);
    let knobs = [("NCCL_P2P_DIRECT_DISABLE", "1")];
    let comms = Communicator::init_all_devices(&devs, config(timeout, &knobs)).expect("init");
    let streams = streams_for(&comms);
    let cases: Vec<_> = (0..2)
        .map(|r| case::<f32>(Func::AllReduce, RedOp::Sum, r, 2, 1 << 20, 9))
        .collect();
    let mut bufs: Vec<_> = (0..2)
        .map(|r| prepare(&comms[r], &streams[r], &cases[r], false))
        .collect();
    // Windows of the same size on both ranks: rank 0's over its buffers, rank 1's over spare
    // memory its collective does not use.
    let spare: Vec<_> = (0..2)
        .map(|r| poisoned::<f32>(&streams[r], 2 << 20))
        .collect();
    let range = |r: usize, which: usize| {
        let s = &streams[r];
        let (p, _g) = match (r, which) {
            (0, 0) => bufs[0].send.device_ptr(s),
            (0, _) => bufs[0].recv.device_ptr(s),
            _ => spare[r].device_ptr(s),
        };
        p
    };
    let bytes = 4 << 20;
    let pending: Vec<Vec<_>> = (0..2)
        .map(|r| {
            (0..2)
                .map(|w| {
                    comms[r]
                        .device_window_start(range(r, w), bytes, true)
                        .expect("offer")
                })
                .collect()
        })
        .collect();
    let _windows: Vec<_> = pending
        .into_iter()
        .enumerate()
        .flat_map(|(r, ps)| {
            ps.into_iter()
                .map(|p| comms[r].device_window_finish(p).expect("window"))
                .collect::<Vec<_>>()
        })
        .collect();
    let t0 = Instant::now();
    {
        let mut g = rnccl::group_start();
        for (r, b) in bufs.iter_mut().enumerate() {
            g.push_cuda(&comms[r], cases[r].args, &b.send, &mut b.recv, &streams[r])
                .expect("queue");
        }
        g.end().expect("launch returns before the data moves");
    }
    for (r, s) in streams.iter().enumerate() {
        s.synchronize().expect("the kernel ends by itself");
        let e = comms[r].async_error().expect_err("a timeout");
        assert_eq!(e.code(), rnccl::ResultCode::Timeout, "rank {r}: {e}");
        let other = format!("rank {}", 1 - r);
        assert!(e.to_string().contains(&other), "rank {r}: {e}");
    }
    let waited = t0.elapsed();
    assert!(
        waited >= timeout && waited < timeout * 4,
        "waited {waited:?}"
    );
}

/// An abort from another thread stops a kernel waiting for a peer within milliseconds.
fn abort_unblocks_a_waiting_kernel() {
    let devs = devices(2);
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    let c = &comms[0];
    let s = stream(c.gpu_ordinal().unwrap());
    let k = case::<f32>(Func::AllReduce, RedOp::Sum, 0, 2, 1 << 20, 9);
    let mut b = prepare(c, &s, &k, false);
    {
        let mut g = rnccl::group_start();
        g.push_cuda(c, k.args, &b.send, &mut b.recv, &s)
            .expect("queue");
        g.end().expect("launch");
    }
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    c.abort_handle().abort();
    s.synchronize().expect("the kernel stops");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let e = c.async_error().expect_err("aborted");
    assert_eq!(e.code(), rnccl::ResultCode::RemoteError, "{e}");
}

/// A device op on a communicator without a GPU is refused with a message saying what to do.
fn host_communicators_refuse_device_buffers() {
    let comms = Communicator::init_all(1).expect("init");
    let mut g = rnccl::group_start();
    let args = CollArgs {
        func: Func::AllReduce,
        count: 4,
        dtype: DataType::Float32,
        op: RedOp::Sum,
        root: 0,
        in_place: false,
    };
    // SAFETY: refused before any address is used.
    let e = unsafe {
        g.push_device(
            &comms[0],
            args,
            0x1000,
            0x2000,
            std::ptr::null_mut::<sys::CUstream_st>(),
        )
    }
    .err()
    .expect("refused");
    assert!(e.to_string().contains("GPU"), "{e}");
}

/// What `rnccl status` shows of GPU ranks: every operation their kernels ran, ended, in their
/// history; and when rank 1 skips operation 4, rank 0 stuck in it on its GPU waiting on rank 1
/// (channel and direction), and rank 1 named as not having reached it, its last operation being
/// 3. The abort then fails operation 4.
fn status_names_the_gpu_rank_that_skipped_an_operation() {
    let devs = devices(2);
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    let streams = streams_for(&comms);
    // 64 Ki floats run the one-shot LL kernel, 1 Mi floats the step interpreter.
    let counts = [64 << 10, 64 << 10, 1 << 20, 1 << 20];
    let cases: Vec<Vec<_>> = counts
        .iter()
        .map(|&n| {
            (0..2)
                .map(|r| case::<f32>(Func::AllReduce, RedOp::Sum, r, 2, n, 3))
                .collect()
        })
        .collect();
    let mut bufs: Vec<Vec<_>> = cases
        .iter()
        .map(|ks| {
            (0..2)
                .map(|r| prepare(&comms[r], &streams[r], &ks[r], false))
                .collect()
        })
        .collect();
    let ranks = [&[0, 1][..], &[0, 1], &[0, 1], &[0]];
    for (i, (ranks, bs)) in ranks.into_iter().zip(bufs.iter_mut()).enumerate() {
        let mut g = rnccl::group_start();
        for (r, b) in bs.iter_mut().enumerate().filter(|(r, _)| ranks.contains(r)) {
            g.push_cuda(
                &comms[r],
                cases[i][r].args,
                &b.send,
                &mut b.recv,
                &streams[r],
            )
            .expect("queue");
        }
        g.end().expect("launch");
        if i == 2 {
            streams.iter().for_each(|s| s.synchronize().expect("sync"));
            let st = my_status();
            assert_eq!(st.len(), 2, "{st:?}");
            for c in &st {
                assert_eq!((c.ops_started, c.ops_completed), (3, 3), "{c:?}");
                let seqs: Vec<u64> = c.history.iter().map(|o| o.seq).collect();
                assert_eq!(seqs, [1, 2, 3], "rank {}", c.rank);
                assert!(
                    c.history
                        .iter()
                        .all(|o| o.ended_unix_ns.is_some() && !o.failed)
                );
            }
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    let job = rnccl::status::job(&[rnccl::status::address().unwrap()], Duration::from_secs(5));
    let diag = rnccl::status::diagnose(&job, 1.0);
    let d = diag
        .iter()
        .find(|d| d.nranks == 2)
        .expect("the communicator");
    let found = d.findings(0).join("\n");
    assert!(
        found.contains("operation AllReduce #4 (1048576 × float32) is in flight on rank 0")
            && found.contains("rank 1 (host ")
            && found.contains("has not reached it: its last operation, AllReduce #3")
            && found.contains("rank 0 (host ")
            && found.contains(" rank 1 on channel"),
        "{found}"
    );
    println!("status findings:\n{found}");
    comms[0].abort_handle().abort();
    streams[0].synchronize().expect("the kernel stops");
    // The failure enters the history once the rank has been told of it.
    assert!(comms[0].async_error().is_err());
    let st = my_status();
    let r0 = st.iter().find(|c| c.rank == 0).expect("rank 0");
    let last = r0.history.last().expect("history");
    assert!(last.seq == 4 && last.failed, "{last:?}");
    assert!(r0.op.is_none());
}

/// A rank process killed in the middle of a collective: the other's kernel gives up within
/// its timeout and reports it, naming the dead rank; nothing is left in /dev/shm.
fn a_rank_killed_mid_collective_is_reported() {
    let timeout = Duration::from_secs(10);
    if let Some(c) = child_comm("killed", timeout) {
        let s = stream(c.gpu_ordinal().unwrap());
        let (r, n) = (c.rank(), c.nranks());
        // Both ranks finish one collective first, so the connections are live.
        run_one::<f32>(&c, &s, Func::AllReduce, RedOp::Sum, false, 1 << 20, 5)
            .unwrap_or_else(|e| panic!("{e}"));
        let k = case::<f32>(Func::AllReduce, RedOp::Sum, r, n, 64 << 20, 6);
        let mut b = prepare(&c, &s, &k, false);
        if r == 1 {
            // Launch nothing, and die once the peer is surely waiting on us.
            std::thread::sleep(Duration::from_millis(500));
            std::process::abort();
        }
        let t0 = Instant::now();
        {
            let mut g = rnccl::group_start();
            g.push_cuda(&c, k.args, &b.send, &mut b.recv, &s)
                .expect("queue");
            g.end().expect("launch");
        }
        s.synchronize().expect("the kernel ends by itself");
        let e = c.async_error().expect_err("the dead peer is reported");
        assert_eq!(e.code(), rnccl::ResultCode::Timeout, "{e}");
        assert!(e.to_string().contains("rank 1"), "{e}");
        assert!(t0.elapsed() < timeout * 2, "{:?}", t0.elapsed());
        println!("reported: {e}");
        return;
    }
    let devs = devices(2);
    let before = shm_names();
    let outs = on_processes(
        "a_rank_killed_mid_collective_is_reported",
        "killed",
        &devs,
        Duration::from_secs(120),
    );
    let (out0, done0) = &outs[0];
    let text = String::from_utf8_lossy(&out0.stdout);
    assert!(
        *done0 && out0.status.success() && text.contains("reported: "),
        "rank 0:\n{text}\n{}",
        String::from_utf8_lossy(&out0.stderr)
    );
    assert!(!outs[1].0.status.success(), "rank 1 was meant to die");
    // New names only: a process sweeps what killed processes left (os::names).
    let left: Vec<String> = shm_names()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

fn main() {
    run_trials(vec![
        gpu_test(
            "a_silent_peer_times_out_and_is_named",
            a_silent_peer_times_out_and_is_named,
        ),
        gpu_test(
            "a_broken_symmetric_promise_times_out",
            a_broken_symmetric_promise_times_out,
        ),
        gpu_test(
            "abort_unblocks_a_waiting_kernel",
            abort_unblocks_a_waiting_kernel,
        ),
        host_test(
            "host_communicators_refuse_device_buffers",
            host_communicators_refuse_device_buffers,
        ),
        gpu_test(
            "status_names_the_gpu_rank_that_skipped_an_operation",
            status_names_the_gpu_rank_that_skipped_an_operation,
        ),
        gpu_test(
            "a_rank_killed_mid_collective_is_reported",
            a_rank_killed_mid_collective_is_reported,
        ),
    ]);
}
