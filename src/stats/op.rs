//! The operation a communicator rank is running and how far it got: what a live view shows
//! and what a hang report names.
//!
//! Writers are the thread driving the communicator and, for a GPU communicator, whoever settles
//! what its kernels reported (the counter page's thread, the status service); a mutex keeps
//! them one at a time, uncontended in practice. Readers are any number. The description of the
//! operation is a few words published under a sequence lock (the writer makes the sequence odd,
//! stores, makes it even; a reader retries while it is odd or changed), so readers never see
//! one operation's function with another's count and never wait on a writer. Progress counters
//! are plain relaxed atomics.

use std::sync::atomic::{AtomicU64, Ordering};

use nix::time::{ClockId, clock_gettime};

use super::history::{History, OpRecord};
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
    /// The algorithm (NCCL_ALGO's name: `Ring`, `Tree`, …, or `Direct` for point-to-point).
    pub algo: &'static str,
    /// Channels the operation runs on.
    pub nchannels: usize,
    /// Whether it started on the direct path over peers' windows (it falls back to FIFOs when
    /// some rank's buffers are not windows).
    pub direct: bool,
}

/// The algorithm names an [`OpInfo`] can carry, in the order they are encoded: rnccl's, then
/// NCCL_ALGO's other names (NVIDIA NCCL's operations, published by rnccl's profiler plugin).
const ALGOS: [&str; 8] = [
    "Ring",
    "Tree",
    "Direct",
    "CollNetDirect",
    "CollNetChain",
    "NVLS",
    "NVLSTree",
    "PAT",
];

/// Words of an encoded [`OpInfo`] plus its start time.
const WORDS: usize = 6;

impl OpInfo {
    /// The words of this description and its start time (coarse monotonic ns).
    pub(super) fn encode(&self, started_ns: u64) -> [u64; WORDS] {
        let algo = ALGOS.iter().position(|&a| a == self.algo).unwrap_or(0) as u64;
        [
            self.seq,
            self.count as u64,
            self.fused as u64,
            self.nchannels as u64,
            (self.func as u64)
                | (self.dtype as u64) << 8
                | algo << 16
                | u64::from(self.direct) << 24,
            started_ns,
        ]
    }

    /// The description and start time encoded in `w`; `None` for an unknown code.
    pub(super) fn decode(w: &[u64; WORDS]) -> Option<(OpInfo, u64)> {
        let packed = w[4];
        let func = *Func::ALL.get((packed & 0xff) as usize)?;
        let dtype = *DataType::ALL.get(((packed >> 8) & 0xff) as usize)?;
        let algo = *ALGOS.get(((packed >> 16) & 0xff) as usize)?;
        let info = OpInfo {
            seq: w[0],
            func,
            count: w[1] as usize,
            dtype,
            fused: w[2] as usize,
            algo,
            nchannels: w[3] as usize,
            direct: (packed >> 24) & 1 == 1,
        };
        Some((info, w[5]))
    }
}

/// A float32 ring AllReduce of 8 elements on one channel, operation `seq`: what tests of the
/// history and of its users record.
#[cfg(test)]
pub(crate) fn test_op(seq: u64) -> OpInfo {
    OpInfo {
        seq,
        func: Func::AllReduce,
        count: 8,
        dtype: DataType::Float32,
        fused: 1,
        algo: "Ring",
        nchannels: 1,
        direct: false,
    }
}

/// Now on the coarse monotonic clock (ns): a few nanoseconds to read, with the kernel tick's
/// resolution (1-10 ms), which is plenty for "how long has this operation run" and costs a small
/// operation nothing measurable (a precise clock read is a few percent of an 8-byte all-reduce).
pub(crate) fn coarse_now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The operation in flight on a rank, updated by the executor.
#[derive(Debug)]
pub struct OpProgress {
    /// Sequence lock over `words`: odd while the writer updates them.
    lock: AtomicU64,
    words: [AtomicU64; WORDS],
    /// 1 while an operation is in flight.
    in_flight: AtomicU64,
    steps_total: AtomicU64,
    steps_done: AtomicU64,
    bytes_done: AtomicU64,
    /// Operations completed.
    completed: AtomicU64,
    /// Held by the writer of `begin`, `end` and `fail`.
    writer: std::sync::Mutex<()>,
    /// The operations started and finished, newest last.
    history: History,
}

impl Default for OpProgress {
    fn default() -> Self {
        OpProgress {
            lock: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            in_flight: AtomicU64::new(0),
            steps_total: AtomicU64::new(0),
            steps_done: AtomicU64::new(0),
            bytes_done: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            writer: std::sync::Mutex::new(()),
            history: History::default(),
        }
    }
}

/// A reading of [`OpProgress`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpSnapshot {
    /// The operation.
    pub info: OpInfo,
    /// Seconds since it started (to the kernel tick, 1-10 ms).
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
        let _writer = self.write();
        self.history.begin(&info);
        let now = coarse_now_ns();
        let seq = self.lock.load(Ordering::Relaxed);
        self.lock.store(seq + 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        for (w, v) in self.words.iter().zip(info.encode(now)) {
            w.store(v, Ordering::Relaxed);
        }
        self.lock.store(seq + 2, Ordering::Release);
        self.steps_done.store(0, Ordering::Relaxed);
        self.bytes_done.store(0, Ordering::Relaxed);
        self.steps_total.store(steps_total, Ordering::Relaxed);
        self.in_flight.store(1, Ordering::Release);
    }

    fn write(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records progress: steps in all and finished, and bytes moved so far.
    #[inline]
    pub fn update(&self, steps_total: u64, steps_done: u64, bytes_done: u64) {
        self.steps_total.store(steps_total, Ordering::Relaxed);
        self.steps_done.store(steps_done, Ordering::Relaxed);
        self.bytes_done.store(bytes_done, Ordering::Relaxed);
    }

    /// The operation finished: nothing is in flight.
    pub fn end(&self) {
        let _writer = self.write();
        if self.in_flight.swap(0, Ordering::AcqRel) == 1 {
            self.history.end(false);
            self.completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The operation failed: nothing is in flight, and the history says it failed.
    pub fn fail(&self) {
        let _writer = self.write();
        if self.in_flight.swap(0, Ordering::AcqRel) == 1 {
            self.history.end(true);
            self.completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The operations started and finished, oldest first (the last
    /// [`HISTORY_LEN`](super::HISTORY_LEN)).
    pub fn history(&self) -> Vec<OpRecord> {
        self.history.records()
    }

    /// The sequence number of the last operation that started, 0 before the first.
    pub fn started_seq(&self) -> u64 {
        self.read().map_or(0, |(info, _)| info.seq)
    }

    /// `n` earlier operations finished while a later one is still in flight (NVIDIA NCCL's
    /// operations, as rnccl's profiler plugin sees them, overlap), or too long ago to keep in
    /// the history (a GPU rank's, settled in bulk): counted as completed, nothing else changes.
    pub fn count_completed(&self, n: u64) {
        self.completed.fetch_add(n, Ordering::Relaxed);
    }

    /// Operations completed so far.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// The description of the last operation that started, and when (coarse monotonic ns).
    fn read(&self) -> Option<(OpInfo, u64)> {
        loop {
            let before = self.lock.load(Ordering::Acquire);
            if before == 0 {
                return None;
            }
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let w: [u64; WORDS] = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
            std::sync::atomic::fence(Ordering::Acquire);
            if self.lock.load(Ordering::Relaxed) == before {
                return OpInfo::decode(&w);
            }
        }
    }

    /// The operation in flight, if any, with its progress.
    pub fn snapshot(&self) -> Option<OpSnapshot> {
        if self.in_flight.load(Ordering::Acquire) == 0 {
            return None;
        }
        let (info, started) = self.read()?;
        let now = coarse_now_ns();
        Some(OpSnapshot {
            info,
            elapsed_s: now.saturating_sub(started) as f64 / 1e9,
            steps_total: self.steps_total.load(Ordering::Relaxed),
            steps_done: self.steps_done.load(Ordering::Relaxed),
            bytes_done: self.bytes_done.load(Ordering::Relaxed),
        })
    }

    /// The last operation that ended (or the one in flight once it ends).
    pub fn last(&self) -> Option<OpInfo> {
        if self.in_flight.load(Ordering::Acquire) == 1 {
            return None;
        }
        self.read().map(|(info, _)| info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(seq: u64, count: usize) -> OpInfo {
        OpInfo {
            seq,
            func: Func::AllReduce,
            count,
            dtype: DataType::Bfloat16,
            fused: 1,
            algo: "Tree",
            nchannels: 2,
            direct: true,
        }
    }

    #[test]
    fn begin_update_end() {
        let p = OpProgress::default();
        assert!(p.snapshot().is_none() && p.last().is_none());
        p.begin(info(4, 1024), 10);
        p.update(10, 3, 4096);
        let s = p.snapshot().unwrap();
        assert_eq!(s.info, info(4, 1024));
        assert_eq!((s.steps_total, s.steps_done, s.bytes_done), (10, 3, 4096));
        assert!(p.last().is_none(), "still in flight");
        p.end();
        assert!(p.snapshot().is_none());
        assert_eq!((p.completed(), p.last()), (1, Some(info(4, 1024))));
        p.end();
        assert_eq!(p.completed(), 1, "nothing was in flight");
    }

    #[test]
    fn readers_never_see_a_torn_description() {
        use std::sync::atomic::AtomicBool;
        let p = std::sync::Arc::new(OpProgress::default());
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let writer = {
            let (p, stop) = (p.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seq = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    // count always equals seq: a torn read would show them differing.
                    p.begin(info(seq, seq as usize), 1);
                    p.end();
                    seq += 1;
                }
                seq
            })
        };
        let mut seen = 0;
        while seen < 20_000 {
            if let Some((i, _)) = p.read() {
                assert_eq!(i.seq, i.count as u64, "torn: {i:?}");
                seen += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(writer.join().unwrap() > 1);
    }
}
