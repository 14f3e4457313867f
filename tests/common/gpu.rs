//! GPU test support: devices and streams for ranks, device buffers poisoned before every run,
//! one case of any collective checked against the sequential host reference of `common`, the
//! whole matrix on one rank, and ranks as child processes of the test binary.

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr};
use libtest_mimic::{Arguments, Completion, Trial};
use rnccl::config::{Config, Source};
use rnccl::{CollArgs, CommConfig, Communicator, DataType, Func, RedOp};

use super::{FUNCS, TElem, compare, input, ops_for, reduce_at};

/// A test element that can live on the GPU.
pub(crate) trait GElem: TElem + DeviceRepr {}
impl<T: TElem + DeviceRepr> GElem for T {}

/// The devices to put `n` ranks on (GPU `r % count` for rank `r`): in a [`gpu_test`], which
/// runs only where there is a GPU.
pub(crate) fn devices(n: usize) -> Vec<usize> {
    let g = rnccl::gpus().expect("a GPU test runs where there is a GPU (gpu_test)");
    (0..n).map(|r| r % g.len()).collect()
}

/// A test that needs a GPU, for the GPU tests' own harness (libtest-mimic): it runs where this
/// host has one; elsewhere it is reported as ignored with the reason in the summary a user
/// reads, or as failed under `RNCCL_REQUIRE_GPU=1` (perf/gpu_suite.sh sets it, so a device run
/// that found no GPU fails).
pub(crate) fn gpu_test(name: &'static str, f: fn()) -> Trial {
    gpus_test(name, 1, f)
}

/// A [`gpu_test`] that needs at least `want` GPUs: on a host with fewer (but some) it is
/// reported as ignored, naming how many it found.
pub(crate) fn gpus_test(name: &'static str, want: usize, f: fn()) -> Trial {
    Trial::ignorable_test(name, move || {
        match rnccl::gpus() {
            Err(e) if std::env::var("RNCCL_REQUIRE_GPU").as_deref() == Ok("1") => {
                return Err(
                    format!("RNCCL_REQUIRE_GPU=1 but this host has no usable GPU: {e}").into(),
                );
            }
            Err(e) => return Ok(Completion::ignored_with(format!("no GPU here ({e})"))),
            Ok(g) if g.len() < want => {
                return Ok(Completion::ignored_with(format!(
                    "needs {want} GPUs, this host has {}",
                    g.len()
                )));
            }
            Ok(_) => {}
        }
        f();
        Ok(Completion::Completed)
    })
}

/// A test of the GPU test binaries that needs no GPU.
pub(crate) fn host_test(name: &'static str, f: fn()) -> Trial {
    Trial::test(name, move || {
        f();
        Ok(())
    })
}

/// Runs `trials` with libtest's command line (filters, `--exact`, `--nocapture`,
/// `--ignored`…) and exits with its status.
///
/// The trials run one at a time unless `--test-threads` says otherwise: each trial's ranks
/// share the host's GPUs, and kernels of two trials' communicators on one GPU can each hold
/// the multiprocessors the other's peers need (every rank's blocks must be resident at once),
/// waiting until the communicators' deadline.
pub(crate) fn run_trials(trials: Vec<Trial>) -> ! {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(1);
    libtest_mimic::run(&args, trials).exit()
}

pub(crate) fn config(timeout: Duration, knobs: &[(&str, &str)]) -> CommConfig {
    let mut cfg = Config::defaults();
    for (k, v) in knobs {
        cfg.set(k, *v, Source::Program("test".into()));
    }
    CommConfig::with_knobs(Arc::new(cfg)).timeout(timeout)
}

/// A stream of `gpu`'s primary context.
pub(crate) fn stream(gpu: usize) -> Arc<CudaStream> {
    let ctx = CudaContext::new(gpu).expect("GPU context");
    ctx.new_stream().expect("stream")
}

/// `len` elements (at least one, so the allocation exists) poisoned with 0xA5 bytes.
pub(crate) fn poisoned<T: GElem>(s: &Arc<CudaStream>, len: usize) -> CudaSlice<T> {
    let host: Vec<T> = vec![poison(); len.max(1)];
    s.clone_htod(&host).expect("poisoned buffer")
}

pub(crate) fn poison<T: GElem>() -> T {
    let bytes = [0xa5u8; 16];
    // SAFETY: every element type here is a plain number of at most 16 bytes for which any bit
    // pattern is a valid value.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

pub(crate) fn upload<T: GElem>(s: &Arc<CudaStream>, v: &[T]) -> CudaSlice<T> {
    if v.is_empty() {
        return poisoned(s, 1);
    }
    s.clone_htod(v).expect("upload")
}

/// What this rank feeds `f` and what it must find afterwards (None: nothing to check).
pub(crate) struct Case<T> {
    pub(crate) args: CollArgs,
    pub(crate) input: Vec<T>,
    /// Expected output elements (value, magnitude for the float tolerance).
    pub(crate) want: Option<Vec<(T, f64)>>,
}

pub(crate) fn case<T: GElem>(
    f: Func,
    op: RedOp,
    r: usize,
    n: usize,
    count: usize,
    seed: u64,
) -> Case<T> {
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
pub(crate) struct Bufs<T: DeviceRepr> {
    pub(crate) send: CudaSlice<T>,
    pub(crate) recv: CudaSlice<T>,
    /// Where the output is inside `recv`, in elements.
    pub(crate) out: (usize, usize),
}

pub(crate) fn prepare<T: GElem>(
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

pub(crate) fn check<T: GElem>(
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
pub(crate) fn run_one<T: GElem>(
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
        } else {
            push_case(&mut g, c, &k, &mut b, s, in_place).map_err(err)?;
        }
        g.end().map_err(err)?;
    }
    s.synchronize()
        .map_err(|e| format!("{what}: synchronize: {e}"))?;
    c.async_error().map_err(err)?;
    check(&what, s, &b, &k, n)
}

/// Queues rank `c`'s collective of case `k` into `g`, on `b`'s buffers, in place or not.
pub(crate) fn push_case<'a, T: GElem>(
    g: &mut rnccl::Group<'a>,
    c: &'a Communicator,
    k: &Case<T>,
    b: &'a mut Bufs<T>,
    s: &'a Arc<CudaStream>,
    in_place: bool,
) -> Result<(), rnccl::Error> {
    match in_place {
        true => g.push_cuda_in_place(c, k.args, &mut b.recv, s),
        false => g.push_cuda(c, k.args, &b.send, &mut b.recv, s),
    }
    .map(|_| ())
}

#[allow(clippy::too_many_arguments)] // one per dimension of the matrix
pub(crate) fn run_dt(
    c: &Communicator,
    s: &Arc<CudaStream>,
    dt: DataType,
    f: Func,
    op: RedOp,
    in_place: bool,
    count: usize,
    seed: u64,
) -> Result<(), String> {
    crate::with_type!(dt, run_one(c, s, f, op, in_place, count, seed))
}

/// Every collective × type × op × in/out of place for `counts`, on rank `c` with stream `s`.
pub(crate) fn rank_matrix(
    c: &Communicator,
    s: &Arc<CudaStream>,
    counts: &[usize],
) -> Result<(), String> {
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
pub(crate) fn streams_for(comms: &[Communicator]) -> Vec<Arc<CudaStream>> {
    comms
        .iter()
        .map(|c| stream(c.gpu_ordinal().expect("a GPU rank")))
        .collect()
}

/// Runs `f` on every rank of `comms`, each in its own thread with its own stream (made before
/// any rank launches), and asserts that every rank succeeded.
pub(crate) fn on_gpu_threads<F>(comms: Vec<Communicator>, f: F)
where
    F: Fn(&Communicator, &Arc<CudaStream>) -> Result<(), String> + Sync,
{
    let streams = streams_for(&comms);
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let f = &f;
        let hs: Vec<_> = comms
            .into_iter()
            .zip(streams)
            .map(|(c, s)| sc.spawn(move || f(&c, &s)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    });
    super::all_ok(results);
}

/// [`rank_matrix`] on every rank of `comms` (ranks as threads).
pub(crate) fn matrix(comms: Vec<Communicator>, counts: &[usize]) {
    on_gpu_threads(comms, |c, s| rank_matrix(c, s, counts));
}

/// What a child process of [`on_processes`] is asked to do.
pub(crate) const CHILD_ROLE: &str = "RNCCL_GPU_TEST_ROLE";

/// Runs this test binary's test `name` again as `n` child processes, rank `r` on GPU `devs[r]`
/// (the child sees `RNCCL_GPU_TEST_ROLE=<role>` and its rank in `RNCCL_GPU_TEST_RANK`), and
/// returns each child's output and whether it exited within `limit`.
pub(crate) fn on_processes(
    name: &str,
    role: &str,
    devs: &[usize],
    limit: Duration,
) -> Vec<(std::process::Output, bool)> {
    let port = super::procs::free_port();
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
        .map(|c| super::procs::wait_for(c, limit))
        .collect()
}

/// In a child of [`on_processes`]: this process's communicator, if this process is one.
pub(crate) fn child_comm(role: &str, timeout: Duration) -> Option<Communicator> {
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

pub(crate) fn shm_names() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("rnccl") && !super::procs::is_stats_page(n))
                .collect()
        })
        .unwrap_or_default()
}

/// This process's communicator ranks, as its status service answers `rnccl status`.
pub(crate) fn my_status() -> Vec<rnccl::status::CommStatus> {
    let addr = rnccl::status::address().expect("the status service runs");
    rnccl::status::query(addr, Duration::from_secs(5))
        .expect("status")
        .comms
}
