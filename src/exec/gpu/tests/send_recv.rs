//! The direct send/receive (`SendRecv_ST`) on the kernel model ([`emulate::send_recv`]): a
//! group's Send/Recv over host buffers, chosen by [`group_sends::of_comm`] as the launch
//! chooses it, argument blocks built by [`GroupSends::kernel_op`] and [`ll::encode`] with the
//! block split of [`sym_plan`], every rank at once, groups back to back so the blocks' counts
//! carry on; every receive buffer against what its sender held, the traffic counters, and a
//! peer that never comes, named.

use std::time::Duration;

use super::super::emulate;
use super::super::group_sends::{self, GroupSends};
use super::super::ll::{LlOp, sym_plan};
use super::super::windows::SymKernels;
use super::fabric::Words;
use super::ll::LlFabric;
use crate::config::Config;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{DirectMode, SYM_COUNT_WORD, Status};
use crate::dtype::DataType;
use crate::exec::Op;
use crate::func::Func;
use crate::redop::RedOp;

/// Byte `i` of what rank `from` sends rank `to`.
fn byte(from: usize, to: usize, i: usize) -> u8 {
    (i % 251) as u8 ^ (from as u8 * 16 + to as u8)
}

/// A Send to or Recv from `peer` of the `len` bytes of `buf` from `off`.
fn p2p(func: Func, peer: usize, buf: &Words, off: usize, len: usize) -> Op {
    group_sends::tests::p2p(func, peer, len, 0, buf.addr() + off as u64)
}

/// Runs one group in which rank r sends `bytes[r][p]` bytes to rank p (0: no Send/Recv pair),
/// each send from its own piece of the sender's buffer into its own piece of the receiver's;
/// returns every rank's receive buffer and where each peer's bytes start in it, and the plan's
/// blocks.
fn run(f: &LlFabric, bytes: &[Vec<usize>]) -> (Vec<(Words, Vec<usize>)>, u32) {
    let n = f.n;
    let offsets = |row: &[usize]| {
        let mut at = 0;
        row.iter()
            .map(|&b| {
                let o = at;
                at += b.next_multiple_of(16) + 16;
                o
            })
            .collect::<Vec<_>>()
    };
    let sends: Vec<Words> = (0..n)
        .map(|r| {
            let at = offsets(&bytes[r]);
            let w = Words::zeroed(at[n - 1] + bytes[r][n - 1] + 16);
            for p in 0..n {
                let data: Vec<u8> = (0..bytes[r][p]).map(|i| byte(r, p, i)).collect();
                w.write(at[p], &data);
            }
            w
        })
        .collect();
    let recvs: Vec<(Words, Vec<usize>)> = (0..n)
        .map(|r| {
            let col: Vec<usize> = (0..n).map(|p| bytes[p][r]).collect();
            let at = offsets(&col);
            (Words::zeroed(at[n - 1] + col[n - 1] + 16), at)
        })
        .collect();
    let ops: Vec<Vec<Op>> = (0..n)
        .map(|r| {
            let send_at = offsets(&bytes[r]);
            let mut ops = Vec::new();
            for p in 0..n {
                if bytes[r][p] > 0 {
                    ops.push(p2p(Func::Send, p, &sends[r], send_at[p], bytes[r][p]));
                }
                if bytes[p][r] > 0 {
                    let (w, at) = &recvs[r];
                    ops.push(p2p(Func::Recv, p, w, at[p], bytes[p][r]));
                }
            }
            ops
        })
        .collect();
    let refs: Vec<&[Op]> = ops.iter().map(Vec::as_slice).collect();
    let parts: Vec<GroupSends> =
        group_sends::of_comm(&refs, &vec![0; n], |_, _| true).expect("a direct group");
    let kernels =
        SymKernels::from_config(&Config::from_pairs(&[("NCCL_SYM_CTAS", "3")]).unwrap()).unwrap();
    // What the launch fills in from each Send: its source, per receiving rank.
    let parts: Vec<(GroupSends, Vec<u64>)> = parts
        .into_iter()
        .zip(&ops)
        .map(|(part, ops)| {
            let mut srcs = vec![0; n];
            for o in ops.iter().filter(|o| o.args.func == Func::Send) {
                srcs[o.args.root] = o.input.ptr as u64;
            }
            (part, srcs)
        })
        .collect();
    let blocks = run_parts(f, &parts, &kernels);
    (recvs, blocks)
}

/// Runs every rank's part of one direct send/receive at once over `f`, each with its sources
/// per receiving rank (`peer_src`), on the blocks [`sym_plan`] gives the largest send under
/// `kernels`; returns that block count.
fn run_parts(f: &LlFabric, parts: &[(GroupSends, Vec<u64>)], kernels: &SymKernels) -> u32 {
    let n = f.n;
    let largest = parts[0].0.largest;
    let plan = sym_plan(DirectMode::SymSendRecv, largest, n, kernels, usize::MAX);
    let spec = ReduceSpec::new(DataType::Uint8, RedOp::Sum.lower(DataType::Uint8, n));
    std::thread::scope(|s| {
        for (r, (part, srcs)) in parts.iter().enumerate() {
            let op = LlOp {
                mode: DirectMode::SymSendRecv,
                peer_src: srcs.clone(),
                ..part.kernel_op(f.op(r, 0, 0, largest))
            };
            let args = f.encoded(r, &op, plan.unit as u64, &spec);
            s.spawn(move || {
                // SAFETY: every address is memory of this fabric or of the caller's buffers,
                // alive for the scope; the model touches flags and counters only atomically,
                // and each receive buffer's piece is written by its one sender.
                unsafe { emulate::send_recv::run(&args, plan.blocks) }.expect("decodes")
            });
        }
    });
    plan.blocks
}

#[test]
fn groups_of_sends_land_in_the_receive_buffers_back_to_back() {
    const MIB: usize = 1 << 20;
    let f = LlFabric::new(3, Duration::from_secs(20));
    // A ring with a self-send, sizes that leave the last block short or empty; then every
    // pair, one direction only at 8 bytes; then one large send, the others' small.
    let groups = [
        vec![vec![5, MIB + 3, 0], vec![0, 0, 4097], vec![MIB, 0, 0]],
        vec![vec![0, 8, 2 * MIB], vec![MIB + 16, 0, 8], vec![100, 3, 0]],
        vec![vec![0, 16, 0], vec![0, 0, 3 * MIB - 1], vec![8, 0, 0]],
    ];
    let mut counted = [0u64; 3];
    let mut moved = vec![vec![0u64; 3]; 3];
    for (k, bytes) in groups.iter().enumerate() {
        let (recvs, blocks) = run(&f, bytes);
        assert_eq!(blocks, 3, "NCCL_SYM_CTAS=3");
        counted.iter_mut().for_each(|c| *c += 1);
        for (r, (w, at)) in recvs.iter().enumerate() {
            assert_eq!(f.report(r).0, None, "group {k} rank {r}");
            for p in 0..3 {
                let want: Vec<u8> = (0..bytes[p][r]).map(|i| byte(p, r, i)).collect();
                assert!(
                    w.read(at[p], want.len()) == want,
                    "group {k}: rank {r}'s bytes from rank {p}"
                );
                if p != r {
                    moved[p][r] += bytes[p][r] as u64;
                }
            }
            let o = &f.ctl[r][3];
            let ops = k as u64 + 1;
            assert_eq!((o.word(0), o.word(1)), (ops, ops), "rank {r}'s operations");
            for (b, &c) in counted.iter().enumerate() {
                assert_eq!(f.state[r].word(SYM_COUNT_WORD + b), c, "rank {r} block {b}");
            }
        }
    }
    // Each connection end counted the bytes that crossed it, both ways.
    let count = |r: usize, p: usize, send: bool| f.counts[&(r, p, send)][0].word(1);
    for (r, row) in moved.iter().enumerate() {
        for (p, &bytes) in row.iter().enumerate().filter(|&(p, _)| p != r) {
            assert_eq!(count(r, p, true), bytes, "{r} -> {p} at the sender");
            assert_eq!(count(p, r, false), bytes, "{r} -> {p} at the receiver");
        }
    }
}

#[test]
fn a_silent_peer_times_out_named() {
    let f = LlFabric::new(2, Duration::from_millis(300));
    let bytes = [vec![0, 1 << 20], vec![1 << 20, 0]];
    // Only rank 0 runs: build its block as `run` does, and run it alone.
    let sends = Words::zeroed(1 << 20);
    let recvs = Words::zeroed(1 << 20);
    let peer_sends = Words::zeroed(1 << 20);
    let peer_recvs = Words::zeroed(1 << 20);
    let ops = [
        vec![
            p2p(Func::Send, 1, &sends, 0, bytes[0][1]),
            p2p(Func::Recv, 1, &recvs, 0, bytes[1][0]),
        ],
        vec![
            p2p(Func::Send, 0, &peer_sends, 0, bytes[1][0]),
            p2p(Func::Recv, 0, &peer_recvs, 0, bytes[0][1]),
        ],
    ];
    let refs: Vec<&[Op]> = ops.iter().map(Vec::as_slice).collect();
    let parts = group_sends::of_comm(&refs, &[0, 0], |_, _| true).expect("a direct group");
    let mut op = parts[0].kernel_op(f.op(0, 0, 0, parts[0].largest));
    op.mode = DirectMode::SymSendRecv;
    op.peer_src[1] = sends.addr();
    let spec = ReduceSpec::new(DataType::Uint8, RedOp::Sum.lower(DataType::Uint8, 2));
    let args = f.encoded(0, &op, 0, &spec);
    let t0 = std::time::Instant::now();
    // SAFETY: every address is memory of this fabric or of the buffers above, alive here.
    unsafe { emulate::send_recv::run(&args, 2) }.expect("decodes");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(f.report(0), (Some(Status::Timeout), 1), "names the peer");
    assert!(
        peer_recvs.read(0, 16).iter().all(|&b| b == 0),
        "nothing stored"
    );
    let o = &f.ctl[0][3];
    assert_eq!((o.word(0), o.word(1)), (1, 0), "started, never finished");
}

#[test]
fn an_all_to_all_lands_in_every_output() {
    let n = 3;
    let f = LlFabric::new(n, Duration::from_secs(20));
    let kernels = SymKernels::from_config(&Config::defaults()).unwrap();
    // Out of place, then in place (the launch reads an in-place input from its snapshot).
    for (k, chunk) in [(1usize << 20) + 5, 4099].into_iter().enumerate() {
        let in_place = k == 1;
        let inputs: Vec<Words> = (0..n)
            .map(|r| {
                let v: Vec<u8> = (0..n * chunk).map(|i| byte(r, i / chunk, i)).collect();
                Words::from_bytes(&v)
            })
            .collect();
        let snapshots: Vec<Words> = (0..n)
            .map(|r| Words::from_bytes(&inputs[r].read(0, n * chunk)))
            .collect();
        let outputs: Vec<Words> = (0..n).map(|_| Words::zeroed(n * chunk)).collect();
        let outs = if in_place { &inputs } else { &outputs };
        let rows: Vec<(u64, u64)> = (0..n).map(|r| (inputs[r].addr(), outs[r].addr())).collect();
        let parts: Vec<(GroupSends, Vec<u64>)> = (0..n)
            .map(|r| {
                let src = if in_place { &snapshots[r] } else { &inputs[r] };
                GroupSends::all_to_all(r, src.addr(), chunk, &rows)
            })
            .collect();
        run_parts(&f, &parts, &kernels);
        for (r, out) in outs.iter().enumerate() {
            assert_eq!(f.report(r).0, None, "rank {r}");
            let got = out.read(0, n * chunk);
            for p in 0..n {
                let want: Vec<u8> = (0..chunk).map(|i| byte(p, r, r * chunk + i)).collect();
                assert!(
                    got[p * chunk..(p + 1) * chunk] == want[..],
                    "in_place={in_place}: rank {r}'s block from rank {p}"
                );
            }
        }
    }
}

#[test]
fn a_broadcast_lands_in_every_output() {
    let kernels = SymKernels::from_config(&Config::defaults()).unwrap();
    for (n, root, in_place, bytes) in [
        (2, 0, false, (1usize << 20) + 9),
        (2, 1, true, 4096),
        (3, 2, false, 100_003),
    ] {
        let f = LlFabric::new(n, Duration::from_secs(20));
        let inputs: Vec<Words> = (0..n)
            .map(|r| {
                let v: Vec<u8> = (0..bytes).map(|i| byte(r, 0, i)).collect();
                Words::from_bytes(&v)
            })
            .collect();
        let outputs: Vec<Words> = (0..n).map(|_| Words::zeroed(bytes)).collect();
        let outs = if in_place { &inputs } else { &outputs };
        let rows: Vec<(u64, u64)> = (0..n).map(|r| (inputs[r].addr(), outs[r].addr())).collect();
        let parts: Vec<(GroupSends, Vec<u64>)> = (0..n)
            .map(|r| GroupSends::broadcast(r, root, inputs[r].addr(), bytes, &rows))
            .collect();
        assert!(
            parts.iter().all(|(part, _)| part.largest == bytes),
            "every rank sizes its grid alike"
        );
        run_parts(&f, &parts, &kernels);
        let want: Vec<u8> = (0..bytes).map(|i| byte(root, 0, i)).collect();
        for (r, out) in outs.iter().enumerate() {
            assert_eq!(f.report(r).0, None, "rank {r}");
            assert!(
                out.read(0, bytes) == want,
                "n={n} root={root} in_place={in_place}: rank {r}'s output"
            );
        }
    }
}
