//! `rnccl bench`: nccl-tests for rnccl, without MPI.
//!
//! Ranks run on the GPUs of a host that has them (one per GPU by default), or on CPUs with
//! host buffers (`--cpu`, or no GPU here: said in one line). Three ways to get processes:
//! started by a launcher (mpirun, srun, torchrun), each process is one; otherwise one process
//! per `-t × -g` of the `--ranks` local ranks (this command re-runs itself as the children and
//! serves the rendezvous), or all of them in this process with `--threads`. Each process runs
//! `-t` threads, each driving `-g` ranks (nccl-tests' model; see [`shape`]).

mod args;
pub(crate) mod backend;
mod bind;
mod failures;
mod json;
mod limits;
mod memory;
mod report;
mod shape;
mod signals;
mod spawn;

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use args::Args;
use args::{Bind, Format};
use backend::{Backend, Choice};
use rnccl::bench::{BenchOptions, BenchRow, gather_places, run_ranks};
use rnccl::config::{Config, Source};
use rnccl::{CommConfig, Communicator, UniqueId};
use serde_json::json;
use shape::Shape;
pub use spawn::report_to_launcher;

use crate::GlobalOpts;
use crate::output_file::write_whole;

/// Runs `rnccl bench`.
pub fn run(args: Args, global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let mut knobs = crate::config_load::load_config(global)?;
    if let Some(t) = args.timeout.filter(|&t| t > 0) {
        knobs.set(
            "RNCCL_TIMEOUT",
            t.to_string(),
            Source::Program("rnccl bench -T".into()),
        );
    }
    // Refuse bad knob values before starting any rank (each rank's init checks them again).
    knobs.validate()?;

    let knobs = Arc::new(knobs);
    let opts = args.options()?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    if let Some(child) = spawn::ChildEnv::from_env(&env)? {
        let backend = if child.gpu {
            let gpus = rnccl::gpus().map_err(|e| {
                anyhow::anyhow!(
                    "process {} cannot use the GPUs its parent saw: {e}",
                    child.proc
                )
            })?;
            Backend::Gpu(gpus.len())
        } else {
            Backend::Cpu
        };
        let job = Job {
            shape: Shape::launched(child.nprocs, args.nthreads, args.ngpus)?,
            proc: child.proc,
            local: child.proc,
            backend,
            id: child.id,
            bind: args.bind == Bind::Core,
        };
        return run_process(&job, &args, &opts, &knobs);
    }
    // Outputs are written after the whole run, by rank 0's process: find an unwritable one
    // now. (Ranks this command spawned, above, leave it to their launcher, which checked.)
    let check_outputs = || -> anyhow::Result<()> {
        for (path, flag) in [
            (&args.output_file, "-J/--output_file"),
            (&args.plot, "--plot"),
        ] {
            if let Some(p) = path {
                crate::output_file::check_writable(p, flag)?;
            }
        }
        Ok(())
    };
    if let Some(l) = rnccl::launch::detect(&env)? {
        if l.rank == 0 {
            check_outputs()?;
        }
        if args.ranks.is_some() || args.threads {
            anyhow::bail!(
                "--ranks/--threads conflict with the launcher: {} started {} processes; drop those \
                 flags (-t and -g set the ranks per process)",
                l.launcher,
                l.size
            );
        }
        let id = l.unique_id(&knobs)?;
        let choice = Choice::new(args.cpu, rnccl::gpus);
        choice.check_flags(&args)?;
        if let Some(line) = choice.notice().filter(|_| l.rank == 0) {
            eprintln!("{line}");
        }
        let job = Job {
            shape: Shape::launched(l.size, args.nthreads, args.ngpus)?,
            proc: l.rank,
            local: l.local_rank.unwrap_or(l.rank),
            backend: choice.backend,
            id,
            bind: false,
        };
        return run_process(&job, &args, &opts, &knobs);
    }
    check_outputs()?;
    let choice = Choice::new(args.cpu, rnccl::gpus);
    choice.check_flags(&args)?;
    let default_ranks = match choice.backend {
        Backend::Gpu(n) => n,
        Backend::Cpu => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2),
    };
    let shape = Shape::local(
        args.ranks,
        default_ranks,
        args.nthreads,
        args.ngpus,
        args.threads,
    )?;
    if let Some(line) = choice.notice() {
        eprintln!("{line}");
    }
    limits::HostLimits::read().check(&shape, args.threads)?;
    if choice.backend == Backend::Cpu
        && let Some(available) = memory::available()
    {
        memory::check_host(&opts, shape.nranks(), shape.nranks(), available)?;
    }
    let id = UniqueId::with_config(&knobs)?;
    if args.threads {
        let job = Job {
            shape,
            proc: 0,
            local: 0,
            backend: choice.backend,
            id,
            bind: args.bind == Bind::Core,
        };
        return run_process(&job, &args, &opts, &knobs);
    }
    let gpu = matches!(choice.backend, Backend::Gpu(_));
    spawn::run_children(shape.procs, &id, gpu, &knobs, |p| {
        shape.rank(p, 0, 0)..shape.rank(p + 1, 0, 0)
    })
}

/// This process's part of a job.
struct Job {
    /// The job's layout.
    shape: Shape,
    /// This process's index in the job.
    proc: usize,
    /// Its index among the job's processes on this host (which GPUs it takes).
    local: usize,
    /// GPU or CPU ranks.
    backend: Backend,
    /// The communicator to join.
    id: UniqueId,
    /// Pin each thread to its own CPU (`--bind core`, for jobs started here).
    bind: bool,
}

/// Runs this process's threads, each with its ranks, and reports every failing thread.
fn run_process(
    job: &Job,
    args: &Args,
    opts: &BenchOptions,
    knobs: &Arc<Config>,
) -> anyhow::Result<ExitCode> {
    signals::exit_on_signal()?;
    let results: Vec<(Range<usize>, anyhow::Result<ExitCode>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..job.shape.threads)
            .map(|t| {
                let ranks = job.shape.thread_ranks(job.proc, t);
                (
                    ranks,
                    s.spawn(move || run_thread(job, t, args, opts, knobs)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(label, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a rank thread panicked")));
                (label, r)
            })
            .collect()
    });
    // The ranks are done: whatever a failure path left in /dev/shm goes now, even when the
    // launcher that would sweep it is gone.
    rnccl::remove_own_files_for_exit();
    // Every failing thread has its own view of what went wrong: report them all.
    let mut code = ExitCode::SUCCESS;
    let mut errors = Vec::new();
    for (t, (ranks, res)) in results.into_iter().enumerate() {
        match res {
            Ok(c) if t == 0 => code = c,
            Ok(_) => {}
            // The reader of the table went away: end quietly (main knows this error).
            Err(e) if crate::output::is_broken_pipe(&e) => return Err(e),
            Err(e) => errors.push((ranks, format!("{e:#}"))),
        }
    }
    if errors.is_empty() {
        Ok(code)
    } else {
        Err(spawn::RankErrors(errors).into())
    }
}

/// Thread `t` of the process: pins itself, joins its ranks and runs the benchmark on them.
fn run_thread(
    job: &Job,
    t: usize,
    args: &Args,
    opts: &BenchOptions,
    knobs: &Arc<Config>,
) -> anyhow::Result<ExitCode> {
    let s = job.shape;
    if job.bind {
        bind::bind_local_rank(job.local * s.threads + t, s.procs * s.threads)?;
    }
    check_roots(opts, s.nranks())?;
    let comms = join_ranks(job, t, knobs)?;
    bench_thread(&comms, args, opts.clone(), knobs, s)
}

/// Refuses a `-r/--root` that is not one of the job's `n` ranks, before this thread joins the
/// communicator: every rank refuses it alike, none waits for a rank that already gave up.
fn check_roots(opts: &BenchOptions, n: usize) -> anyhow::Result<()> {
    match opts.roots.iter().find(|&&r| r >= n) {
        Some(r) if opts.coll.rooted() => anyhow::bail!(
            "-r/--root {r} is not a rank (this run has {n} ranks, 0..{})",
            n - 1
        ),
        _ => Ok(()),
    }
}

/// Joins the `-g` ranks of thread `t` to the job's communicator, on their GPUs for GPU ranks;
/// all at once, since each join waits for every rank.
fn join_ranks(job: &Job, t: usize, knobs: &Arc<Config>) -> rnccl::Result<Vec<Communicator>> {
    let n = job.shape.nranks();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..job.shape.gpus)
            .map(|g| {
                let rank = job.shape.rank(job.proc, t, g);
                let mut config = CommConfig::with_knobs(knobs.clone());
                if let Backend::Gpu(ngpus) = job.backend {
                    config = config.device(job.shape.device(job.local, t, g, ngpus));
                }
                s.spawn(move || Communicator::init_rank(n, &job.id, rank, config))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(rnccl::Error::Internal(
                        "a rank's init thread panicked".into(),
                    ))
                })
            })
            .collect()
    })
}

/// Runs the benchmark on this thread's ranks; the thread that drives rank 0 prints.
fn bench_thread(
    comms: &[Communicator],
    args: &Args,
    mut opts: BenchOptions,
    knobs: &Config,
    shape: Shape,
) -> anyhow::Result<ExitCode> {
    let n = shape.nranks();
    if opts.roots.is_empty() {
        opts.roots = (0..n).collect();
    }
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let places = gather_places(comms)?;
    let devices: Vec<String> = places.iter().map(report::place_line).collect();
    let lead_comm = comms.iter().find(|c| c.rank() == 0);
    let test = opts.coll.test_name();
    let text = args.format == Format::Text;
    let (min_bytes, max_bytes) = args.byte_range();
    let params = format!(
        "# nThread {} nGpus {} minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg iters: {} validation: {} graph: {} unalign: 0",
        shape.threads,
        shape.gpus,
        min_bytes,
        max_bytes,
        args.step_label(),
        opts.warmup,
        opts.iters,
        opts.agg,
        u8::from(opts.check > 0),
        opts.graph_launches
    );
    // Only the thread of rank 0 prints; threads share one stdout, so never hold its lock.
    let lead = lead_comm.is_some();
    let mut out = std::io::stdout();
    if lead && text {
        let transports = report::transport_lines(&places);
        write!(
            out,
            "{}",
            report::header(&test, &params, &devices, &transports)
        )?;
        out.flush()?;
    }
    let total = opts.sizes.len()
        * opts.dtypes.len()
        * if opts.coll.reduces() {
            opts.ops.len()
        } else {
            1
        }
        * if opts.coll.rooted() {
            opts.roots.len()
        } else {
            1
        };
    let bar = if lead {
        indicatif::ProgressBar::new(total as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} points, {elapsed}",
        )
        .expect("template"),
    );
    bar.set_message(test.clone());
    let rows = run_ranks(comms, &opts, |r: &BenchRow| {
        if lead && text {
            bar.suspend(|| {
                let _ = writeln!(out, "{}", report::row(r));
                let _ = out.flush();
            });
        }
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let Some(comm) = lead_comm else {
        return Ok(ExitCode::SUCCESS);
    };
    let (wrong, avg_bw) = report::summary(&rows);
    let min_bw = knobs.float("NCCL_TESTS_MIN_BW")?;
    if text {
        write!(out, "{}", report::footer(&test, wrong, avg_bw, min_bw))?;
    }
    if !text || args.output_file.is_some() {
        let doc = json::render(&json::Doc {
            argv: std::env::args().collect(),
            start,
            config: json!({
                "nthreads": shape.threads, "ngpus": shape.gpus,
                "minimum_bytes": opts.sizes.first(), "maximum_bytes": opts.sizes.last(),
                "step": args.step_label(),
                "warmup_iters": opts.warmup, "iterations": opts.iters, "aggregated_iterations": opts.agg,
                "validation": opts.check, "graph": opts.graph_launches, "average": format!("{:?}", opts.average),
            }),
            devices: places
                .iter()
                .zip(&devices)
                .map(|(p, line)| json::device(p, line))
                .collect(),
            rows: &rows,
            test: test.clone(),
            wrong,
            avg_bw,
            min_bw,
            comm: json!({ "nranks": n, "nchannels": comm.nchannels(), "slot_bytes": comm.slot_bytes(), "rings": comm.rings() }),
            traffic: comm.traffic(),
        });
        let body = serde_json::to_string_pretty(&doc)?;
        if !text {
            writeln!(out, "{body}")?;
        }
        if let Some(path) = &args.output_file {
            write_whole(path, (body + "\n").as_bytes())
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            if text {
                writeln!(out, "# Writing JSON output to {}", path.display())?;
            }
        }
    }
    if let Some(path) = &args.plot {
        crate::plot::write_bench_plot(path, args.plot_size, &rows, &test, n, &places)?;
        if text {
            writeln!(out, "# Writing plot to {}", path.display())?;
        }
    }
    out.flush()?;
    let failed = wrong > 0 || min_bw.is_some_and(|m| avg_bw < 0.9 * m);
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
