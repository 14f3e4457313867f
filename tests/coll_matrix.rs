//! Every collective × data type × operation × out-of-place/in-place on ranks as threads
//! (nranks 1, 2, 3, 4, 7, 8), for counts 0, 1, small primes, counts that are not multiples of
//! nranks, a count that spans many chunks, and buffers of 16 MiB and more; results compared
//! element by element with the sequential reference in `common`.

mod common;

use common::{
    FUNCS, TElem, all_ok, all_reduce_reference, compare, input, on_threads, ops_for, reduce_at,
};
use rnccl::Func;
use rnccl::{Communicator, DataType, RedOp};

/// Runs one case on this rank and checks its output.
fn run_case<T: TElem>(
    c: &Communicator,
    f: Func,
    op: RedOp,
    in_place: bool,
    count: usize,
    seed: u64,
) -> Result<(), String> {
    let (r, n) = (c.rank(), c.nranks());
    let root = (seed as usize) % n;
    let what = format!(
        "{f:?} {} {op} count={count} in_place={in_place} n={n} root={root} rank={r}",
        T::DTYPE
    );
    let err = |e: rnccl::Error| format!("{what}: {e}");
    let exact = |v: T| (v, T::mag(v));
    match f {
        Func::AllReduce => {
            let inp = input::<T>(r, count, seed, op);
            let out = if in_place {
                let mut b = inp.clone();
                c.all_reduce_in_place(&mut b, op).map_err(err)?;
                b
            } else {
                let mut o = vec![T::default(); count];
                c.all_reduce(&inp, &mut o, op).map_err(err)?;
                o
            };
            let want = all_reduce_reference::<T>(n, count, seed, op);
            compare(&what, &out, n, |i| want[i])
        }
        Func::Broadcast => {
            let inp = input::<T>(r, count, seed, op);
            let out = if in_place {
                let mut b = inp.clone();
                c.broadcast_in_place(&mut b, root).map_err(err)?;
                b
            } else {
                let mut o = vec![T::default(); count];
                c.broadcast(&inp, &mut o, root).map_err(err)?;
                o
            };
            compare(&what, &out, n, |i| exact(T::value(root, i, seed, op)))
        }
        Func::Reduce => {
            let inp = input::<T>(r, count, seed, op);
            let out = if in_place {
                let mut b = inp.clone();
                c.reduce_in_place(&mut b, op, root).map_err(err)?;
                b
            } else {
                let mut o = vec![T::default(); if r == root { count } else { 0 }];
                c.reduce(&inp, &mut o, op, root).map_err(err)?;
                o
            };
            if r == root {
                compare(&what, &out, n, |i| reduce_at::<T>(n, i, seed, op))
            } else {
                Ok(())
            }
        }
        Func::AllGather => {
            let inp = input::<T>(r, count, seed, op);
            let mut out = vec![T::default(); n * count];
            if in_place {
                out[r * count..(r + 1) * count].copy_from_slice(&inp);
                c.all_gather_in_place(&mut out).map_err(err)?;
            } else {
                c.all_gather(&inp, &mut out).map_err(err)?;
            }
            compare(&what, &out, n, |i| {
                exact(T::value(i / count, i % count, seed, op))
            })
        }
        Func::ReduceScatter => {
            let inp = input::<T>(r, n * count, seed, op);
            let out = if in_place {
                let mut b = inp.clone();
                c.reduce_scatter_in_place(&mut b, op).map_err(err)?;
                b[r * count..(r + 1) * count].to_vec()
            } else {
                let mut o = vec![T::default(); count];
                c.reduce_scatter(&inp, &mut o, op).map_err(err)?;
                o
            };
            compare(&what, &out, n, |i| {
                reduce_at::<T>(n, r * count + i, seed, op)
            })
        }
        Func::AllToAll => {
            let inp = input::<T>(r, n * count, seed, op);
            let out = if in_place {
                let mut b = inp.clone();
                c.all_to_all_in_place(&mut b).map_err(err)?;
                b
            } else {
                let mut o = vec![T::default(); n * count];
                c.all_to_all(&inp, &mut o).map_err(err)?;
                o
            };
            compare(&what, &out, n, |i| {
                exact(T::value(i / count, r * count + i % count, seed, op))
            })
        }
        Func::Gather => {
            let inp = input::<T>(r, count, seed, op);
            let out = if in_place {
                let mut b = if r == root {
                    vec![T::default(); n * count]
                } else {
                    inp.clone()
                };
                if r == root {
                    b[r * count..(r + 1) * count].copy_from_slice(&inp);
                }
                c.gather_in_place(&mut b, root).map_err(err)?;
                b
            } else {
                let mut o = vec![T::default(); if r == root { n * count } else { 0 }];
                c.gather(&inp, &mut o, root).map_err(err)?;
                o
            };
            if r == root {
                compare(&what, &out, n, |i| {
                    exact(T::value(i / count, i % count, seed, op))
                })
            } else {
                Ok(())
            }
        }
        Func::Scatter => {
            let inp = if r == root {
                input::<T>(r, n * count, seed, op)
            } else {
                Vec::new()
            };
            let out = if in_place {
                let mut b = if r == root {
                    inp.clone()
                } else {
                    vec![T::default(); count]
                };
                c.scatter_in_place(&mut b, root).map_err(err)?;
                if r == root {
                    b[r * count..(r + 1) * count].to_vec()
                } else {
                    b
                }
            } else {
                let mut o = vec![T::default(); count];
                c.scatter(&inp, &mut o, root).map_err(err)?;
                o
            };
            compare(&what, &out, n, |i| {
                exact(T::value(root, r * count + i, seed, op))
            })
        }
        _ => {
            // A ring exchange: send to rank+1, receive from rank-1, in one group (self on 1 rank).
            let inp = input::<T>(r, count, seed, op);
            let mut out = vec![T::default(); count];
            let mut g = rnccl::group_start();
            g.send(c, &inp, (r + 1) % n).map_err(err)?;
            g.recv(c, &mut out, (r + n - 1) % n).map_err(err)?;
            g.end().map_err(err)?;
            compare(&what, &out, n, |i| {
                exact(T::value((r + n - 1) % n, i, seed, op))
            })
        }
    }
}

fn case(
    c: &Communicator,
    dt: DataType,
    f: Func,
    op: RedOp,
    in_place: bool,
    count: usize,
    seed: u64,
) -> Result<(), String> {
    with_type!(dt, run_case(c, f, op, in_place, count, seed))
}

/// The full small-count matrix on `n` ranks.
fn matrix(n: usize) {
    let counts = [0usize, 1, 2, 7, 13, 251, 1021, 4099];
    all_ok(on_threads(n, &[], |c| {
        let mut seed = 1u64;
        for dt in DataType::ALL {
            for f in FUNCS {
                let ops = if f.reduces() {
                    ops_for(dt)
                } else {
                    vec![RedOp::Sum]
                };
                for op in ops {
                    for in_place in [false, true] {
                        if f == Func::Send && in_place {
                            continue;
                        }
                        for count in counts {
                            seed += 1;
                            case(c, dt, f, op, in_place, count, seed)?;
                        }
                    }
                }
            }
            // A count that spans many ring chunks and channels.
            for f in FUNCS {
                for in_place in [false, true] {
                    seed += 1;
                    case(
                        c,
                        dt,
                        f,
                        if f.reduces() { RedOp::Max } else { RedOp::Sum },
                        in_place,
                        100_003,
                        seed,
                    )?;
                }
            }
        }
        Ok(())
    }));
}

#[test]
fn matrix_1_rank() {
    matrix(1);
}

#[test]
fn matrix_2_ranks() {
    matrix(2);
}

#[test]
fn matrix_3_ranks() {
    matrix(3);
}

#[test]
fn matrix_4_ranks() {
    matrix(4);
}

#[test]
fn matrix_7_ranks() {
    matrix(7);
}

#[test]
fn matrix_8_ranks() {
    matrix(8);
}

/// Buffers of 16 MiB and more: every collective in float32 (sum, in both places), and every data
/// type through AllReduce and ReduceScatter, on one rank, two, three (blocks that do not divide)
/// and eight. The small-size matrices above cover every rank count; at this size each rank
/// count costs CI about 8 s per rank on two cores.
#[test]
fn sixteen_mebibyte_buffers() {
    for n in [1, 2, 3, 8] {
        all_ok(on_threads(n, &[], |c| {
            let mut seed = 1000u64;
            for f in FUNCS {
                for in_place in [false, true] {
                    if f == Func::Send && in_place {
                        continue;
                    }
                    seed += 1;
                    // Per-rank blocks for the block-shaped functions, so every buffer is >= 16 MiB.
                    let count = (16 << 20) / 4 + 3;
                    let count = match f {
                        Func::AllGather
                        | Func::AllToAll
                        | Func::Gather
                        | Func::Scatter
                        | Func::ReduceScatter => count / c.nranks() + 1,
                        _ => count,
                    };
                    case(c, DataType::Float32, f, RedOp::Sum, in_place, count, seed)?;
                }
            }
            for dt in DataType::ALL {
                seed += 1;
                let count = (16 << 20) / dt.size() + 5;
                case(c, dt, Func::AllReduce, RedOp::Sum, false, count, seed)?;
                case(
                    c,
                    dt,
                    Func::ReduceScatter,
                    RedOp::Max,
                    true,
                    count / c.nranks() + 1,
                    seed,
                )?;
            }
            Ok(())
        }));
    }
}
