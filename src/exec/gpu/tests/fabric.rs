//! A simulated fabric for device programs: every rank's connections, FIFOs, counters and
//! control block in host memory, programs encoded by [`program::encode`] with host addresses,
//! and every rank's program run at once on the kernel model ([`emulate::run`]), a thread per
//! lane per rank, under a deadline.
//!
//! Connection state lives as long as the fabric, so operations run back to back continue the
//! persistent step counters, as kernels launched one after another on a GPU do.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::super::emulate;
use super::super::program::{self, Control, DevBuffers};
use crate::coll::Plan;
use crate::conn::{ConnKey, NSLOTS};
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{DevConn, REPORT_BYTES, Status};

/// Zeroed host memory in 8-byte words, addressed the way a program addresses device memory.
/// Lanes write it through raw pointers (the words are atomics, so shared writes are allowed);
/// tests read it once the lanes are done.
pub(super) struct Words(Box<[AtomicU64]>);

impl Words {
    /// `bytes` zero bytes (rounded up to whole words).
    pub(super) fn zeroed(bytes: usize) -> Words {
        Words((0..bytes.div_ceil(8)).map(|_| AtomicU64::new(0)).collect())
    }

    /// Memory holding `data` (then zeros to the end of the last word).
    pub(super) fn from_bytes(data: &[u8]) -> Words {
        let w = Words::zeroed(data.len());
        w.write(0, data);
        w
    }

    /// The address of the first byte.
    pub(super) fn addr(&self) -> u64 {
        self.0.as_ptr().expose_provenance() as u64
    }

    /// `len` bytes from byte `off`.
    pub(super) fn read(&self, off: usize, len: usize) -> Vec<u8> {
        let all: Vec<u8> = self
            .0
            .iter()
            .flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes())
            .collect();
        all[off..off + len].to_vec()
    }

    /// Writes `data` from byte `off`.
    pub(super) fn write(&self, off: usize, data: &[u8]) {
        let mut all = self.read(0, self.0.len() * 8);
        all[off..off + data.len()].copy_from_slice(data);
        for (w, b) in self.0.iter().zip(all.chunks_exact(8)) {
            let b: [u8; 8] = b.try_into().expect("a chunk of 8");
            w.store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
    }

    /// Word `i`.
    pub(super) fn word(&self, i: usize) -> u64 {
        self.0[i].load(Ordering::Relaxed)
    }
}

/// A connection's shared memory: the FIFO, sizes and tail with the receiver, head with the
/// sender.
struct Link {
    fifo: Words,
    sizes: Words,
    tail: Words,
    head: Words,
}

/// One end's persistent counters: `step[2]` (slots, bytes) and the live byte count.
struct End {
    step: Words,
    bytes: Words,
}

/// A rank's control block: report, abort flag, first-failure claim, operation words and the
/// finished-blocks count, and the number of the rank's last launch.
struct Ctl {
    report: Words,
    abort: Words,
    claim: Words,
    ops: Words,
    finished: Words,
    launches: AtomicU64,
}

/// What a rank's kernel reported (`struct Report`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Report {
    /// Why it stopped, if it did.
    pub code: Option<Status>,
    /// The lane that failed first.
    pub lane: u32,
    /// The peer it waited for.
    pub peer: u32,
    /// The connection's channel.
    pub channel: u32,
    /// The slot count it waited for.
    pub step: u64,
    /// 1: a peer's data, 2: a free slot.
    pub waiting: u64,
}

/// One end's counters after a run: (slots, bytes) of `step[2]`, and the live byte count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counters {
    /// `step[0]`: slots moved, ever.
    pub slots: u64,
    /// `step[1]`: bytes moved, ever.
    pub bytes: u64,
    /// The host-mapped copy of the bytes.
    pub live: u64,
}

/// A rank's part in a run: its plan and where its buffers are.
pub(super) struct Job<'a> {
    /// The rank.
    pub rank: usize,
    /// Its plan.
    pub plan: &'a Plan,
    /// Its buffers' addresses (memory the caller keeps alive through the run).
    pub bufs: DevBuffers,
}

/// Connections, counters and control blocks of `n` ranks.
pub(super) struct Fabric {
    n: usize,
    slot_bytes: usize,
    timeout: Duration,
    /// Keyed by the sender and the sender's key.
    links: BTreeMap<(usize, ConnKey), Link>,
    /// Keyed by rank, key, and whether it is the sending end.
    ends: BTreeMap<(usize, ConnKey, bool), End>,
    ctl: Vec<Ctl>,
}

impl Fabric {
    /// A fabric of `n` ranks whose FIFO slots hold `slot_bytes` bytes and whose kernels give
    /// up on a peer after `timeout`.
    pub(super) fn new(n: usize, slot_bytes: usize, timeout: Duration) -> Fabric {
        let ctl = (0..n)
            .map(|_| Ctl {
                report: Words::zeroed(REPORT_BYTES),
                abort: Words::zeroed(8),
                claim: Words::zeroed(8),
                ops: Words::zeroed(16),
                finished: Words::zeroed(16),
                launches: AtomicU64::new(0),
            })
            .collect();
        Fabric {
            n,
            slot_bytes,
            timeout,
            links: BTreeMap::new(),
            ends: BTreeMap::new(),
            ctl,
        }
    }

    /// The link `rank`'s end `key` (sending or not) belongs to: rank r's send key
    /// {peer p, channel c, index i} pairs with rank p's receive key {peer r, c, i}.
    fn link_key(rank: usize, key: ConnKey, send: bool) -> (usize, ConnKey) {
        if send {
            (rank, key)
        } else {
            (key.peer, ConnKey { peer: rank, ..key })
        }
    }

    /// `rank`'s end of `key` as the kernel sees it, made on first use.
    fn dev_conn(&mut self, rank: usize, key: ConnKey, send: bool) -> DevConn {
        assert!(key.peer < self.n, "rank {rank} names peer {}", key.peer);
        let slot = self.slot_bytes;
        let link = self
            .links
            .entry(Fabric::link_key(rank, key, send))
            .or_insert_with(|| Link {
                fifo: Words::zeroed(NSLOTS * slot),
                sizes: Words::zeroed(NSLOTS * 8),
                tail: Words::zeroed(8),
                head: Words::zeroed(8),
            });
        let (fifo, sizes, tail, head) = (
            link.fifo.addr(),
            link.sizes.addr(),
            link.tail.addr(),
            link.head.addr(),
        );
        let end = self.ends.entry((rank, key, send)).or_insert_with(|| End {
            step: Words::zeroed(16),
            bytes: Words::zeroed(24),
        });
        DevConn {
            fifo,
            sizes,
            tail,
            head,
            step: end.step.addr(),
            bytes: end.bytes.addr(),
            peer: key.peer as u32,
            channel: key.channel,
            pad: 0,
        }
    }

    /// `job`'s program, its connection ends given in [`program::conn_order`].
    pub(super) fn encode(&mut self, job: &Job<'_>, spec: &ReduceSpec) -> Vec<u8> {
        let parts = [program::Part {
            plan: job.plan,
            bufs: job.bufs,
        }];
        let conns: Vec<DevConn> = program::conn_order(&parts)
            .into_iter()
            .map(|(k, send)| self.dev_conn(job.rank, k, send))
            .collect();
        let c = &self.ctl[job.rank];
        let ctl = Control {
            report: c.report.addr(),
            abort: c.abort.addr(),
            claim: c.claim.addr(),
            timeout_ns: self.timeout.as_nanos() as u64,
            ops: c.ops.addr(),
            finished: c.finished.addr(),
            rank: job.rank as u32,
            slot_bytes: self.slot_bytes as u64,
        };
        program::encode(&parts, &conns, spec, &ctl)
            .expect("encode")
            .0
    }

    /// Encodes and runs every job at once (see [`Fabric::launch`]).
    pub(super) fn run(&mut self, jobs: &[Job<'_>], spec: &ReduceSpec, limit: Duration) {
        let programs: Vec<(usize, Vec<u8>)> = jobs
            .iter()
            .map(|j| (j.rank, self.encode(j, spec)))
            .collect();
        self.launch(&programs, spec, limit);
    }

    /// Runs every rank's program at once, a thread per rank (whose lanes get a thread each).
    /// Panics when a program does not decode, or when the ranks are not all done within
    /// `limit`: their abort flags are then raised, which stops every wait, and the panic
    /// names the ranks still running.
    pub(super) fn launch(&self, programs: &[(usize, Vec<u8>)], spec: &ReduceSpec, limit: Duration) {
        let (dtype, combine) = (spec.dtype, spec.combine);
        let deadline = Instant::now() + limit;
        let mut late = Vec::new();
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel();
            for (rank, prog) in programs {
                let tx = tx.clone();
                // Each launch is the rank's next operation, as on a communicator.
                let seq = self.ctl[*rank].launches.fetch_add(1, Ordering::Relaxed) + 1;
                s.spawn(move || {
                    // SAFETY: every address in the program is memory of this fabric or of
                    // the caller's buffers, which outlive the scope; the kernel model touches
                    // flags only atomically and buffers as the plans say.
                    let r = unsafe { emulate::run(prog, dtype, combine, seq) };
                    r.expect("the program decodes");
                    // The receiver is gone only once the deadline passed.
                    let _ = tx.send(*rank);
                });
            }
            drop(tx);
            let mut left: Vec<usize> = programs.iter().map(|(r, _)| *r).collect();
            while !left.is_empty() {
                let wait = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(wait) {
                    Ok(r) => left.retain(|&x| x != r),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        for &r in &left {
                            self.abort(r);
                        }
                        late = left;
                        break;
                    }
                }
            }
        });
        assert!(
            late.is_empty(),
            "ranks {late:?} were still running after {limit:?}"
        );
    }

    /// Raises `rank`'s abort flag, as the communicator's abort does.
    pub(super) fn abort(&self, rank: usize) {
        // SAFETY: the flag is this fabric's live, 8-byte aligned word; lanes read it only
        // atomically, as a u32, as here.
        unsafe { emulate::word32(self.ctl[rank].abort.addr()) }.store(1, Ordering::Release);
    }

    /// Whether `rank`'s abort flag is raised.
    pub(super) fn aborted(&self, rank: usize) -> bool {
        self.ctl[rank].abort.word(0) as u32 != 0
    }

    /// Whether `rank`'s first-failure claim was taken.
    pub(super) fn claimed(&self, rank: usize) -> bool {
        self.ctl[rank].claim.word(0) as u32 != 0
    }

    /// Whether `rank`'s end of `key` (sending or not) says a wait on it is under way.
    pub(super) fn waiting(&self, rank: usize, key: ConnKey, send: bool) -> bool {
        self.ends[&(rank, key, send)].bytes.word(2) != 0
    }

    /// Makes `rank`'s next launch operation `seq` again, as a CUDA graph's replay is.
    pub(super) fn replay_as(&self, rank: usize, seq: u64) {
        self.ctl[rank].launches.store(seq - 1, Ordering::Relaxed);
    }

    /// `rank`'s operation words: the last operation its kernels started and finished.
    pub(super) fn ops(&self, rank: usize) -> (u64, u64) {
        let w = &self.ctl[rank].ops;
        (w.word(0), w.word(1))
    }

    /// `rank`'s report.
    pub(super) fn report(&self, rank: usize) -> Report {
        let r = &self.ctl[rank].report;
        use emulate::report_field as f;
        let half = |off: u64| {
            let w = r.word(off as usize / 8);
            if off.is_multiple_of(8) {
                w as u32
            } else {
                (w >> 32) as u32
            }
        };
        Report {
            code: Status::from_code(half(f::CODE)),
            lane: half(f::LANE),
            peer: half(f::PEER),
            channel: half(f::CHANNEL),
            step: r.word(f::STEP as usize / 8),
            waiting: r.word(f::WAITING as usize / 8),
        }
    }

    /// The counters of `rank`'s end of `key`.
    pub(super) fn counters(&self, rank: usize, key: ConnKey, send: bool) -> Counters {
        let e = &self.ends[&(rank, key, send)];
        Counters {
            slots: e.step.word(0),
            bytes: e.step.word(1),
            live: e.bytes.word(1),
        }
    }

    /// Every end: (rank, key, sending).
    pub(super) fn ends(&self) -> Vec<(usize, ConnKey, bool)> {
        self.ends.keys().copied().collect()
    }

    /// `(tail, head)` of the link `rank`'s end `key` belongs to.
    pub(super) fn flags(&self, rank: usize, key: ConnKey, send: bool) -> (u64, u64) {
        let l = &self.links[&Fabric::link_key(rank, key, send)];
        (l.tail.word(0), l.head.word(0))
    }
}
