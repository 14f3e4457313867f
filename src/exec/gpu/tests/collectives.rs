//! Every collective's real plans, encoded into device programs and run on the kernel model on
//! 1 to 4 ranks, against the host reference: every function and size, every reduction and
//! data type, every root.

use super::case::{Case, check};
use crate::coll::{Algo, CollArgs, Func};
use crate::dtype::DataType;
use crate::redop::{RedOp, Scalar};

/// The algorithms `func` has plans for.
fn algos(func: Func) -> &'static [Algo] {
    match func {
        Func::AllReduce | Func::Broadcast | Func::Reduce => &[Algo::Ring, Algo::Tree],
        Func::AllGather | Func::ReduceScatter => &[Algo::Ring],
        _ => &[Algo::Direct],
    }
}

fn args(func: Func, count: usize, dtype: DataType, op: RedOp, root: usize) -> CollArgs {
    CollArgs {
        func,
        count,
        dtype,
        op,
        root,
        in_place: false,
    }
}

/// Counts: none, one, a prime that is no multiple of 2, 3 or 4, and one that wraps every FIFO
/// several times (1009 floats are 63 slots of 64 bytes, a ring chunk 4 slots).
const COUNTS: [usize; 4] = [0, 1, 13, 1009];

#[test]
fn every_function_size_and_layout() {
    for n in 1..=4 {
        for nch in [1, 2] {
            for func in Func::ALL.into_iter().filter(|f| !f.p2p()) {
                for &algo in algos(func) {
                    for count in COUNTS {
                        for in_place in [false, true] {
                            let a = CollArgs {
                                in_place,
                                ..args(func, count, DataType::Float32, RedOp::Sum, n / 2)
                            };
                            check(Case {
                                args: a,
                                n,
                                nch,
                                algo,
                            });
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn every_reduction_and_data_type() {
    let ops = [
        RedOp::Sum,
        RedOp::Prod,
        RedOp::Max,
        RedOp::Min,
        RedOp::Avg,
        RedOp::PreMulSum(Scalar::Int(3)),
        RedOp::PreMulSum(Scalar::Float(0.5)),
    ];
    let shapes = [
        (Func::AllReduce, Algo::Ring),
        (Func::AllReduce, Algo::Tree),
        (Func::Reduce, Algo::Ring),
        (Func::Reduce, Algo::Tree),
        (Func::ReduceScatter, Algo::Ring),
    ];
    for n in [2usize, 3, 4] {
        for op in ops {
            for dtype in DataType::ALL {
                // A float average scales each value by 1/n first: exact only for n = 2^k.
                if op == RedOp::Avg && dtype.is_float() && !n.is_power_of_two() {
                    continue;
                }
                // Inputs scaled by 3 leave the integers FP8 holds exactly (9 in E5M2).
                if op == RedOp::PreMulSum(Scalar::Int(3)) && dtype.fp8().is_some() {
                    continue;
                }
                for (func, algo) in shapes {
                    let a = args(func, 67, dtype, op, n - 1);
                    check(Case {
                        args: a,
                        n,
                        nch: 2,
                        algo,
                    });
                }
            }
        }
    }
}

/// Element sizes from 1 to 8 bytes cut the same bytes into different element counts per
/// piece: every function moves every type intact.
#[test]
fn every_data_type_moves() {
    for dtype in DataType::ALL {
        for func in Func::ALL.into_iter().filter(|f| !f.p2p()) {
            for &algo in algos(func) {
                let a = args(func, 1009, dtype, RedOp::Sum, 1);
                check(Case {
                    args: a,
                    n: 3,
                    nch: 2,
                    algo,
                });
            }
        }
    }
}

#[test]
fn every_root() {
    let n = 4;
    for func in [Func::Broadcast, Func::Reduce, Func::Gather, Func::Scatter] {
        for &algo in algos(func) {
            for root in 0..n {
                for in_place in [false, true] {
                    let a = CollArgs {
                        in_place,
                        ..args(func, 101, DataType::Int32, RedOp::Max, root)
                    };
                    check(Case {
                        args: a,
                        n,
                        nch: 2,
                        algo,
                    });
                }
            }
        }
    }
}

/// Many slots in flight: a long ring AllReduce wraps every FIFO dozens of times.
#[test]
fn long_streams() {
    for (func, algo) in [
        (Func::AllReduce, Algo::Ring),
        (Func::AllReduce, Algo::Tree),
        (Func::AllGather, Algo::Ring),
        (Func::AllToAll, Algo::Direct),
    ] {
        let a = args(func, 10_007, DataType::Float32, RedOp::Sum, 0);
        check(Case {
            args: a,
            n: 4,
            nch: 2,
            algo,
        });
    }
}
