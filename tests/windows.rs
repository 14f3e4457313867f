//! Collectives on registered windows (`mem_alloc` + `window_register`): every collective with a
//! direct form × data type × operation × in-place/out-of-place for nranks 2, 3, 4 as threads,
//! compared with the sequential reference; FIFO traffic must stay zero above the direct size
//! threshold (which proves the direct path ran) and grow below it and for PreMulSum, whose
//! scalars ranks may choose apart (tested with a different scalar per rank). Then the
//! fallbacks: a rank with heap buffers makes every rank use its FIFO plan, collectives without a
//! direct form keep working on window memory, and mismatched calls are errors naming the rank.

mod common;

use common::{TElem, all_ok, compare, on_threads, ops_for, reduce_at};
use half::{bf16, f16};
use rnccl::Func;
use rnccl::comm::DIRECT_MIN_BYTES;
use rnccl::stats::Path;
use rnccl::{Communicator, DataType, HostMem, RedOp, Scalar, mem_alloc};

const FUNCS: [Func; 7] = [
    Func::AllReduce,
    Func::ReduceScatter,
    Func::Reduce,
    Func::AllGather,
    Func::Broadcast,
    Func::Gather,
    Func::Scatter,
];

fn fifo_bytes(c: &Communicator) -> u64 {
    path_bytes(c, |p| p != Path::Window)
}

fn window_bytes(c: &Communicator) -> u64 {
    path_bytes(c, |p| p == Path::Window)
}

fn path_bytes(c: &Communicator, pick: impl Fn(Path) -> bool) -> u64 {
    c.traffic()
        .iter()
        .filter(|l| pick(l.transport))
        .map(|l| l.bytes)
        .sum()
}

/// Writes rank `r`'s input of `len` elements at `dst`.
fn fill<T: TElem>(dst: &mut [T], r: usize, seed: u64, op: RedOp, first: usize) {
    for (i, d) in dst.iter_mut().enumerate() {
        *d = T::value(r, first + i, seed, op);
    }
}

/// One case over the window buffers `send` and `recv` (each at least `n × count` elements).
#[allow(clippy::too_many_arguments)]
fn run_case<T: TElem>(
    c: &Communicator,
    send: &mut HostMem<T>,
    recv: &mut HostMem<T>,
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
    let all = n * count;
    match f {
        Func::AllReduce | Func::Reduce | Func::Broadcast => {
            let out: &mut [T] = &mut recv[..count];
            if in_place {
                fill(out, r, seed, op, 0);
                match f {
                    Func::AllReduce => c.all_reduce_in_place(out, op),
                    Func::Reduce => c.reduce_in_place(out, op, root),
                    _ => c.broadcast_in_place(out, root),
                }
            } else {
                fill(&mut send[..count], r, seed, op, 0);
                match f {
                    Func::AllReduce => c.all_reduce(&send[..count], out, op),
                    Func::Reduce => c.reduce(&send[..count], out, op, root),
                    _ => c.broadcast(&send[..count], out, root),
                }
            }
            .map_err(err)?;
            let out = &recv[..count];
            match f {
                Func::Broadcast => compare(&what, out, n, |i| exact(T::value(root, i, seed, op))),
                Func::Reduce if r != root => Ok(()),
                _ => compare(&what, out, n, |i| reduce_at::<T>(n, i, seed, op)),
            }
        }
        Func::ReduceScatter => {
            if in_place {
                fill(&mut recv[..all], r, seed, op, 0);
                c.reduce_scatter_in_place(&mut recv[..all], op)
                    .map_err(err)?;
                let out = &recv[r * count..(r + 1) * count];
                compare(&what, out, n, |i| {
                    reduce_at::<T>(n, r * count + i, seed, op)
                })
            } else {
                fill(&mut send[..all], r, seed, op, 0);
                c.reduce_scatter(&send[..all], &mut recv[..count], op)
                    .map_err(err)?;
                compare(&what, &recv[..count], n, |i| {
                    reduce_at::<T>(n, r * count + i, seed, op)
                })
            }
        }
        Func::AllGather | Func::Gather => {
            let gathers = f == Func::AllGather || r == root;
            let out_len = if gathers { all } else { 0 };
            if in_place {
                let mine = if gathers { r * count } else { 0 };
                fill(&mut recv[mine..mine + count], r, seed, op, 0);
                let buf = &mut recv[..if gathers { all } else { count }];
                match f {
                    Func::AllGather => c.all_gather_in_place(buf),
                    _ => c.gather_in_place(buf, root),
                }
                .map_err(err)?;
            } else {
                fill(&mut send[..count], r, seed, op, 0);
                match f {
                    Func::AllGather => c.all_gather(&send[..count], &mut recv[..out_len]),
                    _ => c.gather(&send[..count], &mut recv[..out_len], root),
                }
                .map_err(err)?;
            }
            if !gathers {
                return Ok(());
            }
            compare(&what, &recv[..all], n, |i| {
                exact(T::value(i / count, i % count, seed, op))
            })
        }
        Func::Scatter => {
            let sends = r == root;
            if in_place {
                let len = if sends { all } else { count };
                if sends {
                    fill(&mut recv[..all], r, seed, op, 0);
                }
                c.scatter_in_place(&mut recv[..len], root).map_err(err)?;
                let mine = if sends { r * count } else { 0 };
                compare(&what, &recv[mine..mine + count], n, |i| {
                    exact(T::value(root, r * count + i, seed, op))
                })
            } else {
                let in_len = if sends { all } else { 0 };
                if sends {
                    fill(&mut send[..all], r, seed, op, 0);
                }
                c.scatter(&send[..in_len], &mut recv[..count], root)
                    .map_err(err)?;
                compare(&what, &recv[..count], n, |i| {
                    exact(T::value(root, r * count + i, seed, op))
                })
            }
        }
        _ => unreachable!("only direct functions"),
    }
}

fn matrix<T: TElem>(c: &Communicator, counts: &[usize]) -> Result<(), String> {
    let n = c.nranks();
    let max = counts.iter().max().copied().unwrap_or(0) * n;
    let mut send = mem_alloc::<T>(max).map_err(|e| e.to_string())?;
    let mut recv = mem_alloc::<T>(max).map_err(|e| e.to_string())?;
    let ws = c.window_register(&send).map_err(|e| e.to_string())?;
    let wr = c.window_register(&recv).map_err(|e| e.to_string())?;
    let mut seed = 0;
    for &f in &FUNCS {
        let ops = if matches!(f, Func::AllReduce | Func::ReduceScatter | Func::Reduce) {
            ops_for(T::DTYPE)
        } else {
            vec![RedOp::Sum]
        };
        for op in ops {
            for in_place in [false, true] {
                for &count in counts {
                    seed += 1;
                    let (before, read_before) = (fifo_bytes(c), window_bytes(c));
                    run_case(c, &mut send, &mut recv, f, op, in_place, count, seed)?;
                    // Direct above the size threshold (no FIFO bytes), FIFO plans below it
                    // and for PreMulSum (whose scalars ranks may choose apart).
                    let direct = count * size_of::<T>() >= DIRECT_MIN_BYTES
                        && !matches!(op, RedOp::PreMulSum(_));
                    let moved = fifo_bytes(c) - before;
                    let read = window_bytes(c) - read_before;
                    // A direct collective that reads peers' windows counts those reads (a
                    // Broadcast root and a Scatter root read only their own buffers).
                    let is_root = c.rank() == (seed as usize) % c.nranks();
                    let reads_peers = !(matches!(f, Func::Broadcast | Func::Scatter) && is_root
                        || matches!(f, Func::Reduce | Func::Gather) && !is_root);
                    if direct && reads_peers && c.nranks() > 1 && read == 0 {
                        return Err(format!(
                            "{f:?} {} count {count}: no window reads counted on the direct path",
                            T::DTYPE
                        ));
                    }
                    if direct != (moved == 0) {
                        return Err(format!(
                            "{f:?} {} count {count}: {moved} bytes through FIFOs, expected the {} path",
                            T::DTYPE,
                            if direct { "direct" } else { "FIFO" }
                        ));
                    }
                }
            }
        }
    }
    c.window_deregister(ws).map_err(|e| e.to_string())?;
    c.window_deregister(wr).map_err(|e| e.to_string())?;
    Ok(())
}

fn matrix_all_types(c: &Communicator) -> Result<(), String> {
    let counts = [1, 13, 4099, 100_003];
    for dt in DataType::ALL {
        match dt {
            DataType::Int8 => matrix::<i8>(c, &counts)?,
            DataType::Uint8 => matrix::<u8>(c, &counts)?,
            DataType::Int32 => matrix::<i32>(c, &counts)?,
            DataType::Uint32 => matrix::<u32>(c, &counts)?,
            DataType::Int64 => matrix::<i64>(c, &counts)?,
            DataType::Uint64 => matrix::<u64>(c, &counts)?,
            DataType::Float16 => matrix::<f16>(c, &counts)?,
            DataType::Bfloat16 => matrix::<bf16>(c, &counts)?,
            DataType::Float32 => matrix::<f32>(c, &counts)?,
            DataType::Float64 => matrix::<f64>(c, &counts)?,
            DataType::Float8e4m3 => matrix::<rnccl::F8E4M3>(c, &counts)?,
            DataType::Float8e5m2 => matrix::<rnccl::F8E5M2>(c, &counts)?,
        }
    }
    Ok(())
}

#[test]
fn direct_matrix_2_ranks() {
    all_ok(on_threads(2, &[], matrix_all_types));
}

#[test]
fn direct_matrix_3_ranks() {
    all_ok(on_threads(3, &[], matrix_all_types));
}

#[test]
fn direct_matrix_4_ranks() {
    all_ok(on_threads(4, &[], matrix_all_types));
}

/// Buffers large enough for streamed output stores, in and out of place.
#[test]
fn direct_large_all_reduce() {
    all_ok(on_threads(2, &[], |c| {
        matrix::<f32>(c, &[(24 << 20) / 4 + 5])
    }));
}

/// Rank 1 passes heap buffers: every rank runs the FIFO plan and the result is still right.
#[test]
fn a_heap_buffer_on_one_rank_falls_back_to_fifos() {
    all_ok(on_threads(2, &[], |c| {
        let r = c.rank();
        let count = 50_000;
        let mut send = mem_alloc::<f32>(count).map_err(|e| e.to_string())?;
        let mut recv = mem_alloc::<f32>(count).map_err(|e| e.to_string())?;
        let _ws = c.window_register(&send).map_err(|e| e.to_string())?;
        let _wr = c.window_register(&recv).map_err(|e| e.to_string())?;
        fill(&mut send[..], r, 7, RedOp::Sum, 0);
        let before = fifo_bytes(c);
        if r == 1 {
            let heap_in = send.to_vec();
            let mut heap_out = vec![0f32; count];
            c.all_reduce(&heap_in, &mut heap_out, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            recv.copy_from_slice(&heap_out);
        } else {
            c.all_reduce(&send, &mut recv, RedOp::Sum)
                .map_err(|e| e.to_string())?;
        }
        compare("fallback", &recv, 2, |i| {
            reduce_at::<f32>(2, i, 7, RedOp::Sum)
        })?;
        if fifo_bytes(c) == before {
            return Err("no FIFO traffic: the fallback did not run".into());
        }
        // Back on windows everywhere: direct again, no FIFO traffic.
        let before = fifo_bytes(c);
        c.all_reduce(&send, &mut recv, RedOp::Sum)
            .map_err(|e| e.to_string())?;
        compare("direct", &recv, 2, |i| {
            reduce_at::<f32>(2, i, 7, RedOp::Sum)
        })?;
        if fifo_bytes(c) != before {
            return Err("FIFO traffic on windows".into());
        }
        Ok(())
    }));
}

/// PreMulSum scales each rank's input by that rank's own scalar, and ranks may pass different
/// ones: on windows above the direct threshold the result is still the sum of every rank's
/// scaled input (all_reduce and reduce_scatter, out of place and in place).
#[test]
fn per_rank_premulsum_scalars_on_windows() {
    all_ok(on_threads(3, &[], |c| {
        let (r, n) = (c.rank(), c.nranks());
        let count = 2 * DIRECT_MIN_BYTES / size_of::<f32>();
        let mut send = mem_alloc::<f32>(n * count).map_err(|e| e.to_string())?;
        let mut recv = mem_alloc::<f32>(n * count).map_err(|e| e.to_string())?;
        let _ws = c.window_register(&send).map_err(|e| e.to_string())?;
        let _wr = c.window_register(&recv).map_err(|e| e.to_string())?;
        let x = |p: usize, i: usize| (i % 7 + p) as f32;
        let want = |i: usize| (0..n).map(|p| (p + 1) as f32 * x(p, i)).sum::<f32>();
        let op = RedOp::PreMulSum(Scalar::Float((r + 1) as f64));
        let check = |what: &str, got: &[f32], first: usize| match got
            .iter()
            .enumerate()
            .find(|&(i, &v)| v != want(first + i))
        {
            Some((i, v)) => Err(format!(
                "{what}: rank {r} element {}: {v}, want {}",
                first + i,
                want(first + i)
            )),
            None => Ok(()),
        };
        for (i, v) in send.iter_mut().enumerate() {
            *v = x(r, i);
        }
        c.all_reduce(&send[..count], &mut recv[..count], op)
            .map_err(|e| e.to_string())?;
        check("all_reduce", &recv[..count], 0)?;
        c.reduce_scatter(&send[..], &mut recv[..count], op)
            .map_err(|e| e.to_string())?;
        check("reduce_scatter", &recv[..count], r * count)?;
        recv.copy_from_slice(&send);
        c.all_reduce_in_place(&mut recv[..count], op)
            .map_err(|e| e.to_string())?;
        check("all_reduce in place", &recv[..count], 0)?;
        recv.copy_from_slice(&send);
        c.reduce_scatter_in_place(&mut recv[..], op)
            .map_err(|e| e.to_string())?;
        check(
            "reduce_scatter in place",
            &recv[r * count..(r + 1) * count],
            r * count,
        )
    }));
}

/// Collectives without a direct form, and Send/Recv, keep working on window memory, between
/// direct ones.
#[test]
fn other_collectives_on_windows() {
    all_ok(on_threads(3, &[], |c| {
        let (r, n) = (c.rank(), c.nranks());
        let count = 1000;
        let mut send = mem_alloc::<i64>(n * count).map_err(|e| e.to_string())?;
        let mut recv = mem_alloc::<i64>(n * count).map_err(|e| e.to_string())?;
        let _ws = c.window_register(&send).map_err(|e| e.to_string())?;
        let _wr = c.window_register(&recv).map_err(|e| e.to_string())?;
        for round in 0..3 {
            fill(&mut send[..], r, round, RedOp::Sum, 0);
            c.all_to_all(&send, &mut recv).map_err(|e| e.to_string())?;
            compare("alltoall", &recv, n, |i| {
                let v = i64::value(i / count, r * count + i % count, round, RedOp::Sum);
                (v, 0.0)
            })?;
            let mut g = rnccl::group_start();
            g.send(c, &send[..count], (r + 1) % n)
                .map_err(|e| e.to_string())?;
            g.recv(c, &mut recv[..count], (r + n - 1) % n)
                .map_err(|e| e.to_string())?;
            g.end().map_err(|e| e.to_string())?;
            compare("sendrecv", &recv[..count], n, |i| {
                (i64::value((r + n - 1) % n, i, round, RedOp::Sum), 0.0)
            })?;
            c.all_reduce(&send[..count], &mut recv[..count], RedOp::Sum)
                .map_err(|e| e.to_string())?;
            compare("allreduce", &recv[..count], n, |i| {
                reduce_at::<i64>(n, i, round, RedOp::Sum)
            })?;
        }
        Ok(())
    }));
}

/// Ranks calling different collectives on windows get an error naming the rank, not a hang.
#[test]
fn mismatched_calls_are_errors() {
    let results = on_threads(2, &[], |c| {
        let r = c.rank();
        let send = mem_alloc::<f32>(4096).map_err(|e| e.to_string())?;
        let mut recv = mem_alloc::<f32>(4096).map_err(|e| e.to_string())?;
        let _ws = c.window_register(&send).map_err(|e| e.to_string())?;
        let _wr = c.window_register(&recv).map_err(|e| e.to_string())?;
        let count = if r == 0 { 4096 } else { 2048 };
        c.all_reduce(&send[..count], &mut recv[..count], RedOp::Sum)
            .map_err(|e| e.to_string())
    });
    for (r, res) in results.into_iter().enumerate() {
        let e = res.expect_err("a mismatched collective must fail");
        assert!(
            e.contains("different collective") && e.contains("rank "),
            "rank {r}: {e}"
        );
    }
}

/// A rank that deregistered its windows runs later collectives through FIFOs, and its peers,
/// still registered, follow it; the results stay right.
#[test]
fn one_rank_deregistering_makes_all_use_fifos() {
    all_ok(on_threads(2, &[], |c| {
        let r = c.rank();
        let count = 10_000;
        let mut send = mem_alloc::<u32>(count).map_err(|e| e.to_string())?;
        let mut recv = mem_alloc::<u32>(count).map_err(|e| e.to_string())?;
        let ws = c.window_register(&send).map_err(|e| e.to_string())?;
        let wr = c.window_register(&recv).map_err(|e| e.to_string())?;
        fill(&mut send[..], r, 3, RedOp::Max, 0);
        c.all_reduce(&send, &mut recv, RedOp::Max)
            .map_err(|e| e.to_string())?;
        let direct = fifo_bytes(c);
        if r == 0 {
            c.window_deregister(ws).map_err(|e| e.to_string())?;
            c.window_deregister(wr).map_err(|e| e.to_string())?;
        }
        recv.fill(0);
        c.all_reduce(&send, &mut recv, RedOp::Max)
            .map_err(|e| e.to_string())?;
        compare("after deregister", &recv, 2, |i| {
            reduce_at::<u32>(2, i, 3, RedOp::Max)
        })?;
        if fifo_bytes(c) == direct {
            return Err("no FIFO traffic after a rank deregistered".into());
        }
        Ok(())
    }));
}
