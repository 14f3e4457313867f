//! `rnccl bench`: nccl-tests for rnccl, without MPI.
//!
//! Three ways to get ranks: started by a launcher (mpirun, srun, torchrun), each process is one
//! rank; otherwise `--ranks N` local ranks, one process each (this command re-runs itself as the
//! children and serves the rendezvous), or threads of this process with `--threads`.

mod args;
mod bind;
mod json;
mod report;
mod spawn;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use args::Args;
use args::{Bind, Format};
use rnccl::bench::{BenchOptions, BenchRow, run_rank};
use rnccl::config::{Config, Source};
use rnccl::{CommConfig, Communicator, UniqueId};
use serde_json::json;

use crate::GlobalOpts;

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
    let config = CommConfig::with_knobs(knobs.clone());
    if let Some(child) = spawn::ChildEnv::from_env(&env)? {
        if args.bind == Bind::Core {
            bind::bind_local_rank(child.rank, child.nranks)?;
        }
        let comm = Communicator::init_rank(child.nranks, &child.id, child.rank, config)?;
        return bench_rank(&comm, &args, opts, &knobs);
    }
    if let Some(l) = rnccl::launch::detect(&env)? {
        if args.ranks.is_some() || args.threads {
            anyhow::bail!(
                "--ranks/--threads conflict with the launcher: {} started {} ranks; drop those flags",
                l.launcher,
                l.size
            );
        }
        let Some(root) = l.root else {
            anyhow::bail!(
                "{} started {} ranks on several hosts but gave no rendezvous address: set NCCL_COMM_ID=<rank 0's host>:<free port> \
                 (or MASTER_ADDR and MASTER_PORT) for every rank",
                l.launcher,
                l.size
            );
        };
        let id = UniqueId::from_comm_id(&root)?;
        let comm = Communicator::init_rank(l.size, &id, l.rank, config)?;
        return bench_rank(&comm, &args, opts, &knobs);
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let nranks = args.ranks.unwrap_or(cores.max(2));
    if nranks == 0 {
        anyhow::bail!("--ranks must be at least 1");
    }
    if args.threads {
        return run_threads(nranks, &args, opts, knobs);
    }
    let id = UniqueId::with_config(&knobs)?;
    spawn::run_children(nranks, &id, &knobs)
}

fn run_threads(
    nranks: usize,
    args: &Args,
    opts: BenchOptions,
    knobs: Arc<Config>,
) -> anyhow::Result<ExitCode> {
    let comms = Communicator::init_all_with(nranks, CommConfig::with_knobs(knobs.clone()))?;
    let results: Vec<anyhow::Result<ExitCode>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|c| {
                let (opts, knobs) = (opts.clone(), knobs.clone());
                s.spawn(move || {
                    if args.bind == Bind::Core {
                        bind::bind_local_rank(c.rank(), nranks)?;
                    }
                    bench_rank(&c, args, opts, &knobs)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a rank thread panicked")))
            })
            .collect()
    });
    // Every failing rank has its own view of what went wrong: report them all.
    let mut code = ExitCode::SUCCESS;
    let mut errors = Vec::new();
    for (r, res) in results.into_iter().enumerate() {
        match res {
            Ok(c) if r == 0 => code = c,
            Ok(_) => {}
            // The reader of the table went away: end quietly (main knows this error).
            Err(e) if crate::output::is_broken_pipe(&e) => return Err(e),
            Err(e) => errors.push(format!("rank {r}: {e:#}")),
        }
    }
    match errors.len() {
        0 => Ok(code),
        1 => Err(anyhow::anyhow!("{}", errors[0])),
        _ => Err(anyhow::anyhow!(
            "{} ranks failed:\n  {}",
            errors.len(),
            errors.join("\n  ")
        )),
    }
}

/// Every rank's device line, gathered at rank 0 (others get an empty list).
fn device_lines(comm: &Communicator) -> anyhow::Result<Vec<String>> {
    const LINE: usize = 256;
    let host = rnccl::config::host::short_hostname();
    let line = report::device_line(
        comm.rank(),
        std::process::id(),
        &host,
        comm.rank(),
        "cpu",
        &format!(
            "{} (host memory)",
            rnccl::topo::detect::cpu::this_host()
                .model_name
                .as_deref()
                .unwrap_or("CPU")
        ),
    );
    let mut mine = [0u8; LINE];
    let b = line.as_bytes();
    mine[..b.len().min(LINE)].copy_from_slice(&b[..b.len().min(LINE)]);
    let mut all = vec![0u8; LINE * comm.nranks()];
    comm.gather(&mine, if comm.rank() == 0 { &mut all } else { &mut [] }, 0)?;
    Ok(all
        .chunks(LINE)
        .filter(|_| comm.rank() == 0)
        .map(|c| {
            String::from_utf8_lossy(c)
                .trim_end_matches('\0')
                .to_string()
        })
        .collect())
}

fn bench_rank(
    comm: &Communicator,
    args: &Args,
    mut opts: BenchOptions,
    knobs: &Config,
) -> anyhow::Result<ExitCode> {
    let n = comm.nranks();
    if opts.roots.is_empty() {
        opts.roots = (0..n).collect();
    }
    if let Some(r) = opts
        .roots
        .iter()
        .find(|&&r| r >= n)
        .filter(|_| opts.coll.rooted())
    {
        anyhow::bail!(
            "-r/--root {r} is not a rank (this run has {n} ranks, 0..{})",
            n - 1
        );
    }
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let devices = device_lines(comm)?;
    let lead = comm.rank() == 0;
    let test = opts.coll.test_name();
    let text = args.format == Format::Text;
    let (min_bytes, max_bytes) = args.byte_range();
    let params = format!(
        "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg iters: {} validation: {} graph: 0 unalign: 0",
        min_bytes,
        max_bytes,
        args.step_label(),
        opts.warmup,
        opts.iters,
        opts.agg,
        u8::from(opts.check > 0)
    );
    // Only the lead rank prints; ranks as threads share one stdout, so never hold its lock.
    let mut out = std::io::stdout();
    if lead && text {
        write!(out, "{}", report::header(&test, &params, &devices))?;
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
    let rows = run_rank(comm, &opts, |r: &BenchRow| {
        if lead && text {
            bar.suspend(|| {
                let _ = writeln!(out, "{}", report::row(r));
                let _ = out.flush();
            });
        }
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    if !lead {
        return Ok(ExitCode::SUCCESS);
    }
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
                "nthreads": 1, "ngpus": 1,
                "minimum_bytes": opts.sizes.first(), "maximum_bytes": opts.sizes.last(),
                "step": args.step_label(),
                "warmup_iters": opts.warmup, "iterations": opts.iters, "aggregated_iterations": opts.agg,
                "validation": opts.check, "graph": 0, "average": format!("{:?}", opts.average),
            }),
            devices: devices.iter().map(|d| json!({ "line": d })).collect(),
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
            std::fs::write(path, body + "\n")
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            if text {
                writeln!(out, "# Writing JSON output to {}", path.display())?;
            }
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
