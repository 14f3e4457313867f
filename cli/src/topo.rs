//! `rnccl topo`.

use std::process::ExitCode;

use crate::GlobalOpts;

/// Arguments of `rnccl topo`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `rnccl topo`.
pub fn run(_args: Args, _global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    anyhow::bail!("rnccl topo is being built")
}
