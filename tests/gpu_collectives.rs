//! Collectives on GPU memory, on the device machine (`perf/gpu_suite.sh` runs this file there):
//! every collective × data type × operation × in/out of place, on one GPU rank and on two
//! (two GPUs when the host has them, otherwise two ranks sharing GPU 0), as two threads and as
//! one thread driving both ranks in one group; counts 0, 1, primes, counts that are not
//! multiples of nranks, and 256 MiB; outputs poisoned before every run and compared with the
//! sequential host reference of `common`. Then faults: a peer that never joins → the waiting
//! kernel reports a timeout naming it; an abort stops a waiting kernel.
//!
//! On a host without a GPU (CI) every test says so on one line and passes: the kernels' NVRTC
//! build and the device protocol are tested there by the library's unit tests.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TElem, compare, input, ops_for, reduce_at};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, sys};
use rnccl::config::{Config, Source};
use rnccl::{CollArgs, CommConfig, Communicator, DataType, Func, RedOp};

/// A test element that can live on the GPU.
trait GElem: TElem + DeviceRepr {}
impl<T: TElem + DeviceRepr> GElem for T {}

const FUNCS: [Func; 9] = [
    Func::AllReduce,
    Func::Broadcast,
    Func::Reduce,
    Func::AllGather,
    Func::ReduceScatter,
    Func::AllToAll,
    Func::Gather,
    Func::Scatter,
    Func::Send,
];

/// The devices to put `n` ranks on, or `None` (after saying why) on a host without GPUs.
fn devices(n: usize) -> Option<Vec<usize>> {
    match rnccl::gpus() {
        Ok(g) => Some((0..n).map(|r| r % g.len()).collect()),
        Err(e) => {
            eprintln!("skipped: no GPU here ({e})");
            None
        }
    }
}

fn config(timeout: Duration, knobs: &[(&str, &str)]) -> CommConfig {
    let mut cfg = Config::defaults();
    for (k, v) in knobs {
        cfg.set(k, *v, Source::Program("test".into()));
    }
    CommConfig::with_knobs(Arc::new(cfg)).timeout(timeout)
}

/// A stream of `gpu`'s primary context.
fn stream(gpu: usize) -> Arc<CudaStream> {
    let ctx = CudaContext::new(gpu).expect("GPU context");
    ctx.new_stream().expect("stream")
}

/// `len` elements (at least one, so the allocation exists) poisoned with 0xA5 bytes.
fn poisoned<T: GElem>(s: &Arc<CudaStream>, len: usize) -> CudaSlice<T> {
    let host: Vec<T> = vec![poison(); len.max(1)];
    s.clone_htod(&host).expect("poisoned buffer")
}

fn poison<T: GElem>() -> T {
    let bytes = [0xa5u8; 16];
    // SAFETY: every element type here is a plain number of at most 16 bytes for which any bit
    // pattern is a valid value.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

fn upload<T: GElem>(s: &Arc<CudaStream>, v: &[T]) -> CudaSlice<T> {
    if v.is_empty() {
        return poisoned(s, 1);
    }
    s.clone_htod(v).expect("upload")
}

/// What this rank feeds `f` and what it must find afterwards (None: nothing to check).
struct Case<T> {
    args: CollArgs,
    input: Vec<T>,
    /// Expected output elements (value, magnitude for the float tolerance).
    want: Option<Vec<(T, f64)>>,
}

fn case<T: GElem>(f: Func, op: RedOp, r: usize, n: usize, count: usize, seed: u64) -> Case<T> {
    let root = (seed as usize) % n;
    let exact = |v: T| (v, T::mag(v));
    let val = |rank, i| exact(T::value(rank, i, seed, op));
    let args = |func| CollArgs {
        func,
        count,
        dtype: T::DTYPE,
        op,
        root,
        in_place: false,
    };
    let c = count;
    match f {
        Func::AllReduce => Case {
            args: args(f),
            input: input(r, c, seed, op),
            want: Some((0..c).map(|i| reduce_at::<T>(n, i, seed, op)).collect()),
        },
        Func::Broadcast => Case {
            args: args(f),
            input: input(r, c, seed, op),
            want: Some((0..c).map(|i| val(root, i)).collect()),
        },
        Func::Reduce => Case {
            args: args(f),
            input: input(r, c, seed, op),
            want: (r == root).then(|| (0..c).map(|i| reduce_at::<T>(n, i, seed, op)).collect()),
        },
        Func::AllGather => Case {
            args: args(f),
            input: input(r, c, seed, op),
            want: Some((0..n * c).map(|i| val(i / c, i % c)).collect()),
        },
        Func::ReduceScatter => Case {
            args: args(f),
            input: input(r, n * c, seed, op),
            want: Some(
                (0..c)
                    .map(|i| reduce_at::<T>(n, r * c + i, seed, op))
                    .collect(),
            ),
        },
        Func::AllToAll => Case {
            args: args(f),
            input: input(r, n * c, seed, op),
            want: Some((0..n * c).map(|i| val(i / c, r * c + i % c)).collect()),
        },
        Func::Gather => Case {
            args: args(f),
            input: input(r, c, seed, op),
            want: (r == root).then(|| (0..n * c).map(|i| val(i / c, i % c)).collect()),
        },
        Func::Scatter => Case {
            args: args(f),
            input: if r == root {
                input(r, n * c, seed, op)
            } else {
                Vec::new()
            },
            want: Some((0..c).map(|i| val(root, r * c + i)).collect()),
        },
        _ => Case {
            args: args(Func::Send),
            input: input(r, c, seed, op),
            want: Some((0..c).map(|i| val((r + n - 1) % n, i)).collect()),
        },
    }
}

/// Device buffers of one rank's case, queued into `g`.
struct Bufs<T: DeviceRepr> {
    send: CudaSlice<T>,
    recv: CudaSlice<T>,
    /// Where the output is inside `recv`, in elements.
    out: (usize, usize),
}

fn prepare<T: GElem>(
    c: &Communicator,
    s: &Arc<CudaStream>,
    k: &Case<T>,
    in_place: bool,
) -> Bufs<T> {
    let (r, n) = (c.rank(), c.nranks());
    let es = T::DTYPE.size();
    if in_place {
        let mut a = k.args;
        a.in_place = true;
        let l = a.in_place_layout(r, n).expect("in-place layout");
        let mut host = vec![poison::<T>(); (l.buf_bytes / es).max(1)];
        let take = (l.input.1 / es).min(k.input.len());
        host[l.input.0 / es..l.input.0 / es + take].copy_from_slice(&k.input[..take]);
        Bufs {
            send: poisoned(s, 1),
            recv: s.clone_htod(&host).expect("upload"),
            out: (l.output.0 / es, l.output.1 / es),
        }
    } else {
        // A Send's receive buffer is the ring exchange's Recv (as long as the send).
        let out = match k.args.func {
            Func::Send => k.input.len(),
            _ => k.args.output_bytes(n) / es,
        };
        Bufs {
            send: upload(s, &k.input),
            recv: poisoned(s, out),
            out: (0, out),
        }
    }
}

fn check<T: GElem>(
    what: &str,
    s: &Arc<CudaStream>,
    b: &Bufs<T>,
    k: &Case<T>,
    n: usize,
) -> Result<(), String> {
    let Some(want) = &k.want else { return Ok(()) };
    let all: Vec<T> = s.clone_dtoh(&b.recv).map_err(|e| format!("{what}: {e}"))?;
    let got = &all[b.out.0..b.out.0 + want.len()];
    compare(what, got, n, |i| want[i])
}

/// Runs one case on rank `c` (all ranks call it with the same arguments).
fn run_one<T: GElem>(
    c: &Communicator,
    s: &Arc<CudaStream>,
    f: Func,
    op: RedOp,
    in_place: bool,
    count: usize,
    seed: u64,
) -> Result<(), String> {
    let (r, n) = (c.rank(), c.nranks());
    let k = case::<T>(f, op, r, n, count, seed);
    let what = format!(
        "{f:?} {} {op} count={count} in_place={in_place} n={n} rank={r}",
        T::DTYPE
    );
    let mut b = prepare(c, s, &k, in_place && f != Func::Send);
    let err = |e: rnccl::Error| format!("{what}: {e}");
    {
        let mut g = rnccl::group_start();
        if f == Func::Send && in_place {
            // nccl-tests' in-place sendrecv: send the buffer and receive into it in one group
            // (the C ABI's raw pointers allow what borrows forbid).
            if count > 0 {
                b.recv = upload(s, &k.input);
                let p = {
                    use cudarc::driver::DevicePtr;
                    let (p, _guard) = b.recv.device_ptr(s);
                    p
                };
                let mut send = k.args;
                send.root = (r + 1) % n;
                let recv = CollArgs {
                    func: Func::Recv,
                    root: (r + n - 1) % n,
                    ..k.args
                };
                // SAFETY: `b.recv` holds `count` elements on this rank's GPU and outlives the
                // synchronisation below; the stream is this rank's.
                unsafe {
                    g.push_device(c, send, p, 0, s.cu_stream()).map_err(err)?;
                    g.push_device(c, recv, 0, p, s.cu_stream()).map_err(err)?;
                }
            }
        } else if f == Func::Send {
            // A ring exchange in one group (one fused kernel): send to the next rank, receive
            // from the previous one (itself on one rank).
            if count > 0 {
                g.send_cuda(c, &b.send, (r + 1) % n, s).map_err(err)?;
                g.recv_cuda(c, &mut b.recv, (r + n - 1) % n, s)
                    .map_err(err)?;
            }
        } else if in_place {
            g.push_cuda_in_place(c, k.args, &mut b.recv, s)
                .map_err(err)?;
        } else {
            g.push_cuda(c, k.args, &b.send, &mut b.recv, s)
                .map_err(err)?;
        }
        g.end().map_err(err)?;
    }
    s.synchronize()
        .map_err(|e| format!("{what}: synchronize: {e}"))?;
    c.async_error().map_err(err)?;
    check(&what, s, &b, &k, n)
}

#[allow(clippy::too_many_arguments)] // one per dimension of the matrix
fn run_dt(
    c: &Communicator,
    s: &Arc<CudaStream>,
    dt: DataType,
    f: Func,
    op: RedOp,
    in_place: bool,
    count: usize,
    seed: u64,
) -> Result<(), String> {
    with_type!(dt, run_one(c, s, f, op, in_place, count, seed))
}

/// Every collective × type × op × in/out of place for `counts`, on rank `c` with stream `s`.
fn rank_matrix(c: &Communicator, s: &Arc<CudaStream>, counts: &[usize]) -> Result<(), String> {
    let mut seed = 1u64;
    for dt in DataType::ALL {
        for f in FUNCS {
            let ops = if f.reduces() {
                ops_for(dt)
            } else {
                vec![RedOp::Sum]
            };
            for op in ops {
                for in_place in [false, true] {
                    for &count in counts {
                        seed += 1;
                        run_dt(c, s, dt, f, op, in_place, count, seed)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Streams for `comms`, made before any rank launches: creating a stream waits for the
/// GPU's running kernels, which on a GPU shared by two ranks include the peer's.
fn streams_for(comms: &[Communicator]) -> Vec<Arc<CudaStream>> {
    comms
        .iter()
        .map(|c| stream(c.gpu_ordinal().expect("a GPU rank")))
        .collect()
}

/// [`rank_matrix`] on every rank of `comms` (ranks as threads).
fn matrix(comms: Vec<Communicator>, counts: &[usize]) {
    let streams = streams_for(&comms);
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = comms
            .into_iter()
            .zip(streams)
            .map(|(c, s)| sc.spawn(move || rank_matrix(&c, &s, counts)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    });
    common::all_ok(results);
}

/// Counts: empty, one element, primes, not multiples of nranks, several FIFO slots.
const COUNTS: [usize; 6] = [0, 1, 7, 1021, 65_537, 1_000_003];

/// The matrix on `n` GPU ranks as threads of this process.
fn threads_matrix(n: usize) {
    let Some(devs) = devices(n) else { return };
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    matrix(comms, &COUNTS);
}

#[test]
fn every_collective_on_one_gpu_rank() {
    threads_matrix(1);
}

#[test]
fn every_collective_on_two_gpu_ranks() {
    threads_matrix(2);
}

#[test]
fn every_collective_staged_through_host_memory() {
    let Some(devs) = devices(2) else { return };
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

/// One thread drives both ranks: each group holds one operation per rank (NCCL's
/// ncclCommInitAll usage), so nothing may block between the two launches.
#[test]
fn one_thread_drives_both_ranks_in_one_group() {
    let Some(devs) = devices(2) else { return };
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(60), &[])).expect("init");
    let streams: Vec<_> = comms
        .iter()
        .map(|c| stream(c.gpu_ordinal().unwrap()))
        .collect();
    let n = comms.len();
    for (seed, count) in [(3u64, 1usize), (4, 4099), (5, 3_000_017)] {
        let cases: Vec<Case<f32>> = (0..n)
            .map(|r| case(Func::AllReduce, RedOp::Sum, r, n, count, seed))
            .collect();
        let mut bufs: Vec<Bufs<f32>> = (0..n)
            .map(|r| prepare(&comms[r], &streams[r], &cases[r], false))
            .collect();
        {
            let mut g = rnccl::group_start();
            for ((c, b), s) in comms.iter().zip(bufs.iter_mut()).zip(&streams) {
                let a = cases[c.rank()].args;
                g.push_cuda(c, a, &b.send, &mut b.recv, s).expect("queue");
            }
            g.end().expect("group");
        }
        for r in 0..n {
            streams[r].synchronize().expect("sync");
            comms[r].async_error().expect("no async error");
            check("one-thread group", &streams[r], &bufs[r], &cases[r], n).expect("result");
        }
    }
}

/// 256 MiB per rank: many slots on every channel.
#[test]
fn large_collectives() {
    let Some(devs) = devices(2) else { return };
    let comms =
        Communicator::init_all_devices(&devs, config(Duration::from_secs(120), &[])).expect("init");
    let streams = streams_for(&comms);
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = comms
            .into_iter()
            .zip(streams)
            .map(|(c, s)| {
                sc.spawn(move || {
                    let count = (256 << 20) / 4 + 3;
                    for f in [
                        Func::AllReduce,
                        Func::AllGather,
                        Func::ReduceScatter,
                        Func::Broadcast,
                    ] {
                        let n = c.nranks();
                        let cnt = if f == Func::AllReduce || f == Func::Broadcast {
                            count
                        } else {
                            count / n
                        };
                        run_one::<f32>(&c, &s, f, RedOp::Sum, false, cnt, 77)?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    });
    common::all_ok(results);
}

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

/// What a child process of [`on_processes`] is asked to do.
const CHILD_ROLE: &str = "RNCCL_GPU_TEST_ROLE";

/// Runs this test binary's test `name` again as `n` child processes, rank `r` on GPU `devs[r]`
/// (the child sees `RNCCL_GPU_TEST_ROLE=<role>` and its rank in `RNCCL_GPU_TEST_RANK`), and
/// returns each child's output and whether it exited within `limit`.
fn on_processes(
    name: &str,
    role: &str,
    devs: &[usize],
    limit: Duration,
) -> Vec<(std::process::Output, bool)> {
    let port = common::procs::free_port();
    let exe = std::env::current_exe().expect("test binary");
    let children: Vec<_> = devs
        .iter()
        .enumerate()
        .map(|(r, d)| {
            std::process::Command::new(&exe)
                .args(["--exact", name, "--nocapture", "--test-threads=1"])
                .env(CHILD_ROLE, role)
                .env("RNCCL_GPU_TEST_RANK", r.to_string())
                .env("RNCCL_GPU_TEST_NRANKS", devs.len().to_string())
                .env("RNCCL_GPU_TEST_DEVICE", d.to_string())
                .env("NCCL_COMM_ID", format!("127.0.0.1:{port}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a rank process")
        })
        .collect();
    children
        .into_iter()
        .map(|c| common::procs::wait_for(c, limit))
        .collect()
}

/// In a child of [`on_processes`]: this process's communicator, if this process is one.
fn child_comm(role: &str, timeout: Duration) -> Option<Communicator> {
    if std::env::var(CHILD_ROLE).ok()? != role {
        return None;
    }
    let var = |k: &str| -> usize { std::env::var(k).unwrap().parse().unwrap() };
    let (r, n, d) = (
        var("RNCCL_GPU_TEST_RANK"),
        var("RNCCL_GPU_TEST_NRANKS"),
        var("RNCCL_GPU_TEST_DEVICE"),
    );
    let id = rnccl::UniqueId::from_comm_id(&std::env::var("NCCL_COMM_ID").unwrap()).unwrap();
    let knobs: &[(&str, &str)] = if role.ends_with("_shm") {
        &[("NCCL_P2P_DISABLE", "1")]
    } else {
        &[]
    };
    Some(Communicator::init_rank(n, &id, r, config(timeout, knobs).device(d)).expect("init"))
}

fn shm_names() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("rnccl"))
                .collect()
        })
        .unwrap_or_default()
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
    let Some(devs) = devices(2) else { return };
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
    assert_eq!(shm_names(), before, "left in /dev/shm");
}

/// One process per rank: FIFOs in GPU memory shared through CUDA IPC handles.
#[test]
fn every_collective_on_two_gpu_processes() {
    process_matrix(
        "every_collective_on_two_gpu_processes",
        "matrix",
        &[0, 1, 7, 1021, 65_537, 1_000_003],
    );
}

/// One process per rank with NCCL_P2P_DISABLE=1: FIFOs in shared host memory both processes
/// register with their driver (NCCL's SHM transport).
#[test]
fn every_collective_on_two_gpu_processes_through_host_memory() {
    process_matrix(
        "every_collective_on_two_gpu_processes_through_host_memory",
        "matrix_shm",
        &[0, 1, 1021, 65_537],
    );
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
