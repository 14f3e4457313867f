//! What a GPU rank's operations are doing. Its kernels run after the host enqueued them, so the
//! host keeps the operations it launched, in order, and learns from two words the kernels
//! write in host-mapped memory (kernels/program.cuh, operation tracking) the last operation the
//! GPU started and the last it finished. Settling them into the rank's [`OpProgress`] — at
//! every launch, and whenever the counter page or the status service reads it — gives GPU
//! ranks the operation in flight, the counts and the history CPU ranks have, timed at those
//! readings (every 100 ms for the page, and each status query), for two stores and one atomic
//! per kernel on the GPU. A launch settles only every [`SETTLE_EVERY`] operations waiting (so
//! memory stays bounded where nobody reads), sparing every other launch the work; settling
//! thousands at once costs little, as only the last [`HISTORY_LEN`] enter the history.
//!
//! An operation launched while its stream is captured into a CUDA graph is kept as any other:
//! the graph's first run starts and finishes it (or a later operation's end settles it); later
//! replays carry its number again and change nothing, as the kernels never take the finished
//! word back. The host need not ask whether a stream is being captured (a driver call per
//! launch).
//!

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::stats::{HISTORY_LEN, OpInfo, OpProgress};

/// Operations waiting to be settled at which a launch settles them (and again at every
/// multiple).
pub(crate) const SETTLE_EVERY: usize = 64;

/// An operation launched and not yet settled as finished.
#[derive(Debug)]
struct Pending {
    info: OpInfo,
    /// Whether a kernel reports it (`info.seq` is the kernel's number); an operation without
    /// one (nothing to move, or a copy on one rank) is done once the ones before it are.
    kernel: bool,
    /// Whether it was settled as started.
    begun: bool,
}

/// What a communicator's kernels said: the operation words and whether one failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceOps {
    /// The number of the last operation a kernel started (0: none).
    pub started: u64,
    /// The number of the last operation a kernel finished (0: none).
    pub finished: u64,
    /// A kernel (or the proxy carrying its traffic) reported a failure.
    pub failed: bool,
}

/// The operations a GPU communicator launched that have not finished.
#[derive(Debug, Default)]
pub(crate) struct GpuOps {
    pending: Mutex<VecDeque<Pending>>,
}

impl GpuOps {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Operation `info` was launched, with a kernel that reports it (`kernel`) or without one.
    /// Returns whether the launch should settle now: every [`SETTLE_EVERY`] operations waiting,
    /// which bounds them where nobody reads (`RNCCL_STATS=0`) and spares the other launches.
    pub(crate) fn launched(&self, info: OpInfo, kernel: bool) -> bool {
        let mut pending = self.lock();
        pending.push_back(Pending {
            info,
            kernel,
            begun: false,
        });
        pending.len().is_multiple_of(SETTLE_EVERY)
    }

    /// Brings `progress` up to what the device said: operations it started begin, operations
    /// it finished end, in launch order; after a failure the oldest unfinished operation fails
    /// and the rest are dropped (the communicator runs nothing more). Of many finished at once
    /// (between two readings, a GPU may finish thousands) only the last [`HISTORY_LEN`] enter
    /// the history one by one; the others are counted.
    pub(crate) fn settle(&self, dev: DeviceOps, progress: &OpProgress) {
        let mut pending = self.lock();
        // Finished: the oldest run of operations whose kernels reported their end, with the
        // operations without a kernel among and right after them.
        let done = pending
            .iter()
            .position(|p| p.kernel && p.info.seq > dev.finished)
            .unwrap_or(pending.len());
        let counted = done.saturating_sub(HISTORY_LEN);
        let mut finished = pending.drain(..done);
        let mut quietly = 0;
        for p in finished.by_ref().take(counted) {
            if p.begun {
                progress.end();
            } else {
                quietly += 1;
            }
        }
        progress.count_completed(quietly);
        for p in finished {
            if !p.begun {
                progress.begin(p.info, 0);
            }
            progress.end();
        }
        let Some(p) = pending.front_mut() else {
            return;
        };
        if (dev.failed || p.info.seq <= dev.started) && !p.begun {
            progress.begin(p.info, 0);
            p.begun = true;
        }
        if dev.failed {
            progress.fail();
            pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::test_op as info;

    fn dev(started: u64, finished: u64) -> DeviceOps {
        DeviceOps {
            started,
            finished,
            failed: false,
        }
    }

    #[test]
    fn operations_begin_and_end_as_the_device_reports_them() {
        let (ops, p) = (GpuOps::default(), OpProgress::default());
        for seq in 1..=3 {
            ops.launched(info(seq), true);
        }
        ops.settle(dev(0, 0), &p);
        assert!(
            p.snapshot().is_none() && p.history().is_empty(),
            "queued only"
        );
        ops.settle(dev(2, 1), &p);
        assert_eq!(p.snapshot().map(|s| s.info.seq), Some(2), "2 runs");
        assert_eq!((p.completed(), p.started_seq()), (1, 2));
        let h = p.history();
        assert_eq!(h.len(), 2);
        assert!(h[0].ended_unix_ns.is_some() && h[1].ended_unix_ns.is_none());
        ops.settle(dev(3, 3), &p);
        assert!(p.snapshot().is_none());
        assert_eq!((p.completed(), p.started_seq()), (3, 3));
        assert!(
            p.history()
                .iter()
                .all(|r| r.ended_unix_ns.is_some() && !r.failed)
        );
        ops.settle(dev(3, 3), &p);
        assert_eq!(p.completed(), 3, "settling again changes nothing");
    }

    #[test]
    fn operations_without_work_end_behind_the_ones_before_them() {
        let (ops, p) = (GpuOps::default(), OpProgress::default());
        ops.launched(info(1), true);
        ops.launched(info(2), false);
        ops.launched(info(3), true);
        ops.settle(dev(1, 0), &p);
        assert_eq!((p.completed(), p.started_seq()), (0, 1));
        ops.settle(dev(1, 1), &p);
        assert_eq!(
            (p.completed(), p.started_seq()),
            (2, 2),
            "2 follows 1 at once"
        );
        assert!(p.snapshot().is_none(), "3 has not started");
    }

    #[test]
    fn thousands_finished_at_once_are_counted_and_the_last_kept() {
        let (ops, p) = (GpuOps::default(), OpProgress::default());
        let settle_now: Vec<u64> = (1..=1000)
            .filter(|&seq| ops.launched(info(seq), true))
            .collect();
        assert_eq!(
            settle_now.len(),
            1000 / SETTLE_EVERY,
            "every {SETTLE_EVERY} waiting"
        );
        assert_eq!(settle_now[0], SETTLE_EVERY as u64);
        ops.settle(dev(1, 0), &p);
        assert_eq!(p.snapshot().map(|s| s.info.seq), Some(1), "1 runs");
        ops.settle(dev(1000, 1000), &p);
        assert_eq!((p.completed(), p.started_seq()), (1000, 1000));
        assert!(p.snapshot().is_none());
        let h = p.history();
        let seqs: Vec<u64> = h.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1001 - HISTORY_LEN as u64..=1000).collect::<Vec<_>>());
        assert!(h.iter().all(|r| r.ended_unix_ns.is_some()));
        assert_eq!(ops.lock().len(), 0);
    }

    #[test]
    fn a_failure_fails_the_oldest_unfinished_operation_and_drops_the_rest() {
        let (ops, p) = (GpuOps::default(), OpProgress::default());
        for seq in 1..=3 {
            ops.launched(info(seq), true);
        }
        ops.settle(
            DeviceOps {
                started: 1,
                finished: 0,
                failed: true,
            },
            &p,
        );
        let h = p.history();
        assert_eq!(h.len(), 1);
        assert!(h[0].failed && h[0].ended_unix_ns.is_some(), "{h:?}");
        assert!(p.snapshot().is_none());
        ops.settle(dev(3, 3), &p);
        assert_eq!(p.history().len(), 1, "nothing after the failure");
    }

    #[test]
    fn a_failure_before_the_kernel_started_still_names_the_operation() {
        let (ops, p) = (GpuOps::default(), OpProgress::default());
        ops.launched(info(7), true);
        ops.settle(
            DeviceOps {
                started: 6,
                finished: 6,
                failed: true,
            },
            &p,
        );
        let h = p.history();
        assert_eq!((h[0].seq, h[0].failed), (7, true));
    }
}
