//! Point-to-point based functions: Send, Recv, AlltoAll, Gather, Scatter. Each peer gets its own
//! send and receive lanes on the point-to-point connections, so all transfers run concurrently
//! (NCCL lowers these to grouped `ncclSend`/`ncclRecv` the same way).

use super::{CollArgs, Lane, LaneKey, Loc, Op, Step};
use crate::conn::ConnKey;

/// A lane of one step, or of none when `bytes` is zero.
fn lane(key: LaneKey, op: Op, bytes: usize) -> Lane {
    let steps = if bytes == 0 {
        Vec::new()
    } else {
        vec![Step::new(op, bytes)]
    };
    (key, steps)
}

fn send(peer: usize, bytes: usize, src: Loc) -> Lane {
    let to = ConnKey::p2p(peer);
    lane(LaneKey::SendTo(peer), Op::Send { src, to }, bytes)
}

fn recv(peer: usize, bytes: usize, dst: Loc) -> Lane {
    let from = ConnKey::p2p(peer);
    lane(LaneKey::RecvFrom(peer), Op::Recv { dst, from }, bytes)
}

fn copy(bytes: usize, src: Loc, dst: Loc) -> Lane {
    lane(LaneKey::Local, Op::Copy { src, dst }, bytes)
}

/// `ncclSend` of the whole input to `args.root` (the peer).
pub(super) fn send_op(args: &CollArgs) -> Vec<Lane> {
    vec![send(
        args.root,
        args.count * args.dtype.size(),
        Loc::input(0),
    )]
}

/// `ncclRecv` of the whole output from `args.root` (the peer).
pub(super) fn recv_op(args: &CollArgs) -> Vec<Lane> {
    vec![recv(
        args.root,
        args.count * args.dtype.size(),
        Loc::output(0),
    )]
}

/// AlltoAll: block `p` of the input goes to rank `p`; block `p` of the output comes from it.
pub(super) fn all_to_all(args: &CollArgs, rank: usize, n: usize) -> Vec<Lane> {
    let blk = args.count * args.dtype.size();
    let mut lanes = vec![copy(blk, Loc::input(rank * blk), Loc::output(rank * blk))];
    for p in (0..n).filter(|&p| p != rank) {
        lanes.push(send(p, blk, Loc::input(p * blk)));
        lanes.push(recv(p, blk, Loc::output(p * blk)));
    }
    lanes
}

/// Gather: every rank's input lands in block `rank` of the root's output.
pub(super) fn gather(args: &CollArgs, rank: usize, n: usize) -> Vec<Lane> {
    let blk = args.count * args.dtype.size();
    if rank != args.root {
        return vec![send(args.root, blk, Loc::input(0))];
    }
    let mut lanes = vec![copy(blk, Loc::input(0), Loc::output(rank * blk))];
    for p in (0..n).filter(|&p| p != rank) {
        lanes.push(recv(p, blk, Loc::output(p * blk)));
    }
    lanes
}

/// Scatter: block `p` of the root's input lands in rank `p`'s output.
pub(super) fn scatter(args: &CollArgs, rank: usize, n: usize) -> Vec<Lane> {
    let blk = args.count * args.dtype.size();
    if rank != args.root {
        return vec![recv(args.root, blk, Loc::output(0))];
    }
    let mut lanes = vec![copy(blk, Loc::input(rank * blk), Loc::output(0))];
    for p in (0..n).filter(|&p| p != rank) {
        lanes.push(send(p, blk, Loc::input(p * blk)));
    }
    lanes
}
