//! `rnccl check`: multi-host health checks without MPI.
//!
//! Three ways in: started by a launcher (srun, mpirun, torchrun), every process is one rank of
//! the check ([`launched`]); given a host list, this command starts one worker per host through
//! a remote-start template such as ssh and coordinates them ([`coordinator`], the workers run
//! [`worker`]); with neither, it checks this host alone the same way. The measuring is the
//! library's ([`rnccl::check`]); this module renders the report ([`render`]) and decides the
//! exit status: 0 healthy, 1 something flagged or a host failed, 2 the check could not run
//! (bad flags, hostfile or configuration).

mod collect;
mod coordinator;
mod hosts;
mod launched;
mod plan;
mod protocol;
mod render;
mod rsh;
mod worker;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use rnccl::bench::parse_size;
use rnccl::check::{CheckReport, Pairing, Rails, Rule};

use crate::GlobalOpts;
use crate::output_file::write_whole;
use plan::Plan;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The bandwidth matrix and the findings.
    Text,
    /// The whole report as one JSON document.
    Json,
}

/// Arguments of `rnccl check`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Exit status: 0 every result healthy; 1 a result flagged or a host failed \
(unreachable, worker failed, timed out, wrong data); 2 the check could not run (bad flags, \
hostfile or configuration).\n\nA result is flagged when its busbw (GB/s = 1e9 B/s, largest size, \
mean of out-of-place and in-place) is below --below-median x the median of its kind (hosts alone; \
each rail's pairs), below --min-busbw (pairs) or --min-host-busbw (hosts alone), or when data \
arrived wrong.\n\nExamples:\n  \
rnccl check                                       this host alone (its GPUs, or 2 CPU ranks)\n  \
rnccl check --hosts gpu[01-16] --pairwise-quick   every host in one pair, over ssh\n  \
rnccl check --hostfile hosts --pairwise --min-busbw 40 --format json\n  \
srun -N 8 --ntasks-per-node=8 rnccl check --pairwise\n  \
rnccl check --hosts a,b,c --pairwise --rsh 'ip netns exec {host}'"
)]
pub struct Args {
    /// Hosts to check, comma-separated; Slurm hostlist expressions work (gpu[01-08,11]).
    #[arg(long, value_name = "LIST", conflicts_with = "hostfile")]
    pub hosts: Option<String>,
    /// File naming the hosts, one per line (# comments; "host slots=N" and "host:N" lines work).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// How to start a program on a host: a command template with {host}; the worker's command
    /// is appended.
    #[arg(long, value_name = "TEMPLATE", default_value = rsh::DEFAULT)]
    pub rsh: String,
    /// The rnccl executable on the hosts [default: this executable's path].
    #[arg(long, value_name = "PATH")]
    pub rnccl: Option<String>,
    /// Also measure every pair of hosts (n(n-1)/2 pairs, in n-1 rounds of disjoint pairs).
    #[arg(long, conflicts_with = "pairwise_quick")]
    pub pairwise: bool,
    /// Also measure one pair per host (host i with host i+n/2: one round).
    #[arg(long)]
    pub pairwise_quick: bool,
    /// NICs to measure pairs on: auto (one rail per NIC where hosts have several), none (the
    /// interface NCCL picks), or interface names (eth0,eth1).
    #[arg(long, value_name = "auto|none|LIST", default_value = "auto")]
    pub rails: String,
    /// Ranks per host, host-list mode [default: one per GPU, or 2 CPU ranks].
    #[arg(long, value_name = "N")]
    pub ranks_per_host: Option<usize>,
    /// CPU ranks on host memory even on hosts with GPUs.
    #[arg(long)]
    pub cpu: bool,
    /// all_reduce sizes per rank, comma-separated (K, M, G suffixes); the largest is judged.
    #[arg(
        short = 'b',
        long = "size",
        value_name = "SIZES",
        default_value = "64M"
    )]
    pub size: String,
    /// Timed iterations per size.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub iters: usize,
    /// Warm-up iterations per size.
    #[arg(short = 'w', long, default_value_t = 2)]
    pub warmup: usize,
    /// Data-check iterations per size (0: off).
    #[arg(short = 'c', long, default_value_t = 1)]
    pub check: usize,
    /// Seconds one measurement (a host alone, or a pair) may take; past it, it is stopped and
    /// flagged.
    #[arg(short = 'T', long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
    /// Seconds a host may take to start its worker (ssh included).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub connect_timeout: u64,
    /// Flag results below this fraction of their kind's median busbw (0: off).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.8)]
    pub below_median: f64,
    /// Flag pairs below this busbw, GB/s.
    #[arg(long, value_name = "GBPS")]
    pub min_busbw: Option<f64>,
    /// Flag hosts alone below this busbw, GB/s.
    #[arg(long, value_name = "GBPS")]
    pub min_host_busbw: Option<f64>,
    /// Output format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also write the JSON report to this file.
    #[arg(short = 'J', long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// Internal: run as a worker of a coordinating `rnccl check`, which starts it on each host.
    #[arg(long, hide = true)]
    pub worker: bool,
}

impl Args {
    /// The plan and the rule the flags ask for.
    ///
    /// Errors: a bad size list, rails value or threshold; zero iterations or timeout.
    fn plan(&self) -> anyhow::Result<(Plan, Rule)> {
        let mut sizes = Vec::new();
        for s in self.size.split(',') {
            let bytes = parse_size(s.trim())
                .map_err(|e| anyhow::anyhow!("-b/--size {:?}: {e}", self.size))?;
            if bytes == 0 {
                bail!(
                    "-b/--size {s:?}: a size of 0 bytes measures nothing; give bytes above 0, e.g. 64M"
                );
            }
            sizes.push(bytes);
        }
        if self.iters == 0 {
            bail!("-n/--iters 0 times nothing: give 1 or more");
        }
        if self.timeout == 0 || self.connect_timeout == 0 {
            bail!("-T/--timeout and --connect-timeout are seconds above 0");
        }
        let rails = match self.rails.trim() {
            "auto" => Rails::Auto,
            "none" => Rails::Default,
            list => {
                let names: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
                if names.iter().any(String::is_empty) {
                    bail!(
                        "--rails {list:?} has an empty name: give auto, none or interface names such as eth0,eth1"
                    );
                }
                Rails::Names(names)
            }
        };
        let pairing = if self.pairwise {
            Pairing::All
        } else if self.pairwise_quick {
            Pairing::Quick
        } else {
            Pairing::None
        };
        let rule = Rule {
            below_median: self.below_median,
            min_busbw: self.min_busbw,
            min_host_busbw: self.min_host_busbw,
        };
        rule.validate()?;
        Ok((
            Plan {
                sizes,
                warmup: self.warmup,
                iters: self.iters,
                check: self.check,
                pairing,
                rails,
                timeout_s: self.timeout,
            },
            rule,
        ))
    }
}

/// Runs `rnccl check`.
pub fn run(args: Args, global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if args.worker {
        return worker::run(global);
    }
    match prepare(&args, global) {
        Ok(mode) => mode.run(&args),
        Err(e) => {
            eprintln!("rnccl check: error: {e:#}");
            Ok(ExitCode::from(2))
        }
    }
}

/// How this check runs, once its flags are known to be good.
enum Mode {
    /// Every process one rank, started by a launcher.
    Launched(Box<launched::Launched>),
    /// Workers started on hosts (or on this host alone).
    Hosts(Box<coordinator::Fanout>),
}

impl Mode {
    fn run(self, args: &Args) -> anyhow::Result<ExitCode> {
        match self {
            Mode::Launched(l) => l.run(args),
            Mode::Hosts(f) => finish(&f.run(), args),
        }
    }
}

/// Checks the flags and the configuration, and picks the mode.
///
/// Errors: anything that stops the check from running (exit status 2).
fn prepare(args: &Args, global: &GlobalOpts) -> anyhow::Result<Mode> {
    let knobs = crate::config_load::load_config(global)?;
    knobs.validate()?;
    let (plan, rule) = args.plan()?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let listed = args.hosts.is_some() || args.hostfile.is_some();
    if !listed && let Some(l) = rnccl::launch::detect(&env)? {
        if args.ranks_per_host.is_some() {
            bail!(
                "--ranks-per-host is for host lists: {} started {} process{}, one rank each; start as many per host as you want ranks (e.g. srun --ntasks-per-node=8)",
                l.launcher,
                l.size,
                if l.size == 1 { "" } else { "es" }
            );
        }
        return Ok(Mode::Launched(Box::new(launched::Launched::new(
            l, plan, rule, knobs, args.cpu,
        )?)));
    }
    let hosts = match (&args.hosts, &args.hostfile) {
        (Some(list), _) => hosts::parse_list(list)?,
        (None, Some(file)) => hosts::read_file(file)?,
        (None, None) => vec![short_hostname()],
    };
    if args.ranks_per_host == Some(0) {
        bail!("--ranks-per-host 0: a host needs at least one rank");
    }
    if args.ranks_per_host == Some(1) && plan.pairing == Pairing::None {
        bail!(
            "--ranks-per-host 1 without --pairwise or --pairwise-quick measures nothing: a host alone needs 2 ranks or more"
        );
    }
    let rsh = listed.then(|| rsh::Rsh::parse(&args.rsh)).transpose()?;
    Ok(Mode::Hosts(Box::new(coordinator::Fanout::new(
        hosts,
        rsh,
        args,
        plan,
        rule,
        &knobs,
        Duration::from_secs(args.connect_timeout),
    )?)))
}

/// Prints the report as asked, writes the JSON file, and gives the exit status.
///
/// Errors: writing standard output or the file.
fn finish(report: &CheckReport, args: &Args) -> anyhow::Result<ExitCode> {
    let json = serde_json::to_string_pretty(report)? + "\n";
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => out.write_all(json.as_bytes())?,
        Format::Text => out.write_all(render::text(report).as_bytes())?,
    }
    out.flush()?;
    if let Some(path) = &args.output_file {
        write_whole(path, json.as_bytes())
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    let measured = !report.alone.is_empty() || report.rails.iter().any(|r| !r.pairs.is_empty());
    if !measured && report.problems.is_empty() {
        eprintln!(
            "rnccl check: nothing was measured: every host has one rank and no --pairwise or --pairwise-quick was given"
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::from(report.exit_code))
}

/// This host's name up to the first `.`.
fn short_hostname() -> String {
    let full = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    full.split('.').next().unwrap_or("localhost").to_string()
}
