//! The direct protocol on a simulated fabric: every rank's [`DirectOp`] runs in one thread over
//! heap pages standing in for the shared mappings, interleaved round robin, so the protocol is
//! checked for results, fallbacks, mismatches and deadlock freedom deterministically.

use std::sync::Arc;

use super::*;
use crate::device::MemKind;
use crate::device::backend_for;
use crate::dtype::DataType;
use crate::redop::RedOp;

/// Page-aligned zeroed heap memory standing in for a shared mapping.
struct HeapPages {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: plain heap memory; the tests drive every rank from one thread.
unsafe impl Send for HeapPages {}
// SAFETY: as above.
unsafe impl Sync for HeapPages {}

impl HeapPages {
    fn new(len: usize) -> Arc<HeapPages> {
        let layout = std::alloc::Layout::from_size_align(len.max(1).next_multiple_of(4096), 4096)
            .expect("layout");
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Arc::new(HeapPages { ptr, layout })
    }

    // The pages stand in for shared memory that several ranks write through their own views;
    // the tests take one view at a time.
    #[allow(clippy::mut_from_ref)]
    fn words(&self) -> &mut [u32] {
        // SAFETY: the allocation holds layout.size() bytes, 4096-aligned; tests use one view at
        // a time.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u32>(), self.layout.size() / 4) }
    }
}

impl Drop for HeapPages {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

// SAFETY: page aligned, layout.size() bytes, owned until drop.
unsafe impl Mapping for HeapPages {
    fn base(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
}

/// A simulated communicator: control blocks and one window per rank holding its input then its
/// output.
struct Fabric {
    n: usize,
    controls: Arc<ControlBlocks>,
    windows: Vec<Arc<HeapPages>>,
    reads: Vec<Arc<LinkCounters>>,
}

impl Fabric {
    fn new(n: usize, window_bytes: usize) -> Fabric {
        let pages: Vec<Arc<dyn Mapping>> = (0..n)
            .map(|_| HeapPages::new(CONTROL_BYTES) as Arc<dyn Mapping>)
            .collect();
        Fabric {
            n,
            controls: Arc::new(ControlBlocks::new(pages).unwrap()),
            windows: (0..n).map(|_| HeapPages::new(window_bytes)).collect(),
            reads: (0..n).map(|_| Arc::new(LinkCounters::default())).collect(),
        }
    }

    fn view(&self) -> Vec<WindowView> {
        vec![WindowView {
            id: 1,
            ranks: self
                .windows
                .iter()
                .map(|w| w.clone() as Arc<dyn Mapping>)
                .collect(),
        }]
    }

    fn op(&self, rank: usize, seq: u64, a: Shape, op: RedOp, send: Place, recv: Place) -> DirectOp {
        let spec = ReduceSpec::new(DataType::Uint32, op.lower(DataType::Uint32, self.n));
        let args = DirectArgs {
            rank,
            seq,
            func: a.func,
            count: a.count,
            root: a.root,
            signature: a.func as u64 | (a.root as u64) << 8,
            spec,
            backend: backend_for(MemKind::Host).unwrap(),
            send,
            recv,
            stream_output: rank % 2 == 1,
        };
        let fallback = Fallback {
            ops: Vec::new(),
            lanes: Vec::new(),
        };
        DirectOp::new(
            args,
            self.controls.clone(),
            self.view(),
            fallback,
            self.reads.clone(),
        )
    }
}

/// Progresses every op round robin until all are done; panics on a stall.
fn run_all(ops: &mut [DirectOp]) {
    for round in 0.. {
        assert!(round < 100_000, "stalled: {:?}", waits(ops));
        let mut all = true;
        for op in ops.iter_mut() {
            if !op.done() {
                match op.progress().expect("progress") {
                    Progress::Moved(_) => {}
                    Progress::Fallback(_) => panic!("unexpected fallback"),
                }
                all &= op.done();
            }
        }
        if all {
            return;
        }
    }
}

fn waits(ops: &[DirectOp]) -> Vec<Option<(usize, &'static str)>> {
    ops.iter().map(DirectOp::waiting_for).collect()
}

/// Input/output element counts of `func` on `n` ranks for rank `r` (nccl.h shapes).
fn lens(func: Func, count: usize, n: usize, r: usize, root: usize) -> (usize, usize) {
    let i = func.input_elems(count, n).unwrap();
    let o = func.output_elems(count, n).unwrap();
    match func {
        Func::Reduce | Func::Gather if r != root => (i, 0),
        Func::Broadcast | Func::Scatter if r != root => (0, o),
        _ => (i, o),
    }
}

fn input_value(r: usize, i: usize) -> u32 {
    (r as u32 + 1) * 1000 + (i as u32 % 997)
}

fn check_func(func: Func, n: usize, count: usize, op: RedOp) {
    let root = n / 2;
    let (max_in, max_out) = (
        func.input_elems(count, n).unwrap(),
        func.output_elems(count, n).unwrap(),
    );
    let f = Fabric::new(n, (max_in + max_out) * 4);
    let shape = Shape {
        func,
        count,
        esize: 4,
        nranks: n,
        root,
    };
    let mut ops = Vec::new();
    for r in 0..n {
        let (il, ol) = lens(func, count, n, r, root);
        let w = f.windows[r].words();
        for (i, x) in w[..il].iter_mut().enumerate() {
            *x = input_value(r, i);
        }
        let place = |off: usize, len: usize| Place {
            win: if len == 0 { 0 } else { 1 },
            off: (off * 4) as u64,
            len: (len * 4) as u64,
        };
        ops.push(f.op(r, 1, shape, op, place(0, il), place(max_in, ol)));
    }
    run_all(&mut ops);
    for r in 0..n {
        let (_, ol) = lens(func, count, n, r, root);
        let out = &f.windows[r].words()[max_in..max_in + ol];
        for (i, &got) in out.iter().enumerate() {
            let want = expected(func, n, count, op, r, root, i);
            assert_eq!(got, want, "{func} n={n} count={count} rank {r} element {i}");
        }
    }
}

fn combine(op: RedOp, vals: &[u32]) -> u32 {
    match op {
        RedOp::Sum => vals.iter().fold(0u32, |a, &b| a.wrapping_add(b)),
        RedOp::Max => *vals.iter().max().unwrap(),
        RedOp::Avg => vals.iter().fold(0u32, |a, &b| a.wrapping_add(b)) / vals.len() as u32,
        _ => unreachable!("not used here"),
    }
}

fn expected(func: Func, n: usize, count: usize, op: RedOp, r: usize, root: usize, i: usize) -> u32 {
    let all = |j: usize| (0..n).map(|q| input_value(q, j)).collect::<Vec<_>>();
    match func {
        Func::AllReduce | Func::Reduce => combine(op, &all(i)),
        Func::ReduceScatter => combine(op, &all(r * count + i)),
        Func::AllGather | Func::Gather => input_value(i / count, i % count),
        Func::Broadcast => input_value(root, i),
        Func::Scatter => input_value(root, r * count + i),
        _ => unreachable!("no direct form"),
    }
}

#[test]
fn every_direct_collective_on_simulated_ranks() {
    let funcs = [
        Func::AllReduce,
        Func::ReduceScatter,
        Func::Reduce,
        Func::AllGather,
        Func::Broadcast,
        Func::Gather,
        Func::Scatter,
    ];
    for func in funcs {
        for n in [1, 2, 3, 5] {
            // 100_003 elements span several 16 KiB+ chunks per slice, with ragged ends.
            for count in [1, 7, 4096, 100_003] {
                check_func(func, n, count, RedOp::Sum);
            }
        }
    }
    for op in [RedOp::Max, RedOp::Avg] {
        check_func(Func::AllReduce, 3, 50_000, op);
        check_func(Func::ReduceScatter, 4, 9_999, op);
    }
}

#[test]
fn in_place_all_reduce_reads_and_writes_one_buffer() {
    let (n, count) = (3, 70_000);
    let f = Fabric::new(n, count * 4);
    let shape = Shape {
        func: Func::AllReduce,
        count,
        esize: 4,
        nranks: n,
        root: 0,
    };
    let whole = Place {
        win: 1,
        off: 0,
        len: (count * 4) as u64,
    };
    let mut ops = Vec::new();
    for r in 0..n {
        for (i, x) in f.windows[r].words()[..count].iter_mut().enumerate() {
            *x = input_value(r, i);
        }
        ops.push(f.op(r, 1, shape, RedOp::Sum, whole, whole));
    }
    run_all(&mut ops);
    for r in 0..n {
        for (i, &got) in f.windows[r].words()[..count].iter().enumerate() {
            assert_eq!(
                got,
                combine(
                    RedOp::Sum,
                    &(0..n).map(|q| input_value(q, i)).collect::<Vec<_>>()
                )
            );
        }
    }
}

fn shape(func: Func, count: usize, n: usize) -> Shape {
    Shape {
        func,
        count,
        esize: 4,
        nranks: n,
        root: 0,
    }
}

fn whole(bytes: usize) -> Place {
    Place {
        win: 1,
        off: 0,
        len: bytes as u64,
    }
}

#[test]
fn one_rank_on_fifos_turns_every_rank_to_its_fallback() {
    let (n, count) = (3, 1024);
    let f = Fabric::new(n, count * 4);
    let s = shape(Func::AllReduce, count, n);
    let mut ops: Vec<DirectOp> = (0..2)
        .map(|r| f.op(r, 1, s, RedOp::Sum, whole(count * 4), whole(count * 4)))
        .collect();
    for op in &mut ops {
        assert!(matches!(op.progress().unwrap(), Progress::Moved(true)));
    }
    for op in &ops {
        assert_eq!(op.waiting_for(), Some((2, "to start the operation")));
    }
    f.controls.announce_fifo(2, 1);
    for op in &mut ops {
        assert!(matches!(op.progress().unwrap(), Progress::Fallback(_)));
    }
}

#[test]
fn operations_in_sequence_reuse_the_control_blocks() {
    let (n, count) = (2, 40_000);
    let f = Fabric::new(n, 2 * count * 4);
    let s = shape(Func::AllReduce, count, n);
    for seq in 1..=3u64 {
        let mut ops = Vec::new();
        for r in 0..n {
            for (i, x) in f.windows[r].words()[..count].iter_mut().enumerate() {
                *x = input_value(r, i) + seq as u32;
            }
            let recv = Place {
                win: 1,
                off: (count * 4) as u64,
                len: (count * 4) as u64,
            };
            ops.push(f.op(r, seq, s, RedOp::Sum, whole(count * 4), recv));
        }
        run_all(&mut ops);
        let out = &f.windows[1].words()[count..2 * count];
        assert_eq!(
            out[5],
            input_value(0, 5) + input_value(1, 5) + 2 * seq as u32
        );
    }
}

#[test]
fn mismatched_or_short_buffers_are_errors_naming_the_rank() {
    let n = 2;
    let f = Fabric::new(n, 8192);
    let mut a = f.op(
        0,
        1,
        shape(Func::AllReduce, 100, n),
        RedOp::Sum,
        whole(400),
        whole(400),
    );
    let mut b = f.op(
        1,
        1,
        shape(Func::AllReduce, 90, n),
        RedOp::Sum,
        whole(360),
        whole(360),
    );
    assert!(matches!(a.progress().unwrap(), Progress::Moved(true)));
    let e = b.progress().err().expect("count mismatch").to_string();
    assert!(e.contains("rank 0 called a different collective"), "{e}");

    let f = Fabric::new(n, 8192);
    let mut a = f.op(
        0,
        1,
        shape(Func::AllGather, 100, n),
        RedOp::Sum,
        whole(400),
        whole(800),
    );
    // Rank 1's receive buffer is too short for 2 × 100 elements.
    let mut b = f.op(
        1,
        1,
        shape(Func::AllGather, 100, n),
        RedOp::Sum,
        whole(400),
        whole(400),
    );
    let _ = a.progress().unwrap();
    let e = b.progress().err().expect("short buffer").to_string();
    assert!(e.contains("rank 1's buffer holds 400 bytes"), "{e}");

    // Buffers of 16 KiB in windows of 4 KiB.
    let f = Fabric::new(n, 4096);
    let s = shape(Func::AllReduce, 4096, n);
    let mut a = f.op(0, 1, s, RedOp::Sum, whole(1 << 14), whole(1 << 14));
    let mut b = f.op(1, 1, s, RedOp::Sum, whole(1 << 14), whole(1 << 14));
    let _ = a.progress().unwrap();
    let e = b.progress().err().expect("past the window").to_string();
    assert!(e.contains("reaches past its window of 4096 bytes"), "{e}");
}

#[test]
fn a_rank_that_stops_is_the_one_waited_for() {
    let (n, count) = (3, 200_000);
    let f = Fabric::new(n, 2 * count * 4);
    let s = shape(Func::AllReduce, count, n);
    let recv = Place {
        win: 1,
        off: (count * 4) as u64,
        len: (count * 4) as u64,
    };
    let mut ops: Vec<DirectOp> = (0..n)
        .map(|r| f.op(r, 1, s, RedOp::Sum, whole(count * 4), recv))
        .collect();
    // Rank 2 enters, then stops: ranks 0 and 1 reduce their slices and copy each other's,
    // then wait on rank 2's slice.
    let _ = ops[2].progress().unwrap();
    for _ in 0..100 {
        for op in &mut ops[..2] {
            let _ = op.progress().unwrap();
        }
    }
    assert_eq!(ops[0].waiting_for(), Some((2, "to reduce its slice")));
    // Rank 0's own slice and rank 1's: elements 0..133_333.
    assert_eq!(ops[0].bytes_done(), 133_333 * 4);
    let (total, done) = ops[0].steps();
    assert!(done < total, "{done}/{total}");
    run_all(&mut ops);
    assert!(ops.iter().all(|o| o.steps().0 == o.steps().1));
    assert!(ops.iter().all(|o| o.bytes_done() == count * 4));
}
