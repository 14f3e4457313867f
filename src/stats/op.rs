//! The operation a communicator rank is running and how far it got: what a live view shows
//! and what a hang report names.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::dtype::DataType;
use crate::func::Func;

/// What an operation is (set once when it starts).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct OpInfo {
    /// Operation sequence number on the communicator (1-based; Send/Recv fused into one phase
    /// count as their first operation's number).
    pub seq: u64,
    /// The function.
    pub func: Func,
    /// NCCL count (elements).
    pub count: usize,
    /// Element type.
    pub dtype: DataType,
    /// Operations fused into the phase (Send/Recv groups).
    pub fused: usize,
    /// The algorithm (NCCL's name: `Ring`, `Tree`, or `Direct` for point-to-point).
    pub algo: &'static str,
    /// Channels the operation runs on.
    pub nchannels: usize,
    /// Whether it started on the direct path over peers' windows (it falls back to FIFOs when
    /// some rank's buffers are not windows).
    pub direct: bool,
}

/// The operation in flight on a rank, updated by the executor.
#[derive(Debug, Default)]
pub struct OpProgress {
    info: Mutex<Option<(OpInfo, Instant)>>,
    last: Mutex<Option<OpInfo>>,
    steps_total: AtomicU64,
    steps_done: AtomicU64,
    bytes_done: AtomicU64,
    /// Operations completed.
    completed: AtomicU64,
}

/// A reading of [`OpProgress`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpSnapshot {
    /// The operation.
    pub info: OpInfo,
    /// Seconds since it started.
    pub elapsed_s: f64,
    /// Steps (plan steps, or direct chunks) this rank must run.
    pub steps_total: u64,
    /// Steps finished so far.
    pub steps_done: u64,
    /// Bytes this rank moved for it so far (sent, received or read from peers' windows).
    pub bytes_done: u64,
}

impl OpProgress {
    /// An operation of `steps_total` steps starts.
    pub fn begin(&self, info: OpInfo, steps_total: u64) {
        self.steps_done.store(0, Ordering::Relaxed);
        self.bytes_done.store(0, Ordering::Relaxed);
        self.steps_total.store(steps_total, Ordering::Relaxed);
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = Some((info, Instant::now()));
    }

    /// Records progress: steps finished and bytes moved so far.
    #[inline]
    pub fn update(&self, steps_total: u64, steps_done: u64, bytes_done: u64) {
        self.steps_total.store(steps_total, Ordering::Relaxed);
        self.steps_done.store(steps_done, Ordering::Relaxed);
        self.bytes_done.store(bytes_done, Ordering::Relaxed);
    }

    /// The operation finished (or failed): nothing is in flight.
    pub fn end(&self) {
        let done = self.info.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((info, _)) = done {
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(info);
            self.completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The last operation that ended.
    pub fn last(&self) -> Option<OpInfo> {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Operations completed so far.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// The operation in flight, if any, with its progress.
    pub fn snapshot(&self) -> Option<OpSnapshot> {
        let (info, started) = (*self.info.lock().unwrap_or_else(|p| p.into_inner()))?;
        Some(OpSnapshot {
            info,
            elapsed_s: started.elapsed().as_secs_f64(),
            steps_total: self.steps_total.load(Ordering::Relaxed),
            steps_done: self.steps_done.load(Ordering::Relaxed),
            bytes_done: self.bytes_done.load(Ordering::Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_update_end() {
        let p = OpProgress::default();
        assert!(p.snapshot().is_none());
        let info = OpInfo {
            seq: 4,
            func: Func::AllReduce,
            count: 1024,
            dtype: DataType::Float32,
            fused: 1,
            algo: "Ring",
            nchannels: 2,
            direct: false,
        };
        p.begin(info, 10);
        p.update(10, 3, 4096);
        let s = p.snapshot().unwrap();
        assert_eq!(
            (s.info.seq, s.steps_total, s.steps_done, s.bytes_done),
            (4, 10, 3, 4096)
        );
        p.end();
        assert!(p.snapshot().is_none());
        assert_eq!(p.completed(), 1);
        assert_eq!(p.last(), Some(info));
        p.end();
        assert_eq!(p.completed(), 1, "nothing was in flight");
    }
}
