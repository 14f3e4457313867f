//! Loading the NCCL configuration for any subcommand: the global `--config FILE` (or
//! `RNCCL_CONFIG`) YAML layered with the environment and the conf files, as `rnccl::config`
//! documents. Every subcommand that reads knobs calls [`load_config`].

use anyhow::Context;
use rnccl::config::{Config, LoadOptions};

use crate::GlobalOpts;

/// The [`LoadOptions`] the global options ask for: the real environment and files, plus the YAML
/// config given with `--config` (an empty path means none).
pub fn load_options(global: &GlobalOpts) -> LoadOptions {
    LoadOptions {
        yaml: global.config.clone().filter(|p| !p.as_os_str().is_empty()),
        ..LoadOptions::default()
    }
}

/// Loads the effective configuration for this run.
///
/// Errors: a conf file that exists but cannot be read, or a YAML config that is missing,
/// malformed or holds a bad value; the message names the file, line and what to fix.
pub fn load_config(global: &GlobalOpts) -> anyhow::Result<Config> {
    load_with(load_options(global))
}

/// Loads with explicit options (env-explain's `--host` changes the host name).
///
/// Errors: as [`load_config`].
pub fn load_with(opts: LoadOptions) -> anyhow::Result<Config> {
    Config::load(&opts).context("cannot load the NCCL configuration")
}
