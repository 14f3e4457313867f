//! Send and Recv plans on the kernel model: every ordered pair of ranks alone, and every rank
//! sending and receiving at once in one fused program (a group), itself included.

use super::case::{LIMIT, PATIENCE, SLOT, rings};
use super::fabric::{Fabric, Job, Words};
use super::reference::{input_value, to_bytes};
use crate::coll::{Algo, CollArgs, Func, Geometry, Plan, plan};
use crate::device::ReduceSpec;
use crate::dtype::DataType;
use crate::exec::gpu::program::DevBuffers;
use crate::redop::RedOp;

/// Rank `rank`'s plan for a Send to (or Recv from) `peer` of `count` elements.
fn p2p_plan(func: Func, rank: usize, peer: usize, n: usize, count: usize) -> Plan {
    let a = CollArgs {
        func,
        count,
        dtype: DataType::Int64,
        op: RedOp::Sum,
        root: peer,
        in_place: false,
    };
    let geo = Geometry { slot_bytes: SLOT };
    plan(&a, rank, n, &rings(n, 1), geo, Algo::Direct, 1).expect("plan")
}

/// `count` elements rank `r` sends.
fn payload(r: usize, count: usize) -> Vec<u8> {
    let v: Vec<f64> = (0..count)
        .map(|i| input_value(r, i, RedOp::Sum, DataType::Int64) + 8.0 * r as f64)
        .collect();
    to_bytes(DataType::Int64, &v)
}

/// The jobs of a Send of `len` bytes from `input` (rank, plan, buffer) and its Recv into
/// `output`.
fn pair<'a>(
    (s, send, input): (usize, &'a Plan, &Words),
    (d, recv, output): (usize, &'a Plan, &Words),
    len: usize,
) -> [Job<'a>; 2] {
    let none = DevBuffers {
        input: (0, 0),
        output: (0, 0),
        scratch: (0, 0),
    };
    [
        Job {
            rank: s,
            plan: send,
            bufs: DevBuffers {
                input: (input.addr(), len),
                ..none
            },
        },
        Job {
            rank: d,
            plan: recv,
            bufs: DevBuffers {
                output: (output.addr(), len),
                ..none
            },
        },
    ]
}

fn spec() -> ReduceSpec {
    ReduceSpec::copy(DataType::Int64)
}

#[test]
fn every_pair_alone() {
    for n in 2..=4 {
        for count in [1, 13, 1009] {
            for s in 0..n {
                for d in (0..n).filter(|&d| d != s) {
                    let data = payload(s, count);
                    let (send, recv) = (
                        p2p_plan(Func::Send, s, d, n, count),
                        p2p_plan(Func::Recv, d, s, n, count),
                    );
                    let (input, output) = (Words::from_bytes(&data), Words::zeroed(data.len()));
                    let jobs = pair((s, &send, &input), (d, &recv, &output), data.len());
                    let mut f = Fabric::new(n, SLOT, PATIENCE);
                    f.run(&jobs, &spec(), LIMIT);
                    assert_eq!(f.report(s).code, None);
                    assert_eq!(f.report(d).code, None);
                    assert!(
                        output.read(0, data.len()) == data,
                        "n={n} count={count} {s} -> {d}"
                    );
                }
            }
        }
    }
}

/// Every rank sends to `rank + shift` and receives from `rank - shift` in one program, as a
/// group of ncclSend/ncclRecv fuses them; shift 0 sends to itself.
#[test]
fn every_rank_sends_and_receives_at_once() {
    for n in 1..=4 {
        for shift in 0..n {
            let count = 517;
            let plans: Vec<Plan> = (0..n)
                .map(|r| {
                    let (to, from) = ((r + shift) % n, (r + n - shift) % n);
                    let s = p2p_plan(Func::Send, r, to, n, count);
                    let v = p2p_plan(Func::Recv, r, from, n, count);
                    Plan::new([s.lanes, v.lanes].concat(), 0, Algo::Direct)
                })
                .collect();
            let data: Vec<Vec<u8>> = (0..n).map(|r| payload(r, count)).collect();
            let inputs: Vec<Words> = data.iter().map(|d| Words::from_bytes(d)).collect();
            let outputs: Vec<Words> = data.iter().map(|d| Words::zeroed(d.len())).collect();
            let none = Words::zeroed(0);
            let len = count * 8;
            let jobs: Vec<Job<'_>> = (0..n)
                .map(|r| Job {
                    rank: r,
                    plan: &plans[r],
                    bufs: DevBuffers {
                        input: (inputs[r].addr(), len),
                        output: (outputs[r].addr(), len),
                        scratch: (none.addr(), 0),
                    },
                })
                .collect();
            let mut f = Fabric::new(n, SLOT, PATIENCE);
            f.run(&jobs, &spec(), LIMIT);
            for (r, out) in outputs.iter().enumerate() {
                assert_eq!(f.report(r).code, None);
                let from = (r + n - shift) % n;
                assert!(
                    out.read(0, len) == data[from],
                    "n={n} shift={shift}: rank {r} did not get rank {from}'s data"
                );
            }
        }
    }
}

/// A Send large enough to be cut into pieces over several point-to-point connections
/// ([`spread_p2p`]), as GPU communicators run it: every byte arrives in place.
#[test]
fn large_sends_spread_over_connections() {
    use crate::exec::gpu::spread::spread_p2p;
    use crate::transport::gpu::P2P_CHANNELS;
    let (n, count) = (2, 80_003);
    let data = payload(0, count);
    let send = spread_p2p(&p2p_plan(Func::Send, 0, 1, n, count), P2P_CHANNELS);
    let recv = spread_p2p(&p2p_plan(Func::Recv, 1, 0, n, count), P2P_CHANNELS);
    assert!(send.lanes.len() > 1, "the send is cut into pieces");
    assert_eq!(send.lanes.len(), recv.lanes.len());
    let (input, output) = (Words::from_bytes(&data), Words::zeroed(data.len()));
    let jobs = pair((0, &send, &input), (1, &recv, &output), data.len());
    let mut f = Fabric::new(n, SLOT, PATIENCE);
    f.run(&jobs, &spec(), LIMIT);
    assert_eq!(f.report(0).code, None);
    assert_eq!(f.report(1).code, None);
    assert!(output.read(0, data.len()) == data);
}
