//! The symmetric kernels on the kernel model ([`emulate::sym`]): argument blocks built by
//! [`ll::encode`] with host addresses the way [`super::super::GpuComm::sym_op`] builds them
//! (every rank's buffers at the same offsets of its "window"), every rank at once, operations
//! back to back so the blocks' counts carry on, in and out of place, against a host
//! reference; a peer that never comes times out, named.

use std::time::Duration;

use super::super::emulate;
use super::super::ll::sym_plan;
use super::super::windows::SymKernels;
use super::fabric::Words;
use super::ll::LlFabric;
use crate::config::Config;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{DirectMode, SYM_COUNT_WORD, Status};
use crate::dtype::DataType;
use crate::func::Func;
use crate::redop::RedOp;

/// Element `i` of rank `r`'s input.
fn value(r: usize, i: usize) -> i32 {
    (i as i32 % 1013) * (r as i32 + 2) - 11
}

/// The mode and byte count (as `LlOp::bytes`) of `func` on `count` elements per rank's part.
fn mode(func: Func) -> DirectMode {
    match func {
        Func::AllReduce => DirectMode::SymAllReduce,
        Func::ReduceScatter => DirectMode::SymReduceScatter,
        _ => DirectMode::SymAllGather,
    }
}

/// Runs `func` over the fabric's ranks in `ranks` on `count` int32 elements (the all-reduce's
/// buffer, the reduce-scatter's output, the all-gather's input) with `op`; returns every
/// rank's window (input at 0 and output after it, or both in place as NCCL lays them out) and
/// where its output is.
fn run(
    f: &LlFabric,
    ranks: &[usize],
    func: Func,
    count: usize,
    op: RedOp,
    in_place: bool,
    kernels: &SymKernels,
) -> Vec<(Words, usize)> {
    let n = f.n;
    let dt = DataType::Int32;
    let part = count * 4;
    let (in_bytes, out_bytes) = match func {
        Func::ReduceScatter => (n * part, part),
        Func::AllGather => (part, n * part),
        _ => (part, part),
    };
    // Offsets of the input and the output in every rank's window.
    let at = |r: usize| match (func, in_place) {
        (_, false) => (0, in_bytes),
        (Func::ReduceScatter, true) => (0, r * part),
        (Func::AllGather, true) => (r * part, 0),
        _ => (0, 0),
    };
    let windows: Vec<(Words, usize)> = (0..n)
        .map(|r| {
            let w = Words::zeroed(in_bytes + out_bytes);
            let data: Vec<u8> = (0..in_bytes / 4)
                .flat_map(|i| value(r, i).to_le_bytes())
                .collect();
            w.write(at(r).0, &data);
            (w, at(r).1)
        })
        .collect();
    let spec = ReduceSpec::new(dt, op.lower(dt, n));
    let m = mode(func);
    let plan = sym_plan(m, part, n, kernels, usize::MAX);
    std::thread::scope(|s| {
        for &r in ranks {
            let (i, o) = at(r);
            let base = windows[r].0.addr();
            let mut op = f.op(r, base + i as u64, base + o as u64, part);
            op.mode = m;
            op.peer_src = windows.iter().map(|w| w.0.addr() + i as u64).collect();
            op.peer_dst = windows.iter().map(|w| w.0.addr() + o as u64).collect();
            let args = f.encoded(r, &op, plan.unit as u64, &spec);
            s.spawn(move || {
                // SAFETY: every address is memory of this fabric or of the windows, alive for
                // the scope; the model touches flags and counters only atomically.
                unsafe { emulate::sym::run(&args, plan.blocks, dt, spec.combine) }.expect("decodes")
            });
        }
    });
    windows
}

/// What rank `r` must find at output element `i`.
fn want(func: Func, op: RedOp, n: usize, count: usize, r: usize, i: usize) -> i32 {
    let fold = |xs: Vec<i32>| match op {
        RedOp::Sum => xs.iter().fold(0i32, |a, &x| a.wrapping_add(x)),
        RedOp::Max => *xs.iter().max().unwrap(),
        _ => unreachable!(),
    };
    match func {
        Func::AllReduce => fold((0..n).map(|q| value(q, i)).collect()),
        Func::ReduceScatter => fold((0..n).map(|q| value(q, r * count + i)).collect()),
        _ => value(i / count, i % count),
    }
}

fn kernels(ctas: &str) -> SymKernels {
    SymKernels::from_config(&Config::from_pairs(&[("NCCL_SYM_CTAS", ctas)]).unwrap()).unwrap()
}

#[test]
fn back_to_back_collectives_in_and_out_of_place() {
    for n in [2, 3] {
        let f = LlFabric::new(n, Duration::from_secs(20));
        // Up to three blocks; the last ranks of a small all-reduce get no bytes in them and
        // still take part in the barriers.
        let k = kernels("3");
        let mut ops = 0u64;
        let mut counted = [0u64; 3];
        for func in [Func::AllReduce, Func::ReduceScatter, Func::AllGather] {
            for (j, count) in [1usize, 7, 1021, 5003].into_iter().enumerate() {
                let in_place = j % 2 == 1;
                let op = if func != Func::AllGather && j >= 2 {
                    RedOp::Max
                } else {
                    RedOp::Sum
                };
                let w = run(
                    &f,
                    &(0..n).collect::<Vec<_>>(),
                    func,
                    count,
                    op,
                    in_place,
                    &k,
                );
                ops += 1;
                let blocks = sym_plan(mode(func), count * 4, n, &k, usize::MAX).blocks as usize;
                counted.iter_mut().take(blocks).for_each(|c| *c += 1);
                let outs = if func == Func::AllGather {
                    n * count
                } else {
                    count
                };
                for (r, (win, at)) in w.iter().enumerate() {
                    assert_eq!(f.report(r).0, None, "rank {r}");
                    let got = win.read(*at, outs * 4);
                    for i in 0..outs {
                        let g = i32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap());
                        assert_eq!(
                            g,
                            want(func, op, n, count, r, i),
                            "{func:?} {op:?} n={n} count={count} in_place={in_place} rank \
                             {r} element {i}"
                        );
                    }
                    let o = &f.ctl[r][3];
                    assert_eq!((o.word(0), o.word(1)), (ops, ops), "rank {r}'s operations");
                    for (b, &c) in counted.iter().enumerate() {
                        assert_eq!(
                            f.state[r].word(SYM_COUNT_WORD + b),
                            c,
                            "rank {r} block {b} counts the operations it ran in"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_silent_peer_times_out_named() {
    let f = LlFabric::new(2, Duration::from_millis(300));
    let t0 = std::time::Instant::now();
    run(
        &f,
        &[0],
        Func::AllReduce,
        4096,
        RedOp::Sum,
        false,
        &kernels("2"),
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(
        f.report(0),
        (Some(Status::Timeout), 1),
        "names the peer that never came"
    );
    let o = &f.ctl[0][3];
    assert_eq!((o.word(0), o.word(1)), (1, 0), "started, never finished");
}
