//! Cancellation: what SIGINT, SIGTERM and SIGHUP do to a bench job (as srun's and mpirun's
//! cancellation do, the whole job stops within a second and leaves nothing in `/dev/shm`).
//!
//! - The launcher ([`Stop`]) notes the signal; its wait loop then stops every rank.
//! - A process running ranks ([`exit_on_signal`]) removes its files from `/dev/shm` and exits at
//!   once with status 128 + the signal's number, without waiting for its collectives: `_exit`,
//!   so no exit handler (CUDA's included) can wait on a kernel still spinning on a stopped peer.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The signals that cancel a job.
pub const CANCEL: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The cancelling signal the launcher received, if any.
pub struct Stop {
    got: Arc<AtomicI32>,
}

impl Stop {
    /// Starts noting cancelling signals (from now on they no longer end this process by
    /// themselves: the caller must poll [`Stop::received`]).
    ///
    /// Errors: the signal handlers or their thread cannot be set up.
    pub fn watch() -> anyhow::Result<Stop> {
        let got = Arc::new(AtomicI32::new(0));
        let mut signals = Signals::new(CANCEL)?;
        let g = got.clone();
        std::thread::Builder::new()
            .name("rnccl-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    g.store(sig, Ordering::SeqCst);
                }
            })?;
        Ok(Stop { got })
    }

    /// The signal received, if one was.
    pub fn received(&self) -> Option<i32> {
        match self.got.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

/// Makes a cancelling signal remove this process's `/dev/shm` files and exit with status 128 +
/// the signal's number, whatever its threads are doing (a collective waiting on a peer that was
/// stopped first must not keep it alive).
///
/// Errors: the signal handlers or their thread cannot be set up.
pub fn exit_on_signal() -> anyhow::Result<()> {
    let mut signals = Signals::new(CANCEL)?;
    std::thread::Builder::new()
        .name("rnccl-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                rnccl::remove_own_files_for_exit();
                signal_hook::low_level::exit(128 + sig);
            }
        })?;
    Ok(())
}

/// The name of signal `sig` (`SIGTERM`), or its number.
pub fn name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}
