//! The operations a communicator rank started and finished, newest last, bounded in memory (as
//! NCCL RAS's operation counts and PyTorch's Flight Recorder keep them): what a hang report and
//! `rnccl status` use to say which ranks have not reached operation N and what the late ones
//! last did.
//!
//! One writer (the thread driving the communicator) and rare readers: a mutex held for a few
//! stores costs an operation tens of nanoseconds, uncontended.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::op::OpInfo;
use crate::dtype::DataType;
use crate::func::Func;

/// Operations kept per communicator rank.
pub const HISTORY_LEN: usize = 64;

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpRecord {
    /// Sequence number on the communicator (as [`OpInfo::seq`]).
    pub seq: u64,
    /// The function.
    pub func: Func,
    /// NCCL count (elements).
    pub count: usize,
    /// Element type.
    pub dtype: DataType,
    /// When it started, ns since the Unix epoch (the kernel tick's resolution, 1-10 ms).
    pub started_unix_ns: u64,
    /// When it finished, if it has.
    pub ended_unix_ns: Option<u64>,
    /// Whether it failed (ended with an error).
    pub failed: bool,
}

/// The bounded history.
#[derive(Debug, Default)]
pub(crate) struct History {
    ops: Mutex<VecDeque<OpRecord>>,
}

/// Now on the coarse real-time clock, ns since the Unix epoch.
pub(crate) fn coarse_unix_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

impl History {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<OpRecord>> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Operation `info` starts now.
    pub(crate) fn begin(&self, info: &OpInfo) {
        let mut ops = self.lock();
        if ops.len() == HISTORY_LEN {
            ops.pop_front();
        }
        ops.push_back(OpRecord {
            seq: info.seq,
            func: info.func,
            count: info.count,
            dtype: info.dtype,
            started_unix_ns: coarse_unix_ns(),
            ended_unix_ns: None,
            failed: false,
        });
    }

    /// The operation that started last ends now, failed or not.
    pub(crate) fn end(&self, failed: bool) {
        let mut ops = self.lock();
        if let Some(last) = ops.back_mut().filter(|o| o.ended_unix_ns.is_none()) {
            last.ended_unix_ns = Some(coarse_unix_ns());
            last.failed = failed;
        }
    }

    /// The history, oldest first.
    pub(crate) fn records(&self) -> Vec<OpRecord> {
        self.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::test_op as info;

    #[test]
    fn keeps_the_newest_operations_with_their_ends() {
        let h = History::default();
        for seq in 1..=HISTORY_LEN as u64 + 5 {
            h.begin(&info(seq));
            h.end(false);
        }
        h.begin(&info(100));
        let r = h.records();
        assert_eq!(r.len(), HISTORY_LEN);
        assert_eq!(r[0].seq, 7);
        assert!(
            r[..HISTORY_LEN - 1]
                .iter()
                .all(|o| o.ended_unix_ns.is_some())
        );
        assert_eq!(
            (r.last().unwrap().seq, r.last().unwrap().ended_unix_ns),
            (100, None)
        );
        h.end(true);
        h.end(false);
        let last = h.records().pop().unwrap();
        assert!(
            last.failed && last.ended_unix_ns.is_some(),
            "a second end changes nothing"
        );
    }
}
