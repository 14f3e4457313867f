//! Persistent step counters: operations run back to back on the same connections continue
//! each end's slot and byte counts (NCCL's `conn->step`), as kernels launched one after another
//! must, or the second would wait for slots the first already consumed.

use std::collections::BTreeMap;

use super::case::{Case, PATIENCE, SLOT, Setup};
use super::fabric::{Counters, Fabric};
use crate::coll::{Algo, CollArgs, Func};
use crate::conn::ConnKey;
use crate::dtype::DataType;
use crate::redop::RedOp;

/// What each connection end of `setup`'s plans moves in one run: (slots, bytes), a slot per
/// `SLOT` bytes or part of it of every step.
fn per_run(setup: &Setup) -> BTreeMap<(usize, ConnKey, bool), (u64, u64)> {
    let mut m = BTreeMap::new();
    for (r, p) in setup.plans.iter().enumerate() {
        for s in p.lanes.iter().flat_map(|(_, s)| s) {
            let ends = [(s.send_key(), true), (s.recv_key(), false)];
            for (k, send) in ends.into_iter().filter_map(|(k, send)| Some((k?, send))) {
                let e = m.entry((r, k, send)).or_insert((0, 0));
                e.0 += s.bytes.div_ceil(SLOT) as u64;
                e.1 += s.bytes as u64;
            }
        }
    }
    m
}

/// Checks every end's counters against `times` runs of `per_run`, and that every link's tail
/// and head agree with its ends.
fn check_counters(f: &Fabric, want: &BTreeMap<(usize, ConnKey, bool), (u64, u64)>, times: u64) {
    assert_eq!(f.ends(), want.keys().copied().collect::<Vec<_>>());
    for (&(r, k, send), &(slots, bytes)) in want {
        let c = f.counters(r, k, send);
        let (slots, bytes) = (slots * times, bytes * times);
        let expect = Counters {
            slots,
            bytes,
            live: bytes,
        };
        assert_eq!(c, expect, "rank {r} {k:?} send={send} after {times} runs");
        assert!(
            !f.waiting(r, k, send),
            "rank {r} {k:?}: a wait is still marked"
        );
        // Every slot posted was consumed: tail and head both equal the slot count.
        assert_eq!(f.flags(r, k, send), (slots, slots), "rank {r} {k:?}");
    }
}

/// An out-of-place float sum AllReduce of `count` elements.
fn all_reduce(count: usize) -> CollArgs {
    CollArgs {
        func: Func::AllReduce,
        count,
        dtype: DataType::Float32,
        op: RedOp::Sum,
        root: 0,
        in_place: false,
    }
}

#[test]
fn back_to_back_runs_continue_the_counters() {
    let setup = Setup::new(Case {
        args: all_reduce(1009),
        n: 4,
        nch: 2,
        algo: Algo::Ring,
    });
    let want = per_run(&setup);
    assert!(
        want.values().all(|&(slots, _)| slots > 8),
        "every FIFO wraps in one run"
    );
    let mut f = Fabric::new(4, SLOT, PATIENCE);
    setup.run(&mut f);
    setup.verify(&f);
    check_counters(&f, &want, 1);
    setup.reset();
    setup.run(&mut f);
    setup.verify(&f);
    check_counters(&f, &want, 2);
}

/// Every kernel says its operation started and, once its last lane is done, finished; the
/// count of finished lanes starts again for the next kernel. A replayed CUDA graph's kernel,
/// carrying an earlier number, does not take the finished word back.
#[test]
fn kernels_report_their_operations_start_and_finish() {
    let setup = Setup::new(Case {
        args: all_reduce(3001),
        n: 3,
        nch: 4,
        algo: Algo::Ring,
    });
    assert!(
        setup.plans.iter().all(|p| p.lanes.len() > 1),
        "several blocks"
    );
    let mut f = Fabric::new(3, SLOT, PATIENCE);
    for seq in 1..=3 {
        setup.reset();
        setup.run(&mut f);
        setup.verify(&f);
        for r in 0..3 {
            assert_eq!(f.ops(r), (seq, seq), "rank {r} after operation {seq}");
        }
    }
    setup.reset();
    (0..3).for_each(|r| f.replay_as(r, 2));
    setup.run(&mut f);
    setup.verify(&f);
    for r in 0..3 {
        assert_eq!(f.ops(r), (2, 3), "rank {r} after a replay of operation 2");
    }
}
