//! Per-communicator settings (the Rust counterpart of `ncclConfig_t`).

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::error::{Error, Result};

/// Settings for [`crate::comm::Communicator::init_rank`]. `Default` reads knobs from the environment
/// and conf files and takes the timeout from `RNCCL_TIMEOUT` (300 s).
#[derive(Debug, Clone, Default)]
pub struct CommConfig {
    /// Knob values; `None` loads them with NCCL's precedence when the communicator is created.
    pub knobs: Option<Arc<Config>>,
    /// Bound on every blocking wait (bootstrap, connection, collective stall); `None` uses
    /// `RNCCL_TIMEOUT` seconds.
    pub timeout: Option<Duration>,
    /// The CUDA device the rank runs on (`cudaSetDevice` before `ncclCommInitRank`); `None`
    /// keeps the communicator on host memory only.
    pub device: Option<usize>,
}

impl CommConfig {
    /// A config with explicit knobs.
    pub fn with_knobs(knobs: Arc<Config>) -> CommConfig {
        CommConfig {
            knobs: Some(knobs),
            timeout: None,
            device: None,
        }
    }

    /// The same config on CUDA device `ordinal`: collectives then take device buffers and run
    /// as GPU kernels on the caller's stream.
    pub fn device(mut self, ordinal: usize) -> CommConfig {
        self.device = Some(ordinal);
        self
    }

    /// The same config with a timeout.
    pub fn timeout(mut self, timeout: Duration) -> CommConfig {
        self.timeout = Some(timeout);
        self
    }

    /// Resolves knobs and timeout: sets up the process's NCCL log from them on first use
    /// ([`crate::log::init`]), then checks every knob value with the verdict `rnccl env-explain`
    /// shows ([`Config::validate`]), so every communicator refuses bad values before it meets its
    /// peers.
    ///
    /// Errors: [`Error::InvalidUsage`] for unreadable conf files, an `NCCL_DEBUG_FILE` that cannot
    /// be created, any knob value `env-explain` calls an error (all of them listed, each with the
    /// syntax its knob accepts), a bad `RNCCL_TIMEOUT`, or a zero timeout.
    pub fn resolve(&self) -> Result<(Arc<Config>, Duration)> {
        let knobs = match &self.knobs {
            Some(k) => k.clone(),
            None => Arc::new(Config::from_env()?),
        };
        crate::log::init(&knobs)?;
        knobs.validate()?;
        let timeout = match self.timeout {
            Some(t) => t,
            None => {
                let s = knobs.int("RNCCL_TIMEOUT")?;
                if s <= 0 {
                    return Err(Error::invalid_usage(format!(
                        "RNCCL_TIMEOUT={s} must be a positive number of seconds"
                    )));
                }
                Duration::from_secs(s as u64)
            }
        };
        if timeout.is_zero() {
            return Err(Error::invalid_usage(
                "the communicator timeout must be positive",
            ));
        }
        Ok((knobs, timeout))
    }
}
