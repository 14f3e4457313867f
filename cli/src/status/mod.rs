//! `rnccl status` (ncclras's role): connects to a running job — through the status address of
//! any of its ranks (`HOST:PORT`, printed at NCCL_DEBUG=INFO as "Status: answering on …"), or
//! to the jobs of this host found from their counter pages — asks every rank of every
//! communicator, on every host, and prints per communicator its ranks and hosts, how far each
//! got, mismatches, ranks stuck and on what, ranks that did not answer and the slowest links.
//! It only reads: the job runs on undisturbed.

mod view;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use rnccl::status::{CommDiagnosis, diagnose, job};

use crate::GlobalOpts;

/// Output formats of `rnccl status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table per communicator and what is wrong, in sentences.
    Text,
    /// Every communicator's diagnosis as JSON.
    Json,
}

/// Options of `rnccl status`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 when every rank answered, all are at the same operation \
and none has been in one longer than --stuck seconds; 1 when something is wrong; 2 when no job \
was found or the command failed."
)]
pub struct Args {
    /// Status address of any rank of the job (HOST:PORT); several allowed. Without one, the
    /// jobs of this host are found from their counter pages (and through them every host).
    #[arg(value_name = "ADDR")]
    pub addrs: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Ask again every SECS seconds until interrupted, printing each answer.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2")]
    pub watch: Option<f64>,
    /// Seconds each process gets to answer before it is reported as not answering.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub timeout: f64,
    /// Seconds an operation may be in flight before its rank counts as stuck.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub stuck: f64,
    /// Folder holding the counter pages (for finding this host's jobs).
    #[arg(long, value_name = "DIR", default_value = rnccl::stats::page::PAGE_DIR)]
    pub pages: PathBuf,
}

/// Runs `rnccl status`: exit status 0 healthy, 1 something wrong, 2 (with the reason on
/// standard error) when no job answered or the command failed.
///
/// Errors: none of its own (they become exit status 2); a closed output pipe.
pub fn run(args: Args, _global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    crate::output::could_not_run(ask(&args))
}

/// Asks the job (once, or every `--watch` seconds) and prints the answers.
///
/// Errors: a malformed address or option; no job found or none answered.
fn ask(args: &Args) -> anyhow::Result<ExitCode> {
    for (what, v) in [("--timeout", args.timeout), ("--stuck", args.stuck)]
        .into_iter()
        .chain(args.watch.map(|w| ("--watch", w)))
    {
        if !(v.is_finite() && v > 0.0) {
            bail!("{what} {v} is not a positive number of seconds");
        }
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    loop {
        let start = start_addrs(args)?;
        let diagnoses = diagnose(&job(&start, timeout), args.stuck);
        if diagnoses.is_empty() {
            bail!(
                "no communicator answered at {}: the job ended, or its processes run with \
                 RNCCL_STATS=0",
                list(&start)
            );
        }
        let troubled = diagnoses.iter().any(CommDiagnosis::troubled);
        let text = match args.format {
            Format::Text => view::text(&diagnoses, args.stuck, unix_now_ns()),
            Format::Json => format!("{}\n", serde_json::to_string_pretty(&json(&diagnoses))?),
        };
        if args.watch.is_some() && args.format == Format::Text {
            crate::output::print("\x1b[2J\x1b[H")?;
        }
        crate::output::print(&text)?;
        match args.watch {
            Some(secs) => std::thread::sleep(Duration::from_secs_f64(secs)),
            None => {
                return Ok(if troubled {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                });
            }
        }
    }
}

/// The addresses to start from: those given, else the status services on this host's pages.
fn start_addrs(args: &Args) -> anyhow::Result<Vec<SocketAddr>> {
    if !args.addrs.is_empty() {
        return args
            .addrs
            .iter()
            .map(|a| {
                use std::net::ToSocketAddrs;
                a.to_socket_addrs()
                    .ok()
                    .and_then(|mut i| i.next())
                    .with_context(|| {
                        format!(
                            "'{a}' is not an address: give a rank's status address as HOST:PORT"
                        )
                    })
            })
            .collect();
    }
    let found = rnccl::stats::page::discover(&args.pages, false)
        .with_context(|| format!("cannot list the counter pages in {}", args.pages.display()))?;
    let addrs: Vec<SocketAddr> = found
        .iter()
        .filter(|f| !f.stale)
        .filter_map(|f| f.page.as_ref().ok()?.status)
        .collect();
    if addrs.is_empty() {
        bail!(
            "no rnccl job runs on this host (no live counter page with a status address in {}): \
             give a rank's status address, HOST:PORT, as NCCL_DEBUG=INFO prints it (\"Status: \
             answering on …\")",
            args.pages.display()
        );
    }
    Ok(addrs)
}

fn list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Now, ns since the Unix epoch.
fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The JSON document: each communicator's diagnosis with its findings in words.
fn json(diagnoses: &[CommDiagnosis]) -> serde_json::Value {
    let now = unix_now_ns();
    serde_json::Value::Array(
        diagnoses
            .iter()
            .map(|d| {
                let mut v = serde_json::to_value(d).unwrap_or_default();
                v["comm_id"] = format!("{:016x}", d.comm_id).into();
                v["findings"] = d.findings(now).into();
                v
            })
            .collect(),
    )
}
