//! `rnccl env-explain`.

use std::process::ExitCode;

use crate::GlobalOpts;

/// Arguments of `rnccl env-explain`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `rnccl env-explain`.
pub fn run(_args: Args, _global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    anyhow::bail!("rnccl env-explain is being built")
}
