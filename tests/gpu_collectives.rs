//! Collectives on GPU memory, on the device machine (`perf/gpu_suite.sh` runs it there):
//! every collective × data type × operation × in/out of place, on one GPU rank, on two
//! (two GPUs when the host has them, otherwise two ranks sharing GPU 0) and on four (hosts
//! with four GPUs or more; and four ranks sharing the first GPU), as threads, as one
//! thread driving both ranks in one group, as two ranks that see different hosts (TCP or
//! simulated IB between pinned FIFOs), and as two processes (FIFOs in GPU memory through
//! CUDA IPC, or in shared host memory); counts 0, 1, primes, counts that are not multiples of
//! nranks, and 256 MiB; outputs poisoned before every run and compared with the sequential host
//! reference of `common`.
//!
//! On a host without a GPU (CI) every test is reported as ignored, with the reason (the
//! kernels' NVRTC build and the device protocol are tested there by the library's unit tests);
//! with `RNCCL_REQUIRE_GPU=1` as failed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::gpu::*;
use cudarc::driver::CudaStream;
use rnccl::{Communicator, Func, RedOp};

/// Counts: empty, one element, primes, not multiples of nranks, several FIFO slots; 61
/// elements take the one-warp LL all-reduce at 1, 2 and 4 bytes each (61 to 244 bytes) and
/// the block path at 8.
const COUNTS: [usize; 7] = [0, 1, 7, 61, 1021, 65_537, 1_000_003];

/// The matrix on `n` GPU ranks as threads of this process.
fn threads_matrix(n: usize) {
    let devs = devices(n);
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    matrix(comms, &COUNTS);
}

fn every_collective_on_one_gpu_rank() {
    threads_matrix(1);
}

fn every_collective_on_two_gpu_ranks() {
    threads_matrix(2);
}

/// Four ranks, one per GPU: the direct kernel's shards and flags with three peers each.
fn every_collective_on_four_gpu_ranks() {
    threads_matrix(4);
}

fn every_collective_staged_through_host_memory() {
    let devs = devices(2);
    let cfg = config(Duration::from_secs(60), &[("NCCL_P2P_DISABLE", "1")]);
    let comms = Communicator::init_all_devices(&devs, cfg).expect("init");
    let links = comms[0].traffic();
    assert!(
        links
            .iter()
            .all(|l| l.transport == rnccl::stats::Path::GpuHost),
        "{links:?}"
    );
    matrix(comms, &[0, 1, 1021, 65_537]);
}

/// Two GPU ranks of this process that see different hosts (an `NCCL_HOSTID` each), so their
/// connections go through pinned host FIFOs and the proxy thread: over TCP (loopback), and
/// over the simulated IB fabric (`RNCCL_IB_FAKE=1`), where the FIFOs' slots are registered
/// and written in place by RDMA.
fn between_hosts(extra: &[(&str, &str)], want: rnccl::stats::Path) {
    let devs = devices(2);
    let id = rnccl::UniqueId::new().expect("unique id");
    let comms: Vec<Communicator> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|r| {
                let (id, dev) = (&id, devs[r]);
                let host = format!("gpu-host-{r}");
                let mut knobs = vec![("NCCL_HOSTID", host.as_str())];
                knobs.extend_from_slice(extra);
                let cfg = config(Duration::from_secs(60), &knobs).device(dev);
                s.spawn(move || Communicator::init_rank(2, id, r, cfg).expect("init"))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for c in &comms {
        let t = c.transports();
        assert!(
            !t.is_empty() && t.iter().all(|&(_, p)| p == want),
            "rank {}: {t:?}",
            c.rank()
        );
    }
    matrix(comms, &[0, 1, 1021, 65_537, 1_000_003]);
}

fn every_collective_between_hosts_over_tcp() {
    between_hosts(&[("NCCL_IB_DISABLE", "1")], rnccl::stats::Path::GpuNet);
}

fn every_collective_between_hosts_over_ib() {
    between_hosts(&[("RNCCL_IB_FAKE", "1")], rnccl::stats::Path::GpuNetIb);
}

/// Queues every rank's case (in place or not) as one group from this thread, waits for the
/// streams and checks every rank's output.
fn one_group_checked(
    what: &str,
    comms: &[Communicator],
    streams: &[Arc<CudaStream>],
    cases: &[Case<f32>],
    bufs: &mut [Bufs<f32>],
    in_place: bool,
) {
    {
        let mut g = rnccl::group_start();
        for ((c, b), s) in comms.iter().zip(bufs.iter_mut()).zip(streams) {
            push_case(&mut g, c, &cases[c.rank()], b, s, in_place).expect("queue");
        }
        g.end().expect("group");
    }
    for (r, s) in streams.iter().enumerate() {
        s.synchronize().expect("sync");
        comms[r].async_error().expect("no async error");
        check(what, s, &bufs[r], &cases[r], comms.len()).expect("result");
    }
}

/// One thread drives both ranks: each group holds one operation per rank (NCCL's
/// ncclCommInitAll usage), so nothing may block between the two launches, and every driver
/// call of a launch (LL kernels, input snapshots of in-place AllToAll) must run in its own
/// GPU's context, not the one the thread last used.
fn one_thread_drives_both_ranks_in_one_group() {
    let devs = devices(2);
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    let streams: Vec<_> = comms
        .iter()
        .map(|c| stream(c.gpu_ordinal().unwrap()))
        .collect();
    let n = comms.len();
    let runs = [
        (Func::AllReduce, false, 3u64, 1usize),
        (Func::AllReduce, false, 4, 4099),
        (Func::AllReduce, false, 5, 3_000_017),
        (Func::AllToAll, true, 6, 1001),
        (Func::AllToAll, false, 7, 65_537),
        // Above 64 MiB, where an all-to-all and a two-rank broadcast on the group's own
        // buffers run `AllToAll_ST` and `Broadcast_ST`.
        (Func::AllToAll, true, 8, 8_400_007),
        (Func::AllToAll, false, 9, 9_000_011),
        (Func::Broadcast, true, 10, 16_800_001),
        (Func::Broadcast, false, 11, 17_000_003),
    ];
    for (f, in_place, seed, count) in runs {
        let cases: Vec<Case<f32>> = (0..n)
            .map(|r| case(f, RedOp::Sum, r, n, count, seed))
            .collect();
        let mut bufs: Vec<Bufs<f32>> = (0..n)
            .map(|r| prepare(&comms[r], &streams[r], &cases[r], in_place))
            .collect();
        one_group_checked(
            "one-thread group",
            &comms,
            &streams,
            &cases,
            &mut bufs,
            in_place,
        );
    }
}

/// Every case the symmetric kernels take, for the GPU ranks of `comms` driven by one thread:
/// all-reduces, reduce-scatters and all-gathers, in and out of place, sums and maxima, counts
/// from one element to several blocks' worth; `run` gets each case's name, cases and prepared
/// buffers, and whether it is in place.
fn each_symmetric_case(
    comms: &[Communicator],
    streams: &[Arc<CudaStream>],
    mut run: impl FnMut(&str, &[Case<f32>], &mut Vec<Bufs<f32>>, bool),
) {
    let n = comms.len();
    let mut seed = 40u64;
    for f in [Func::AllReduce, Func::ReduceScatter, Func::AllGather] {
        for in_place in [false, true] {
            for op in [RedOp::Sum, RedOp::Max] {
                if op == RedOp::Max && f == Func::AllGather {
                    continue;
                }
                // 262,147 floats: just above the 1 MiB from which a group's own buffers go to
                // the symmetric kernels, and not a multiple of 16 bytes.
                for count in [1usize, 7, 1021, 65_537, 262_147, 3_000_017] {
                    seed += 1;
                    let what = format!("{f:?} {op} count={count} in_place={in_place}");
                    let cases: Vec<Case<f32>> =
                        (0..n).map(|r| case(f, op, r, n, count, seed)).collect();
                    let mut bufs: Vec<Bufs<f32>> = (0..n)
                        .map(|r| prepare(&comms[r], &streams[r], &cases[r], in_place))
                        .collect();
                    run(&what, &cases, &mut bufs, in_place);
                }
            }
        }
    }
}

/// Two GPU ranks driven by one thread whose buffers lie in symmetric windows
/// (`ncclCommWindowRegister` with `NCCL_WIN_COLL_SYMMETRIC`): all-reduces, reduce-scatters and
/// all-gathers run the symmetric kernels (kernels/symmetric.cuh), which load the peers'
/// inputs and store into their outputs in place, at the windows' offsets
/// (`NCCL_P2P_DIRECT_DISABLE=1` keeps the group's own buffers out of it).
fn collectives_in_symmetric_windows() {
    use cudarc::driver::DevicePtr;
    let devs = devices(2);
    // The buffers come from the GPUs' memory pools, which a peer reaches once opened to it.
    open_pools_to_each_other(&devs);
    let knobs = [("NCCL_P2P_DIRECT_DISABLE", "1")];
    let comms = Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &knobs))
        .expect("init");
    let streams = streams_for(&comms);
    each_symmetric_case(&comms, &streams, |what, cases, bufs, in_place| {
        // Every rank's send and receive buffers as windows: all offers out first, as one
        // thread registers for both ranks.
        let ranges: Vec<[(u64, usize); 2]> = bufs
            .iter()
            .zip(&streams)
            .map(|(b, s)| {
                let (send, _g) = b.send.device_ptr(s);
                let (recv, _h) = b.recv.device_ptr(s);
                [(send, b.send.num_bytes()), (recv, b.recv.num_bytes())]
            })
            .collect();
        let pending: Vec<Vec<_>> = comms
            .iter()
            .zip(&ranges)
            .map(|(c, rs)| {
                rs.iter()
                    .map(|&(p, len)| c.device_window_start(p, len, true).expect("offer"))
                    .collect()
            })
            .collect();
        let windows: Vec<_> = comms
            .iter()
            .zip(pending)
            .flat_map(|(c, ps)| {
                ps.into_iter()
                    .map(|p| c.device_window_finish(p).expect("window"))
                    .collect::<Vec<_>>()
            })
            .collect();
        one_group_checked(what, &comms, &streams, cases, bufs, in_place);
        drop(windows);
    });
}

/// Two GPU ranks driven by one thread, on plain buffers (no registration): the group holds
/// both ranks' buffers, so the symmetric kernels load and store them in place through peer
/// access (rnccl's `exec::gpu::group_buffers`). The buffers come from each GPU's memory pool,
/// opened to the other GPU first, as a program sharing pool memory between its GPUs does.
fn collectives_on_the_groups_own_buffers() {
    let devs = devices(2);
    open_pools_to_each_other(&devs);
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    let streams = streams_for(&comms);
    each_symmetric_case(&comms, &streams, |what, cases, bufs, in_place| {
        one_group_checked(what, &comms, &streams, cases, bufs, in_place);
    });
}

/// Four ranks on the first GPU, driven by one thread, on the group's own buffers (the
/// symmetric kernels) and with `NCCL_P2P_DIRECT_DISABLE=1` (the direct kernel). A block of
/// these kernels waits for the same block of every peer, so all four ranks' blocks must be
/// resident at once: rnccl caps them (`GpuComm::block_cap`). Without the cap, 4 × 64 and
/// 4 × 128 blocks against an H200's 132 resident waited for each other until the deadline
/// from about 9 MB (the 3,000,017-float cases here are 12 MB).
fn four_ranks_share_one_gpu() {
    for knobs in [&[][..], &[("NCCL_P2P_DIRECT_DISABLE", "1")][..]] {
        let comms = Communicator::init_all_devices(&[0; 4], config(Duration::from_secs(30), knobs))
            .expect("init");
        let streams = streams_for(&comms);
        each_symmetric_case(&comms, &streams, |what, cases, bufs, in_place| {
            one_group_checked(what, &comms, &streams, cases, bufs, in_place);
        });
    }
}

/// Two GPU ranks, each driven by its own thread, whose buffers are registered with
/// `ncclCommRegister` (`Communicator::register_buffer`) by every rank, by rank 0 only, or by
/// none. A rank that registered runs the registered kernel (kernels/registered.cuh), which
/// runs the symmetric kernels on the peers' buffers when every rank did and the direct kernel
/// when one did not: every pattern gives the reference results. The peers learn of a
/// registration as they launch, so each case runs three times on the same buffers (refilled
/// each time): the later runs find every rank's registration mapped.
fn registered_buffers_on_rank_threads() {
    use cudarc::driver::DevicePtr;
    let devs = devices(2);
    // The buffers come from the GPUs' memory pools, which a peer reaches once opened to it.
    open_pools_to_each_other(&devs);
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    on_gpu_threads(comms, |c, s| {
        let (r, n) = (c.rank(), c.nranks());
        let mut seed = 90u64;
        let patterns = [
            ("every rank", true),
            ("rank 0 only", r == 0),
            ("no rank", false),
        ];
        for (pattern, registers) in patterns {
            for f in [Func::AllReduce, Func::ReduceScatter, Func::AllGather] {
                for in_place in [false, true] {
                    for count in [1021usize, 65_537, 262_147, 3_000_017] {
                        seed += 1;
                        let k = case::<f32>(f, RedOp::Sum, r, n, count, seed);
                        let what = format!(
                            "{f:?} count={count} in_place={in_place} registered by {pattern}, \
                             rank {r}"
                        );
                        let mut b = prepare(c, s, &k, in_place);
                        let mut regs = Vec::new();
                        if registers {
                            for buf in [&b.send, &b.recv] {
                                let (p, _g) = buf.device_ptr(s);
                                let reg = c.register_buffer(p, buf.num_bytes());
                                regs.push(reg.map_err(|e| format!("{what}: register: {e}"))?);
                            }
                        }
                        for run in 0..3 {
                            if run > 0 {
                                let fresh = prepare(c, s, &k, in_place);
                                s.memcpy_dtod(&fresh.send, &mut b.send)
                                    .map_err(|e| e.to_string())?;
                                s.memcpy_dtod(&fresh.recv, &mut b.recv)
                                    .map_err(|e| e.to_string())?;
                            }
                            let err = |e: rnccl::Error| format!("{what} run {run}: {e}");
                            let mut g = rnccl::group_start();
                            push_case(&mut g, c, &k, &mut b, s, in_place).map_err(err)?;
                            g.end().map_err(err)?;
                            s.synchronize().map_err(|e| format!("{what}: {e}"))?;
                            c.async_error().map_err(err)?;
                            check(&format!("{what} run {run}"), s, &b, &k, n)?;
                        }
                        for reg in regs {
                            c.deregister_buffer(reg)
                                .map_err(|e| format!("{what}: {e}"))?;
                        }
                    }
                }
            }
        }
        Ok(())
    });
}

/// Element `i` of what rank `from` sends rank `to` in [`sends_of_one_group`]'s all-pairs group.
fn pair_value(from: usize, to: usize, i: usize) -> f32 {
    (i % 977) as f32 + 1000.0 * from as f32 + 100_000.0 * to as f32
}

/// Floats rank `from` sends rank `to` in the all-pairs group of `base` floats: unequal, and
/// odd, so pieces and tails differ from pair to pair.
fn pair_count(base: usize, from: usize, to: usize, n: usize) -> usize {
    base + 17 * (from * n + to)
}

/// One thread drives every rank's Send/Recv in one group (nccl-tests' sendrecv with `-g N`,
/// `batch_isend_irecv`): from 1 MiB the sends go straight into the receive buffers
/// (`SendRecv_ST`, rnccl's `exec::gpu::group_sends`), below it and with
/// `NCCL_P2P_DIRECT_DISABLE=1` through the step interpreter. A ring exchange (to the next rank,
/// from the previous), then every rank to every rank and itself at unequal sizes, each
/// followed by an all-reduce the symmetric kernels take, whose barriers share the blocks'
/// counts with the sends'. On two GPUs (pools opened to each other) and on four ranks sharing
/// GPU 0, whose blocks must all be resident at once.
fn sends_of_one_group() {
    let two = devices(2);
    open_pools_to_each_other(&two);
    let direct_off = [("NCCL_P2P_DIRECT_DISABLE", "1")];
    for (devs, knobs) in [
        (two.clone(), &[][..]),
        (two, &direct_off[..]),
        (vec![0; 4], &[][..]),
    ] {
        let comms = Communicator::init_all_devices(&devs, config(Duration::from_secs(60), knobs))
            .expect("init");
        let streams = streams_for(&comms);
        let n = comms.len();
        for (seed, count) in [(1u64, 2usize), (2, (1 << 18) + 3), (3, 4 << 20)] {
            let what = format!("{n} ranks on GPUs {devs:?}, {knobs:?}, {count} floats");
            let cases: Vec<Case<f32>> = (0..n)
                .map(|r| case(Func::Send, RedOp::Sum, r, n, count, seed))
                .collect();
            let mut bufs: Vec<Bufs<f32>> = (0..n)
                .map(|r| prepare(&comms[r], &streams[r], &cases[r], false))
                .collect();
            {
                let mut g = rnccl::group_start();
                for (r, (c, b)) in comms.iter().zip(bufs.iter_mut()).enumerate() {
                    g.send_cuda(c, &b.send, (r + 1) % n, &streams[r])
                        .expect("send");
                    g.recv_cuda(c, &mut b.recv, (r + n - 1) % n, &streams[r])
                        .expect("recv");
                }
                g.end().expect("group");
            }
            for (r, s) in streams.iter().enumerate() {
                s.synchronize().expect("sync");
                comms[r].async_error().expect("no async error");
                check(&format!("ring, {what}"), s, &bufs[r], &cases[r], n).expect("ring");
            }
            let sends: Vec<Vec<cudarc::driver::CudaSlice<f32>>> = (0..n)
                .map(|r| {
                    (0..n)
                        .map(|p| {
                            let v: Vec<f32> = (0..pair_count(count, r, p, n))
                                .map(|i| pair_value(r, p, i))
                                .collect();
                            upload(&streams[r], &v)
                        })
                        .collect()
                })
                .collect();
            let mut recvs: Vec<Vec<cudarc::driver::CudaSlice<f32>>> = (0..n)
                .map(|r| {
                    (0..n)
                        .map(|p| poisoned(&streams[r], pair_count(count, p, r, n)))
                        .collect()
                })
                .collect();
            {
                let mut g = rnccl::group_start();
                for (r, (c, into)) in comms.iter().zip(recvs.iter_mut()).enumerate() {
                    for (p, buf) in into.iter_mut().enumerate() {
                        g.send_cuda(c, &sends[r][p], p, &streams[r]).expect("send");
                        g.recv_cuda(c, buf, p, &streams[r]).expect("recv");
                    }
                }
                g.end().expect("group");
            }
            for (r, s) in streams.iter().enumerate() {
                s.synchronize().expect("sync");
                comms[r].async_error().expect("no async error");
                for (p, buf) in recvs[r].iter().enumerate() {
                    let got: Vec<f32> = s.clone_dtoh(buf).expect("download");
                    let bad = got
                        .iter()
                        .enumerate()
                        .find(|&(i, &x)| x != pair_value(p, r, i));
                    assert!(
                        bad.is_none(),
                        "all pairs, {what}: rank {r}'s floats from rank {p}: {bad:?}"
                    );
                }
            }
            let cases: Vec<Case<f32>> = (0..n)
                .map(|r| case(Func::AllReduce, RedOp::Sum, r, n, 1 << 20, seed))
                .collect();
            let mut bufs: Vec<Bufs<f32>> = (0..n)
                .map(|r| prepare(&comms[r], &streams[r], &cases[r], false))
                .collect();
            let what = format!("all-reduce after the sends, {what}");
            one_group_checked(&what, &comms, &streams, &cases, &mut bufs, false);
        }
    }
}

/// Gives every GPU of `devs` read and write access to every other's current memory pool
/// (where cudarc's stream allocations come from).
fn open_pools_to_each_other(devs: &[usize]) {
    use cudarc::driver::sys;
    for &d in devs {
        let _ctx = cudarc::driver::CudaContext::new(d).expect("GPU context");
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: the driver writes one pool handle of device d (an ordinal that exists).
        let r = unsafe { sys::cuDeviceGetMemPool(&mut pool, d as i32) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "GPU {d}'s memory pool");
        for &p in devs.iter().filter(|&&p| p != d) {
            let desc = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: p as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: one descriptor for a live pool.
            let r = unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) };
            assert_eq!(
                r,
                sys::CUresult::CUDA_SUCCESS,
                "opening GPU {d}'s pool to GPU {p}"
            );
        }
    }
}

/// A collective captured into a CUDA graph in thread-local mode (nccl-tests `-G`) once the
/// device-program cache is full of other sizes: making room queries events, which such a
/// capture forbids (it invalidates the capture) unless the engine relaxes the mode around it.
fn graph_capture_after_the_program_cache_filled() {
    let devs = devices(1);
    let mut comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    let c = comms.pop().expect("one rank");
    let s = stream(c.gpu_ordinal().unwrap());
    // More distinct programs than the cache keeps (256). Avg scales the input, so one rank
    // runs the kernel (a plain all-reduce on one rank is a copy, as NCCL's).
    for i in 1..=300 {
        run_one::<f32>(&c, &s, Func::AllReduce, RedOp::Avg, false, 64 * i, i as u64)
            .expect("an uncaptured all-reduce");
    }
    // cudarc orders a slice's uses across streams with events recorded outside the capture,
    // which a capture may not wait on; the buffers below live on `s` alone.
    // SAFETY: slices made while tracking is off are used on `s` only and dropped after it is
    // synchronised; tracking is back on for everything made afterwards.
    unsafe { s.context().disable_event_tracking() };
    let k = case::<f32>(Func::AllReduce, RedOp::Avg, 0, 1, 100_003, 9);
    let mut b = prepare(&c, &s, &k, false);
    // SAFETY: as above.
    unsafe { s.context().enable_event_tracking() };
    let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    s.begin_capture(mode).expect("begin capture");
    let queued = (|| {
        let mut g = rnccl::group_start();
        g.push_cuda(&c, k.args, &b.send, &mut b.recv, &s)?;
        g.end()
    })();
    let graph = s
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .expect("the capture stays valid");
    queued.expect("captured all-reduce");
    let graph = graph.expect("a non-empty graph");
    graph.launch().expect("graph launch");
    s.synchronize().expect("sync");
    check("captured all-reduce", &s, &b, &k, 1).expect("result");
    // The 300 launches and the captured operation, which the graph's run started and
    // finished, are in the rank's history, each ended.
    let mine = || {
        let st = my_status();
        st.into_iter()
            .find(|c| c.nranks == 1)
            .expect("the rank's status")
    };
    let me = mine();
    assert_eq!((me.ops_started, me.ops_completed), (301, 301), "{me:?}");
    assert!(me.op.is_none());
    let last = me.history.last().expect("history");
    assert!(
        last.seq == 301 && last.ended_unix_ns.is_some() && !last.failed,
        "{last:?}"
    );
    // A replay carries the captured number again and changes nothing.
    graph.launch().expect("replay");
    s.synchronize().expect("sync");
    let me = mine();
    assert_eq!((me.ops_started, me.ops_completed), (301, 301), "{me:?}");
}

/// 256 MiB per rank: many slots on every channel.
fn large_collectives() {
    let devs = devices(2);
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(120), &[])).expect("init");
    on_gpu_threads(comms, |c, s| {
        let count = (256 << 20) / 4 + 3;
        for f in [
            Func::AllReduce,
            Func::AllGather,
            Func::ReduceScatter,
            Func::Broadcast,
        ] {
            let cnt = match f {
                Func::AllReduce | Func::Broadcast => count,
                _ => count / c.nranks(),
            };
            run_one::<f32>(c, s, f, RedOp::Sum, false, cnt, 77)?;
        }
        Ok(())
    });
}

/// The matrix with one process per rank on `role`'s transport.
fn process_matrix(test: &str, role: &str, counts: &[usize]) {
    if let Some(c) = child_comm(role, Duration::from_secs(60)) {
        let s = stream(c.gpu_ordinal().unwrap());
        rank_matrix(&c, &s, counts).unwrap_or_else(|e| panic!("{e}"));
        if role.ends_with("_shm") {
            let links = c.traffic();
            assert!(
                links
                    .iter()
                    .all(|l| l.transport == rnccl::stats::Path::GpuHost),
                "{links:?}"
            );
        }
        return;
    }
    let devs = devices(2);
    let before = shm_names();
    for (r, (out, done)) in on_processes(test, role, &devs, Duration::from_secs(500))
        .into_iter()
        .enumerate()
    {
        assert!(
            done && out.status.success(),
            "rank {r} (finished: {done}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // New names only: a process sweeps what killed processes left (os::names).
    let left: Vec<String> = shm_names()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// One process per rank: FIFOs in GPU memory shared through CUDA IPC handles.
fn every_collective_on_two_gpu_processes() {
    process_matrix("every_collective_on_two_gpu_processes", "matrix", &COUNTS);
}

/// One process per rank with NCCL_P2P_DISABLE=1: FIFOs in shared host memory both processes
/// register with their driver (NCCL's SHM transport).
fn every_collective_on_two_gpu_processes_through_host_memory() {
    process_matrix(
        "every_collective_on_two_gpu_processes_through_host_memory",
        "matrix_shm",
        &[0, 1, 1021, 65_537],
    );
}

fn main() {
    run_trials(vec![
        gpu_test(
            "every_collective_on_one_gpu_rank",
            every_collective_on_one_gpu_rank,
        ),
        gpu_test(
            "every_collective_on_two_gpu_ranks",
            every_collective_on_two_gpu_ranks,
        ),
        gpus_test(
            "every_collective_on_four_gpu_ranks",
            4,
            every_collective_on_four_gpu_ranks,
        ),
        gpu_test(
            "every_collective_staged_through_host_memory",
            every_collective_staged_through_host_memory,
        ),
        gpu_test(
            "every_collective_between_hosts_over_tcp",
            every_collective_between_hosts_over_tcp,
        ),
        gpu_test(
            "every_collective_between_hosts_over_ib",
            every_collective_between_hosts_over_ib,
        ),
        gpu_test(
            "one_thread_drives_both_ranks_in_one_group",
            one_thread_drives_both_ranks_in_one_group,
        ),
        gpu_test(
            "graph_capture_after_the_program_cache_filled",
            graph_capture_after_the_program_cache_filled,
        ),
        gpu_test(
            "collectives_in_symmetric_windows",
            collectives_in_symmetric_windows,
        ),
        gpu_test(
            "collectives_on_the_groups_own_buffers",
            collectives_on_the_groups_own_buffers,
        ),
        gpu_test("sends_of_one_group", sends_of_one_group),
        gpu_test(
            "registered_buffers_on_rank_threads",
            registered_buffers_on_rank_threads,
        ),
        gpu_test("four_ranks_share_one_gpu", four_ranks_share_one_gpu),
        gpu_test("large_collectives", large_collectives),
        gpu_test(
            "every_collective_on_two_gpu_processes",
            every_collective_on_two_gpu_processes,
        ),
        gpu_test(
            "every_collective_on_two_gpu_processes_through_host_memory",
            every_collective_on_two_gpu_processes_through_host_memory,
        ),
    ]);
}
