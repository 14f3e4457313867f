//! Fault tolerance as NCCL 2.27-2.30 offers it: `ncclCommRevoke` stops a communicator's
//! operations in flight and keeps it as a parent; `ncclCommShrink` makes a communicator of the
//! ranks that stay when some are excluded (dead, or dropped on purpose). Excluded ranks take no
//! part: the ranks that stay check among themselves, over the parent's bootstrap network, that
//! they all passed the same exclusion list, then connect anew.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::Communicator;
use crate::bootstrap::tags;
use crate::error::{Error, Result};
use crate::hash::fnv1a;

/// The child "color" of a shrink (split colors are below 2^31).
const SHRUNK: u64 = u64::MAX;

/// What `ncclCommShrink` does first with operations still running on the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShrinkMode {
    /// `NCCL_SHRINK_DEFAULT`: the parent must be quiet (no operation in flight).
    Default,
    /// `NCCL_SHRINK_ABORT`: stop the parent's operations in flight first (they fail with
    /// [`Error::Aborted`]); the way to shrink after a peer died mid-collective.
    Abort,
}

impl Communicator {
    /// Revokes this communicator (`ncclCommRevoke`): operations in flight stop (a blocked host
    /// collective returns [`Error::Aborted`], GPU kernels leave their waits), and this call
    /// returns once none runs any more. Afterwards the communicator takes no new operations
    /// and cannot be finalized; it can still be shrunk ([`Communicator::shrink`]), split, or
    /// dropped.
    ///
    /// Errors: [`Error::InvalidUsage`] when it was already revoked; [`Error::Timeout`] when
    /// this rank's GPU kernels do not stop within the communicator's timeout.
    pub fn revoke(&self) -> Result<()> {
        if self.revoked.get() {
            return Err(Error::invalid_usage(
                "the communicator was already revoked (ncclCommRevoke takes a communicator once)",
            ));
        }
        self.stop_in_flight()?;
        self.revoked.set(true);
        self.state.borrow_mut().failed =
            Some("it was revoked (ncclCommRevoke): shrink or split it, or destroy it".to_string());
        Ok(())
    }

    /// Whether [`Communicator::revoke`] was called.
    pub fn is_revoked(&self) -> bool {
        self.revoked.get()
    }

    /// Makes the communicator of every rank but `exclude` (parent ranks), numbered in parent
    /// order (`ncclCommShrink`). Every rank that stays calls it with the same list; excluded
    /// ranks do not call it. It works on a parent that failed because a peer died: with
    /// [`ShrinkMode::Abort`] the parent's operations in flight are stopped first and its abort
    /// flag is lowered again once they have left (as NCCL does: the parent reports no
    /// asynchronous error of its own, which PyTorch's watchdog polls after `shrink_group`), after
    /// which the parent takes no new operations (one stopped midway leaves its connections out of
    /// step) but can still be split, shrunk or destroyed.
    ///
    /// Errors: [`Error::InvalidArgument`] for a rank out of range, listed twice, or this rank
    /// itself; [`Error::InvalidUsage`] when operations run on the parent in
    /// [`ShrinkMode::Default`], or when a rank that stays passed a different list (naming it);
    /// bootstrap [`Error::Timeout`] / [`Error::Remote`] naming a rank that stays but did not
    /// answer; the child's connection errors.
    pub fn shrink(&self, exclude: &[usize], mode: ShrinkMode) -> Result<Communicator> {
        let core = &self.core;
        let n = core.nranks;
        let mut excluded = exclude.to_vec();
        excluded.sort_unstable();
        if let Some(&r) = excluded.iter().find(|&&r| r >= n) {
            return Err(Error::InvalidArgument(format!(
                "rank {r} in the exclusion list is outside the communicator's ranks 0..{n}"
            )));
        }
        if let Some(w) = excluded.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "rank {} is listed twice in the exclusion list",
                w[0]
            )));
        }
        if excluded.binary_search(&core.rank).is_ok() {
            return Err(Error::InvalidArgument(format!(
                "this rank ({}) is in the exclusion list: excluded ranks do not call shrink",
                core.rank
            )));
        }
        match mode {
            ShrinkMode::Abort => {
                self.stop_in_flight()?;
                core.abort.store(false, Ordering::SeqCst);
                if let Some(g) = core.watch.gpu() {
                    g.lower_abort();
                }
                self.state.borrow_mut().retired = Some(
                    "it was shrunk with NCCL_SHRINK_ABORT, which stopped its operations in \
                     flight: use the shrunk communicator",
                );
            }
            ShrinkMode::Default => {
                if let Some(op) = core.watch.gpu().and_then(|g| g.in_flight()) {
                    return Err(Error::invalid_usage(format!(
                        "operation {op} still runs on the parent communicator: wait for it, or \
                         shrink with NCCL_SHRINK_ABORT to stop it"
                    )));
                }
            }
        }
        let stay: Vec<usize> = (0..n)
            .filter(|r| excluded.binary_search(r).is_err())
            .collect();
        self.splits.set(self.splits.get() + 1);
        let seq = self.splits.get();
        let list: Vec<u8> = excluded
            .iter()
            .flat_map(|&r| (r as u64).to_le_bytes())
            .collect();
        let mine = fnv1a(&list).to_le_bytes();
        // The parent's abort flag may be raised (revoked or aborted first) and its namespace
        // hold the notice of a rank that gave up: this exchange runs in the child's namespace,
        // with a flag of its own, bounded by the communicator's timeout.
        let got = core.all_gather_among(
            self.child_tag(seq, SHRUNK),
            &stay,
            tags::shrink(seq),
            &mine,
            "in shrink, checking the exclusion list with the ranks that stay",
            &AtomicBool::new(false),
        )?;
        if let Some((i, _)) = got.iter().enumerate().find(|(_, b)| b[..] != mine[..]) {
            return Err(Error::invalid_usage(format!(
                "{} passed a different exclusion list to shrink than this rank ({excluded:?}): \
                 every rank that stays must exclude the same ranks",
                core.describe(stay[i])
            )));
        }
        self.child(seq, SHRUNK, stay)
    }

    /// Raises the abort flag of this rank's operations in flight and waits until its GPU
    /// kernels have left (finished, or reported their failure: see
    /// [`crate::exec::gpu::GpuComm::in_flight`]).
    ///
    /// Errors: [`Error::Timeout`] when they do not within the communicator's timeout.
    fn stop_in_flight(&self) -> Result<()> {
        let core = &self.core;
        core.abort.store(true, Ordering::SeqCst);
        let Some(g) = core.watch.gpu() else {
            return Ok(());
        };
        g.raise_abort();
        let start = Instant::now();
        loop {
            let Some(op) = g.in_flight() else {
                return Ok(());
            };
            if start.elapsed() > core.timeout {
                return Err(Error::Timeout {
                    what: format!(
                        "stopping this rank's GPU kernels (operation {op} still runs after the \
                         abort flag was raised)"
                    ),
                    waited_for: core.describe(core.rank),
                    after: core.timeout,
                });
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}
