//! `rnccl rings`.

use std::process::ExitCode;

use crate::GlobalOpts;

/// Arguments of `rnccl rings`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `rnccl rings`.
pub fn run(_args: Args, _global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    anyhow::bail!("rnccl rings is being built")
}
