//! A simulated fabric: every rank's plan runs in one thread over heap FIFOs, interleaved round
//! robin, so plans are checked for correctness and deadlock freedom deterministically, without
//! sockets or threads.

use std::sync::Arc;

use super::{Connections, Execution, OpBuffers, Segment};
use crate::coll::{Algo, CollArgs, Func, Geometry, LaneKey, Loc, Op, Plan, Rings, Step, plan};
use crate::conn::ConnKey;
use crate::device::{ReduceSpec, Region};
use crate::dtype::DataType;
use crate::redop::RedOp;
use crate::stats::CommStats;
use crate::transport::TransportKind;
use crate::transport::fifo::{FifoMemory, HeapMemory, MemReceiver, MemSender, init_fifo};

/// A heap FIFO from `from` to `to` for key `k` (named from `from`'s side).
fn heap_pair(conns: &mut [Connections], stats: &CommStats, from: usize, k: ConnKey, slot: usize) {
    let mem: Arc<dyn FifoMemory> = Arc::new(HeapMemory::new(slot).expect("heap FIFO"));
    init_fifo(&*mem, slot).expect("init");
    let tx = MemSender::new(mem.clone()).expect("sender");
    let rx = MemReceiver::new(mem).expect("receiver");
    let kind = TransportKind::SameProcess;
    conns[from].add_send(k, Box::new(tx), kind, stats);
    conns[k.peer].add_recv(ConnKey { peer: from, ..k }, Box::new(rx), kind, stats);
}

/// One execution of a whole plan (every lane one segment of operation 0).
fn execution(ops: OpBuffers, p: &Plan, conns: &Connections) -> Execution {
    let plan = Arc::new(p.clone());
    let lanes = (0..plan.lanes.len())
        .map(|i| {
            let seg = Segment {
                op: 0,
                plan: plan.clone(),
                lane: i,
            };
            (plan.lanes[i].0, vec![seg])
        })
        .collect();
    Execution::new(vec![ops], lanes, conns).expect("execution")
}

/// Runs `args` on `n` simulated ranks with u32 inputs; returns every rank's output.
fn run(
    args: CollArgs,
    n: usize,
    rings: &Rings,
    geo: Geometry,
    algo: Algo,
    inputs: &[Vec<u32>],
    outputs: &mut [Vec<u32>],
) {
    let nch = rings.nchannels();
    let plans: Vec<_> = (0..n)
        .map(|r| plan(&args, r, n, rings, geo, algo, nch).expect("plan"))
        .collect();
    let stats = CommStats::new();
    let mut conns: Vec<Connections> = (0..n).map(|_| Connections::default()).collect();
    for (r, p) in plans.iter().enumerate() {
        for k in &p.send_keys {
            if !conns[r].has_send(k) {
                heap_pair(&mut conns, &stats, r, *k, geo.slot_bytes);
            }
        }
    }
    let spec = ReduceSpec::new(args.dtype, args.op.lower(args.dtype, n));
    let mut execs: Vec<Execution> = plans
        .iter()
        .enumerate()
        .map(|(r, p)| {
            let (input, output) = if args.in_place {
                // The single buffer is `outputs[r]` (sized to the larger of input and output).
                let l = args.in_place_layout(r, n).expect("in-place layout");
                let base = outputs[r].as_mut_ptr().cast::<u8>();
                // SAFETY: the layout's ranges lie within the buffer.
                unsafe {
                    (
                        Region::host(base.add(l.input.0), l.input.1),
                        Region::host(base.add(l.output.0), l.output.1),
                    )
                }
            } else {
                (
                    Region::host(
                        inputs[r].as_ptr().cast::<u8>().cast_mut(),
                        inputs[r].len() * 4,
                    ),
                    Region::host(outputs[r].as_mut_ptr().cast::<u8>(), outputs[r].len() * 4),
                )
            };
            // SAFETY: the vectors outlive the executions, which this function drops before
            // returning; nothing else touches them meanwhile.
            let ops = unsafe { OpBuffers::new(input, output, p.scratch_bytes, spec) }
                .expect("buffers")
                .snapshot_input(args.in_place && args.func == Func::AllToAll);
            execution(ops, p, &conns[r])
        })
        .collect();
    let mut idle_rounds = 0;
    loop {
        let mut all_done = true;
        let mut moved = false;
        for r in 0..n {
            if !execs[r].done(&conns[r]) {
                all_done = false;
                moved |= execs[r].progress(&mut conns[r]).expect("progress");
            }
        }
        if all_done {
            break;
        }
        idle_rounds = if moved { 0 } else { idle_rounds + 1 };
        assert!(
            idle_rounds < 3,
            "deadlock: {:?} n={n} algo={algo:?}",
            args.func
        );
    }
    for c in &mut conns {
        c.finish_all();
    }
}

fn combine(op: RedOp, vals: &[u32]) -> u32 {
    let n = vals.len() as u32;
    match op {
        RedOp::Sum => vals.iter().fold(0u32, |a, &b| a.wrapping_add(b)),
        RedOp::Prod => vals.iter().fold(1u32, |a, &b| a.wrapping_mul(b)),
        RedOp::Max => *vals.iter().max().expect("values"),
        RedOp::Min => *vals.iter().min().expect("values"),
        RedOp::Avg => vals.iter().fold(0u32, |a, &b| a.wrapping_add(b)) / n,
        RedOp::PreMulSum(s) => vals.iter().fold(0u32, |a, &b| {
            a.wrapping_add(b.wrapping_mul(s.as_i64() as u32))
        }),
    }
}

/// The expected output of every rank, computed sequentially from the inputs.
fn reference(args: &CollArgs, n: usize, inputs: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let m = args.count;
    let out_len = args.func.output_elems(m, n).unwrap();
    (0..n)
        .map(|r| match args.func {
            Func::AllReduce => (0..m)
                .map(|i| combine(args.op, &inputs.iter().map(|v| v[i]).collect::<Vec<_>>()))
                .collect(),
            Func::Reduce if r == args.root => (0..m)
                .map(|i| combine(args.op, &inputs.iter().map(|v| v[i]).collect::<Vec<_>>()))
                .collect(),
            Func::Reduce => vec![0; out_len],
            Func::Broadcast => inputs[args.root].clone(),
            Func::AllGather => inputs.iter().flat_map(|v| v[..m].iter().copied()).collect(),
            Func::ReduceScatter => (0..m)
                .map(|i| {
                    combine(
                        args.op,
                        &inputs.iter().map(|v| v[r * m + i]).collect::<Vec<_>>(),
                    )
                })
                .collect(),
            Func::AllToAll => (0..n)
                .flat_map(|p| inputs[p][r * m..(r + 1) * m].to_vec())
                .collect(),
            Func::Gather if r == args.root => {
                inputs.iter().flat_map(|v| v[..m].iter().copied()).collect()
            }
            Func::Gather => vec![0; out_len],
            Func::Scatter => inputs[args.root][r * m..(r + 1) * m].to_vec(),
            Func::Send | Func::Recv => unreachable!("point-to-point checked separately"),
        })
        .collect()
}

fn check(func: Func, n: usize, count: usize, op: RedOp, algo: Algo, nch: usize, in_place: bool) {
    let args = CollArgs {
        func,
        count,
        dtype: DataType::Uint32,
        op,
        root: n / 2,
        in_place,
    };
    let in_len = func.input_elems(count, n).unwrap();
    let out_len = func.output_elems(count, n).unwrap();
    let inputs: Vec<Vec<u32>> = (0..n)
        .map(|r| {
            (0..in_len)
                .map(|i| (r * 1_000_003 + i * 7919 + 1) as u32 % 1000 + 1)
                .collect()
        })
        .collect();
    let mut outputs: Vec<Vec<u32>> = vec![vec![0; out_len]; n];
    if in_place {
        for r in 0..n {
            let l = args.in_place_layout(r, n).unwrap();
            let mut buf = vec![0u32; l.buf_bytes / 4];
            let (io, il) = (l.input.0 / 4, l.input.1 / 4);
            buf[io..io + il].copy_from_slice(&inputs[r][..il]);
            outputs[r] = buf;
        }
    }
    let rings = Rings::new(
        (0..nch)
            .map(|c| (0..n).map(|i| (i + c) % n).collect())
            .collect(),
        n,
    )
    .expect("rings");
    let geo = Geometry { slot_bytes: 256 };
    run(args, n, &rings, geo, algo, &inputs, &mut outputs);
    let want = reference(&args, n, &inputs);
    for r in 0..n {
        if matches!(func, Func::Reduce | Func::Gather) && r != args.root {
            continue;
        }
        let got = if in_place {
            let l = args.in_place_layout(r, n).unwrap();
            outputs[r][l.output.0 / 4..(l.output.0 + l.output.1) / 4].to_vec()
        } else {
            outputs[r].clone()
        };
        assert_eq!(
            got, want[r],
            "{func:?} n={n} count={count} {op:?} {algo:?} nch={nch} in_place={in_place} rank {r}"
        );
    }
}

#[test]
fn every_function_every_size_on_simulated_ranks() {
    let funcs = [
        Func::AllReduce,
        Func::Broadcast,
        Func::Reduce,
        Func::AllGather,
        Func::ReduceScatter,
        Func::AllToAll,
        Func::Gather,
        Func::Scatter,
    ];
    for n in [1, 2, 3, 4, 5, 7, 8] {
        for count in [0, 1, 2, 7, 64, 191, 1000, 4099] {
            for func in funcs {
                let algos: &[Algo] = match func {
                    Func::AllReduce | Func::Broadcast | Func::Reduce => &[Algo::Ring, Algo::Tree],
                    _ => &[Algo::Ring],
                };
                for &algo in algos {
                    for nch in [1, 3] {
                        check(func, n, count, RedOp::Sum, algo, nch, false);
                    }
                }
            }
        }
    }
}

#[test]
fn every_op_and_in_place() {
    for n in [2, 3, 5] {
        for op in [
            RedOp::Sum,
            RedOp::Prod,
            RedOp::Max,
            RedOp::Min,
            RedOp::Avg,
            RedOp::PreMulSum(crate::redop::Scalar::Int(3)),
        ] {
            for func in [Func::AllReduce, Func::Reduce, Func::ReduceScatter] {
                for algo in [Algo::Ring, Algo::Tree] {
                    if func == Func::ReduceScatter && algo == Algo::Tree {
                        continue;
                    }
                    check(func, n, 333, op, algo, 2, false);
                }
            }
        }
        for func in [
            Func::AllReduce,
            Func::Broadcast,
            Func::Reduce,
            Func::AllGather,
            Func::ReduceScatter,
            Func::Gather,
            Func::Scatter,
        ] {
            check(func, n, 517, RedOp::Sum, Algo::Ring, 2, true);
        }
    }
}

#[test]
fn large_ring_allreduce_streams_many_chunks() {
    check(
        Func::AllReduce,
        4,
        100_003,
        RedOp::Sum,
        Algo::Ring,
        2,
        false,
    );
    check(Func::AllGather, 3, 20_011, RedOp::Sum, Algo::Ring, 2, false);
    check(
        Func::ReduceScatter,
        3,
        20_011,
        RedOp::Max,
        Algo::Ring,
        2,
        false,
    );
}

/// A lane stuck half-way through a step must report no progress, or waiters never sleep nor
/// time out (a receiver that never reads used to spin its sender forever).
#[test]
fn a_blocked_lane_reports_no_progress() {
    let slot = 64;
    let key = ConnKey::collective(1, 0);
    let stats = CommStats::new();
    let mut conns = vec![Connections::default(), Connections::default()];
    // Rank 0 sends to rank 1, which never reads.
    heap_pair(&mut conns, &stats, 0, key, slot);
    let data = vec![7u8; slot * 20];
    let step = Step::new(
        Op::Send {
            src: Loc::input(0),
            to: key,
        },
        data.len(),
    );
    let plan = Plan::new(vec![(LaneKey::Channel(0), vec![step])], 0, Algo::Direct);
    let input = Region::host(data.as_ptr().cast_mut(), data.len());
    // SAFETY: `data` outlives the execution and is only read.
    let ops = unsafe {
        OpBuffers::new(
            input,
            Region::host(std::ptr::null_mut(), 0),
            0,
            ReduceSpec::copy(DataType::Uint8),
        )
    }
    .unwrap();
    let (c0, _) = conns.split_at_mut(1);
    let mut ex = execution(ops, &plan, &c0[0]);
    assert!(
        ex.progress(&mut c0[0]).unwrap(),
        "the first call fills the FIFO"
    );
    assert!(
        !ex.progress(&mut c0[0]).unwrap(),
        "a full FIFO is no progress"
    );
    assert!(!ex.done(&c0[0]));
    assert_eq!(
        ex.blocked(),
        vec![super::failure::Blocked {
            key,
            receiving: false
        }]
    );
    assert_eq!(ex.steps(), (1, 0, (slot * 8) as u64));
    let sent: u64 = stats
        .links()
        .iter()
        .filter(|l| l.peer == 1)
        .map(|l| l.bytes)
        .sum();
    assert_eq!(sent, (slot * 8) as u64, "eight slots counted");
}
