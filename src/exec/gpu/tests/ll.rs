//! The one-shot LL all-reduce on the kernel model ([`emulate::ll`]): argument blocks built by
//! [`ll::encode`] with host addresses, every rank at once, operations back to back so epochs
//! cross both halves of the areas and several chunks; results against a host reference; a
//! silent peer and an abort.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::super::emulate;
use super::super::ll::{self, LlOp};
use super::super::program::Control;
use super::fabric::Words;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{
    self, DIRECT_FLAGS_BYTES, LL_AREA_BYTES, LL_CHUNK_BYTES, LL_STATE_BYTES, REPORT_BYTES, Status,
};
use crate::dtype::DataType;
use crate::redop::RedOp;

/// LL areas (one per ordered pair of ranks, each followed by the direct area's flags), states
/// and control blocks of `n` ranks.
pub(super) struct LlFabric {
    pub(super) n: usize,
    /// (from, to): `to`'s area for `from`'s lines.
    areas: BTreeMap<(usize, usize), Words>,
    pub(super) state: Vec<Words>,
    /// (rank, peer, sending): that end's `u64[2]` counters and their live copy.
    pub(super) counts: BTreeMap<(usize, usize, bool), [Words; 2]>,
    /// Per rank: report, abort flag, claim, operation words.
    pub(super) ctl: Vec<[Words; 4]>,
    /// Per rank: its last operation's number.
    launches: Vec<AtomicU64>,
    timeout: Duration,
}

impl LlFabric {
    pub(super) fn new(n: usize, timeout: Duration) -> LlFabric {
        let mut areas = BTreeMap::new();
        for from in 0..n {
            for to in (0..n).filter(|&t| t != from) {
                areas.insert(
                    (from, to),
                    Words::zeroed(LL_AREA_BYTES + DIRECT_FLAGS_BYTES),
                );
            }
        }
        let mut counts = BTreeMap::new();
        for r in 0..n {
            for p in (0..n).filter(|&p| p != r) {
                for send in [true, false] {
                    counts.insert((r, p, send), [Words::zeroed(16), Words::zeroed(24)]);
                }
            }
        }
        LlFabric {
            n,
            counts,
            areas,
            state: (0..n).map(|_| Words::zeroed(LL_STATE_BYTES)).collect(),
            ctl: (0..n)
                .map(|_| {
                    [
                        Words::zeroed(REPORT_BYTES),
                        Words::zeroed(8),
                        Words::zeroed(8),
                        Words::zeroed(16),
                    ]
                })
                .collect(),
            launches: (0..n).map(|_| AtomicU64::new(0)).collect(),
            timeout,
        }
    }

    fn args(&self, rank: usize, src: u64, dst: u64, bytes: usize, spec: &ReduceSpec) -> Vec<u8> {
        self.encoded(rank, &self.op(rank, src, dst, bytes), 0, spec)
    }

    /// `rank`'s LL all-reduce of `bytes` bytes from `src` into `dst` over this fabric.
    pub(super) fn op(&self, rank: usize, src: u64, dst: u64, bytes: usize) -> LlOp {
        let area = |from, to| self.areas.get(&(from, to)).map_or(0, Words::addr);
        LlOp {
            src,
            dst,
            bytes,
            mode: crate::device::cuda::abi::DirectMode::AllReduce,
            root: 0,
            state: self.state[rank].addr(),
            out: (0..self.n).map(|r| area(rank, r)).collect(),
            inp: (0..self.n).map(|r| area(r, rank)).collect(),
            out_counts: (0..self.n).map(|p| self.counters(rank, p, true)).collect(),
            inp_counts: (0..self.n).map(|p| self.counters(rank, p, false)).collect(),
            peer_src: Vec::new(),
            peer_dst: Vec::new(),
            send_bytes: Vec::new(),
            recv_bytes: Vec::new(),
        }
    }

    /// The argument block of `op` as `rank`'s next operation, with `unit` bytes per block.
    pub(super) fn encoded(&self, rank: usize, op: &LlOp, unit: u64, spec: &ReduceSpec) -> Vec<u8> {
        let [report, abort, claim, ops] = &self.ctl[rank];
        let ctl = Control {
            report: report.addr(),
            abort: abort.addr(),
            claim: claim.addr(),
            timeout_ns: self.timeout.as_nanos() as u64,
            // The LL kernel counts its blocks in its state, not here.
            ops: ops.addr(),
            finished: 1,
            rank: rank as u32,
            slot_bytes: 512,
        };
        let seq = self.launches[rank].fetch_add(1, Ordering::Relaxed) + 1;
        let mut args = ll::encode(op, seq, spec, &ctl).expect("encode");
        args.unit = unit;
        let mut bytes = Vec::new();
        abi::put(&mut bytes, &args);
        bytes
    }

    /// Runs the ranks in `ranks` at once on their (src, dst) buffers.
    fn run(&self, ranks: &[usize], bufs: &[(u64, u64)], bytes: usize, spec: &ReduceSpec) {
        std::thread::scope(|s| {
            for &r in ranks {
                let args = self.args(r, bufs[r].0, bufs[r].1, bytes, spec);
                let (dtype, combine) = (spec.dtype, spec.combine);
                s.spawn(move || {
                    // SAFETY: every address is memory of this fabric or the caller's buffers,
                    // alive for the scope; the model touches areas and flags only atomically.
                    let r = unsafe { emulate::ll::run(&args, dtype, combine) };
                    r.expect("decodes")
                });
            }
        });
    }

    /// Addresses of `rank`'s counters for its end with `peer` ((0, 0) for itself).
    pub(super) fn counters(&self, rank: usize, peer: usize, send: bool) -> (u64, u64) {
        self.counts
            .get(&(rank, peer, send))
            .map_or((0, 0), |[s, l]| (s.addr(), l.addr()))
    }

    /// (code, peer) of `rank`'s report.
    pub(super) fn report(&self, rank: usize) -> (Option<Status>, u32) {
        let r = &self.ctl[rank][0];
        (
            Status::from_code(r.word(0) as u32),
            (r.word(1) & 0xffff_ffff) as u32,
        )
    }
}

/// Element `i` of rank `r`'s input, as i32.
fn value(r: usize, i: usize) -> i32 {
    (i as i32 % 1000) * (r as i32 + 1) - 7
}

fn run_case(n: usize, bytes: usize, op: RedOp, in_place: bool, f: &LlFabric) {
    let dt = DataType::Int32;
    let count = bytes / 4;
    let inputs: Vec<Words> = (0..n)
        .map(|r| {
            let v: Vec<u8> = (0..count).flat_map(|i| value(r, i).to_le_bytes()).collect();
            Words::from_bytes(&v)
        })
        .collect();
    let outputs: Vec<Words> = (0..n).map(|_| Words::zeroed(bytes)).collect();
    let bufs: Vec<(u64, u64)> = (0..n)
        .map(|r| {
            let out = if in_place { &inputs[r] } else { &outputs[r] };
            (inputs[r].addr(), out.addr())
        })
        .collect();
    let spec = ReduceSpec::new(dt, op.lower(dt, n));
    f.run(&(0..n).collect::<Vec<_>>(), &bufs, bytes, &spec);
    for r in 0..n {
        assert_eq!(f.report(r).0, None, "rank {r}");
        let out = if in_place { &inputs[r] } else { &outputs[r] };
        let got = out.read(0, bytes);
        for i in 0..count {
            let xs: Vec<i32> = (0..n).map(|k| value(k, i)).collect();
            let want = match op {
                RedOp::Sum => xs.iter().fold(0i32, |a, &x| a.wrapping_add(x)),
                RedOp::Max => *xs.iter().max().unwrap(),
                RedOp::Avg => xs.iter().fold(0i32, |a, &x| a.wrapping_add(x)) / n as i32,
                _ => unreachable!(),
            };
            let g = i32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap());
            assert_eq!(g, want, "rank {r} element {i} of {count}, {op:?}, n={n}");
        }
    }
}

#[test]
fn back_to_back_all_reduces_cross_halves_and_chunks() {
    for n in [2, 3] {
        let f = LlFabric::new(n, Duration::from_secs(20));
        let mut epochs = 0u64;
        let mut moved = 0u64;
        for (i, bytes) in [4, 12, 4000, LL_CHUNK_BYTES + 44, 8, 2 * LL_CHUNK_BYTES]
            .into_iter()
            .enumerate()
        {
            let op = [RedOp::Sum, RedOp::Max, RedOp::Avg][i % 3];
            run_case(n, bytes, op, i % 2 == 1, &f);
            epochs += bytes.div_ceil(LL_CHUNK_BYTES) as u64;
            moved += bytes as u64;
            for r in 0..n {
                assert_eq!(f.state[r].word(0) & 0xffff_ffff, epochs, "rank {r}'s epoch");
                let seq = i as u64 + 1;
                let ops = &f.ctl[r][3];
                assert_eq!(
                    (ops.word(0), ops.word(1)),
                    (seq, seq),
                    "rank {r}'s operations"
                );
                for p in (0..n).filter(|&p| p != r) {
                    for send in [true, false] {
                        let [step, live] = &f.counts[&(r, p, send)];
                        assert_eq!(step.word(0), 0, "slot counts belong to the FIFO");
                        assert_eq!((step.word(1), live.word(1)), (moved, moved));
                    }
                }
            }
        }
    }
}

#[test]
fn a_silent_peer_times_out_and_an_abort_stops_the_wait() {
    let f = LlFabric::new(2, Duration::from_millis(300));
    let input = Words::from_bytes(&[1u8; 64]);
    let spec = ReduceSpec::new(DataType::Uint8, RedOp::Sum.lower(DataType::Uint8, 2));
    let t0 = std::time::Instant::now();
    f.run(&[0], &[(input.addr(), input.addr())], 64, &spec);
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(
        f.report(0),
        (Some(Status::Timeout), 1),
        "names the silent peer"
    );
    let ops = &f.ctl[0][3];
    assert_eq!(
        (ops.word(0), ops.word(1)),
        (1, 0),
        "started, never finished"
    );

    // While rank 1 waits for rank 0's lines, its receive end from rank 0 says so.
    let g = LlFabric::new(2, Duration::from_secs(600));
    let live = &g.counts[&(1, 0, false)][1];
    std::thread::scope(|s| {
        s.spawn(|| g.run(&[1], &[(0, 0), (input.addr(), input.addr())], 64, &spec));
        let t = std::time::Instant::now();
        while live.word(2) == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the wait was never marked"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        g.ctl[1][1].write(0, &1u32.to_le_bytes());
    });
    assert_eq!(g.report(1).0, Some(Status::Aborted));
    assert_eq!(live.word(2), 0, "the operation's end clears the mark");
}
