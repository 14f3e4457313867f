//! Faults of GPU collectives, on the device machine (`perf/gpu_suite.sh` runs it there):
//! a peer that never joins → the waiting kernel gives up after the timeout and the async-error
//! query names it; an abort stops a waiting kernel; a rank process killed mid-collective is
//! reported and leaves nothing in /dev/shm; a host communicator refuses device buffers.
//!
//! On a host without a GPU (CI) the GPU tests say so on one line and pass.

mod common;

use std::time::{Duration, Instant};

use common::gpu::*;
use cudarc::driver::sys;
use rnccl::{CollArgs, Communicator, DataType, Func, RedOp};

/// Rank 1 never takes part: rank 0's kernel gives up after the timeout and the async-error
/// query names rank 1; the stream is free again.
#[test]
fn a_silent_peer_times_out_and_is_named() {
    let Some(devs) = devices(2) else { return };
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
    // The communicator refuses further work instead of hanging.
    let mut g = rnccl::group_start();
    g.push_cuda(c, k.args, &b.send, &mut b.recv, &s)
        .expect("queue");
    assert!(g.end().is_err());
}

/// An abort from another thread stops a kernel waiting for a peer within milliseconds.
#[test]
fn abort_unblocks_a_waiting_kernel() {
    let Some(devs) = devices(2) else { return };
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
#[test]
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

/// A rank process killed in the middle of a collective: the other's kernel gives up within
/// its timeout and reports it, naming the dead rank; nothing is left in /dev/shm.
#[test]
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
    let Some(devs) = devices(2) else { return };
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
    assert_eq!(shm_names(), before, "left in /dev/shm");
}
