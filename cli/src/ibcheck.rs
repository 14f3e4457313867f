//! `rnccl ibcheck`: NVIDIA's InfiniBand/RoCE troubleshooting recipe in one command — every
//! adapter and port with its state, rate, GIDs and counters, where it sits against the GPUs,
//! the knobs that consume these facts, and verdicts with fixes; optionally RDMA write bandwidth
//! and latency between two local ports or against `rnccl ibcheck --serve` on another host.

mod perf_args;
mod text;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use rnccl::config::syntax::DeviceFilter;
use rnccl::ib::Provider;
use rnccl::ib::params::IbParams;
use rnccl::ibcheck::{self as check, Options};
use serde::Serialize;

use crate::GlobalOpts;
use crate::output;

/// Output formats of `rnccl ibcheck`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables and verdicts for people.
    Text,
    /// Everything as JSON: what was read, each check with its evidence, the test results.
    Json,
}

const AFTER_HELP: &str = "\
Exit status: 0 when no check failed, 1 when a check warns and --strict is given,
2 when a check finds an error. A host without RDMA adapters prints one line and
exits 0. A check that cannot run (a bad --interval, a --sysfs-root that is not
a captured tree, --bw where no adapter is) says why on standard error and exits
2, as the argument parser does: nothing measured is never a healthy host.

Counters are totals until --interval N reads them a second time N seconds
later; then what grew, and the data rates, are judged.";

/// Arguments of `rnccl ibcheck`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Exit with 1 when a check warns (errors always give 2).
    #[arg(long)]
    pub strict: bool,
    /// Examine only these ports, in NCCL_IB_HCA syntax (`mlx5_0`, `=mlx5_1:1`, `^mlx5_4`).
    #[arg(long, value_name = "FILTER")]
    pub hca: Option<String>,
    /// Read sysfs and procfs under DIR instead of / (a captured tree; libibverbs is not asked).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// Read the counters again after this many seconds and judge what grew.
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// The rate every port should run at, Gb/s (slower ports are errors).
    #[arg(long, value_name = "GBPS")]
    pub expect_rate: Option<f64>,
    #[command(flatten)]
    pub perf: perf_args::PerfArgs,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    #[serde(flatten)]
    report: &'a check::Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    bandwidth: Option<&'a rnccl::ibcheck::perf::PerfReport>,
    exit_status: u8,
}

/// Runs `rnccl ibcheck`; a check that cannot run exits 2 with the reason on standard error.
///
/// Errors: none of its own (they become exit status 2); a closed output pipe.
pub fn run(args: Args, global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    output::could_not_run(examine(&args, global))
}

/// Reads the adapters, judges them, runs the tests asked for and prints the report.
///
/// Errors: bad options or knobs, a `--sysfs-root` that is not a captured tree, `--bw` with
/// nothing to measure.
fn examine(args: &Args, global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let cfg = crate::config_load::load_config(global)?;
    if args.perf.serve {
        return perf_args::serve(&args.perf, &cfg);
    }
    let filter = args
        .hca
        .as_deref()
        .map(DeviceFilter::parse)
        .transpose()
        .map_err(|hint| anyhow::anyhow!("--hca {:?}: {hint}", args.hca.as_deref().unwrap_or("")))?;
    let interval = match args.interval {
        Some(s) if !(s > 0.0 && s <= 3600.0) => {
            anyhow::bail!("--interval {s}: give a number of seconds above 0 and at most 3600")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let root = args
        .sysfs_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/"));
    let live = args.sysfs_root.is_none();
    if !live && !root.join("sys").is_dir() {
        anyhow::bail!(
            "--sysfs-root {}: {}; give the folder a capture made (it holds sys/ and proc/), or drop the flag to read this host",
            root.display(),
            if root.is_dir() {
                "has no sys/ folder, so it is not a captured tree"
            } else {
                "no such folder"
            }
        );
    }
    let params = IbParams::from_config(&cfg)?;
    let before_wait = |d: Duration| {
        eprintln!(
            "rnccl ibcheck: reading the counters again in {:.1} s",
            d.as_secs_f64()
        )
    };
    let opts = Options {
        root: &root,
        filter: filter.as_ref(),
        interval,
        expect_gbps: args.expect_rate,
        verbs: live.then(|| Provider::load(params.verbs_lib.as_deref())),
        before_wait: &before_wait,
    };
    let report = check::run(&cfg, &opts)
        .with_context(|| format!("checking the RDMA adapters under {}", root.display()))?;
    if report.no_devices() && args.perf.bw {
        anyhow::bail!(
            "--bw: no RDMA devices ({} lists none), so there is nothing to measure; run it on a host with InfiniBand/RoCE adapters",
            root.join("sys/class/infiniband").display()
        );
    }
    if report.no_devices() {
        let line = format!(
            "rnccl ibcheck: no RDMA devices ({} lists none): nothing to check; NCCL uses TCP sockets between hosts here",
            root.join("sys/class/infiniband").display()
        );
        match args.format {
            Format::Text => output::print_lines(&[line])?,
            Format::Json => output::print(
                &(serde_json::to_string_pretty(&serde_json::json!({
                    "source": report.source,
                    "rdma_devices": 0,
                    "message": line,
                    "exit_status": 0,
                }))? + "\n"),
            )?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let perf = if args.perf.bw {
        Some(perf_args::run_bw(&args.perf, &cfg, &report, live)?)
    } else {
        None
    };
    let mut code = report.exit_code(args.strict);
    if let Some(p) = &perf {
        code = code.max(p.exit_code(args.strict));
    }
    match args.format {
        Format::Text => output::print_lines(&text::lines(&report, perf.as_ref()))?,
        Format::Json => output::print(
            &(serde_json::to_string_pretty(&JsonOut {
                report: &report,
                bandwidth: perf.as_ref(),
                exit_status: code,
            })? + "\n"),
        )?,
    }
    Ok(ExitCode::from(code))
}
