//! Point-to-point based functions: Send, Recv, AlltoAll, Gather, Scatter. Each peer gets its own
//! send and receive lanes on the point-to-point connections, so all transfers run concurrently
//! (NCCL lowers these to grouped `ncclSend`/`ncclRecv` the same way).

use super::{CollArgs, Kind, LaneKey, Loc, Step, p2p_conn};

type Lanes = Vec<(LaneKey, Vec<Step>)>;

fn send(peer: usize, bytes: usize, src: Loc) -> (LaneKey, Vec<Step>) {
    let mut s = Step::new(Kind::Send, bytes);
    s.src = Some(src);
    s.send = Some(p2p_conn(peer));
    (
        LaneKey::SendTo(peer),
        if bytes == 0 { vec![] } else { vec![s] },
    )
}

fn recv(peer: usize, bytes: usize, dst: Loc) -> (LaneKey, Vec<Step>) {
    let mut s = Step::new(Kind::Recv, bytes);
    s.dst = Some(dst);
    s.recv = Some(p2p_conn(peer));
    (
        LaneKey::RecvFrom(peer),
        if bytes == 0 { vec![] } else { vec![s] },
    )
}

fn copy(bytes: usize, src: Loc, dst: Loc) -> (LaneKey, Vec<Step>) {
    let mut s = Step::new(Kind::Copy, bytes);
    s.src = Some(src);
    s.dst = Some(dst);
    (LaneKey::Local, if bytes == 0 { vec![] } else { vec![s] })
}

/// `ncclSend` of the whole input to `args.root` (the peer).
pub fn send_op(args: &CollArgs) -> Lanes {
    vec![send(
        args.root,
        args.count * args.dtype.size(),
        Loc::input(0),
    )]
}

/// `ncclRecv` of the whole output from `args.root` (the peer).
pub fn recv_op(args: &CollArgs) -> Lanes {
    vec![recv(
        args.root,
        args.count * args.dtype.size(),
        Loc::output(0),
    )]
}

/// AlltoAll: block `p` of the input goes to rank `p`; block `p` of the output comes from it.
pub fn all_to_all(args: &CollArgs, rank: usize, n: usize) -> Lanes {
    let blk = args.count * args.dtype.size();
    let mut lanes = vec![copy(blk, Loc::input(rank * blk), Loc::output(rank * blk))];
    for p in (0..n).filter(|&p| p != rank) {
        lanes.push(send(p, blk, Loc::input(p * blk)));
        lanes.push(recv(p, blk, Loc::output(p * blk)));
    }
    lanes
}

/// Gather: every rank's input lands in block `rank` of the root's output.
pub fn gather(args: &CollArgs, rank: usize, n: usize) -> Lanes {
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
pub fn scatter(args: &CollArgs, rank: usize, n: usize) -> Lanes {
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
