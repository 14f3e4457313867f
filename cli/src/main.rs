//! `rnccl`: run and measure collectives, inspect topology and channels, explain NCCL knobs.

mod bench;
mod check;
mod config_load;
mod docs;
mod env_explain;
mod ibcheck;
mod output;
mod output_file;
mod plot;
mod render;
mod rings;
mod status;
mod top;
mod topo;
mod tui;
mod tune;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `rnccl --version`: rnccl's version, the NCCL API level and the NCCL release of its knobs.
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(rnccl::version_line);

/// NCCL's collectives and diagnostics in one tool.
#[derive(Debug, Parser)]
#[command(name = "rnccl", version = VERSION.as_str(), about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    global: GlobalOpts,
    #[command(subcommand)]
    command: Command,
}

/// Options every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalOpts {
    /// YAML config with NCCL_* knob values (also RNCCL_CONFIG).
    #[arg(long, global = true, value_name = "FILE", env = "RNCCL_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run and time collectives (nccl-tests' flags and output); all_reduce by default.
    Bench(Box<bench::Args>),
    /// Check hosts' health: each host alone, pairs, rails; a busbw matrix, outliers flagged.
    Check(check::Args),
    /// Explain the NCCL_* settings in effect, or any knob.
    EnvExplain(env_explain::Args),
    /// Draw saved results (rnccl's or nccl-tests' JSON or text output) as curves against size.
    Plot(plot::Args),
    /// Show this host's (or a topology file's) GPUs, NICs, PCI tree and paths.
    Topo(topo::Args),
    /// Show the rings and trees NCCL would build, and the tuning model.
    Rings(rings::Args),
    /// Ask a running job (any host) how far each rank got, what it waits on, who is behind.
    Status(status::Args),
    /// Check this host's InfiniBand/RoCE adapters, ports, GIDs, counters and placement; test
    /// RDMA bandwidth.
    Ibcheck(ibcheck::Args),
    /// Watch the rnccl jobs on this host live: per-rank, channel and peer traffic, stuck links.
    Top(top::Args),
    /// Tune NCCL knobs interactively: sweep with them, compare busbw curves, save the best.
    Tune(tune::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionArgs),
    /// Write the man pages (one per command) into a folder.
    Man(docs::ManArgs),
}

/// Sets up NCCL_DEBUG logging (to standard error or NCCL_DEBUG_FILE) from the knobs in effect,
/// as a communicator's init would, so every subcommand logs like the engine.
///
/// Errors: the configuration cannot be loaded, or NCCL_DEBUG_FILE cannot be created.
fn init_log(global: &GlobalOpts) -> anyhow::Result<()> {
    let knobs = config_load::load_config(global)?;
    rnccl::log::init(&knobs)?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = init_log(&cli.global).and_then(|()| match cli.command {
        Command::Bench(a) => bench::run(*a, &cli.global),
        Command::Plot(a) => plot::run(a, &cli.global),
        Command::Check(a) => check::run(a, &cli.global),
        Command::EnvExplain(a) => env_explain::run(a, &cli.global),
        Command::Topo(a) => topo::run(a, &cli.global),
        Command::Rings(a) => rings::run(a, &cli.global),
        Command::Status(a) => status::run(a, &cli.global),
        Command::Ibcheck(a) => ibcheck::run(a, &cli.global),
        Command::Top(a) => top::run(a, &cli.global),
        Command::Tune(a) => tune::run(a, &cli.global),
        Command::Completions(a) => docs::run_completions(a, &cli.global),
        Command::Man(a) => docs::run_man(a, &cli.global),
    });
    match result {
        Ok(code) => code,
        // The reader of standard output went away (`rnccl topo | head`): not a failure.
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        // A rank started by `rnccl bench` tells its launcher, which says each failure once.
        Err(e) if bench::report_to_launcher(&e) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rnccl: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
