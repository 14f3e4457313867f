//! Latency-oriented algorithms for small messages: recursive doubling for AllReduce and binomial
//! trees for Broadcast and Reduce. They take `log2(nranks)` rounds where a ring takes
//! `nranks - 1` or `2 (nranks - 1)`, and run on channel 0.
//!
//! Recursive doubling (Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
//! Operations in MPICH", IJHPCA 2005): with `p` the largest power of two ≤ nranks, ranks
//! `p..nranks` first fold their data into rank `r - p`, the first `p` ranks exchange with partner
//! `r ^ 2^k` for each bit, and the folded ranks get the result back. Every rank combines the same
//! two values at each level, so all ranks end with bitwise identical results.

use super::{CollArgs, Lane, LaneKey, Loc, Op, Step};
use crate::conn::ConnKey;

/// The connection with `peer` (recursive doubling and trees run on channel 0).
fn conn(peer: usize) -> ConnKey {
    ConnKey::collective(peer, 0)
}

fn has_post(args: &CollArgs, n: usize) -> bool {
    args.op.lower(args.dtype, n).post_div.is_some()
}

/// Recursive-doubling AllReduce.
pub(super) fn all_reduce(args: &CollArgs, rank: usize, n: usize) -> Vec<Lane> {
    let bytes = args.count * args.dtype.size();
    if bytes == 0 {
        return Vec::new();
    }
    let (out, input) = (Loc::output(0), Loc::input(0));
    let load = Step::new(
        Op::Copy {
            src: input,
            dst: out,
        },
        bytes,
    );
    if n == 1 {
        return vec![(LaneKey::Local, vec![load.transforms(true, true)])];
    }
    let mut s = Vec::new();
    let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p;
    if rank >= p {
        let to = conn(rank - p);
        s.push(Step::new(Op::Send { src: input, to }, bytes).transforms(true, false));
        s.push(Step::new(Op::Recv { dst: out, from: to }, bytes));
        return vec![(LaneKey::Channel(0), s)];
    }
    let first = if rank < rem {
        let from = conn(rank + p);
        let op = Op::RecvReduceCopy {
            src: input,
            dst: out,
            from,
        };
        Step::new(op, bytes)
    } else {
        load
    };
    s.push(first.transforms(true, false));
    let mut mask = 1;
    while mask < p {
        let with = conn(rank ^ mask);
        s.push(Step::new(Op::Exchange { buf: out, with }, bytes));
        mask <<= 1;
    }
    if has_post(args, n) {
        let op = Op::Copy { src: out, dst: out };
        s.push(Step::new(op, bytes).transforms(false, true));
    }
    if rank < rem {
        let to = conn(rank + p);
        s.push(Step::new(Op::Send { src: out, to }, bytes));
    }
    vec![(LaneKey::Channel(0), s)]
}

/// Binomial-tree Broadcast from the root.
pub(super) fn broadcast(args: &CollArgs, rank: usize, n: usize) -> Vec<Lane> {
    let bytes = args.count * args.dtype.size();
    if bytes == 0 {
        return Vec::new();
    }
    let real = |v: usize| (v + args.root) % n;
    let vr = (rank + n - args.root) % n;
    let mut s = Vec::new();
    let mut mask = 1;
    if vr == 0 {
        let op = Op::Copy {
            src: Loc::input(0),
            dst: Loc::output(0),
        };
        s.push(Step::new(op, bytes));
        while mask < n {
            mask <<= 1;
        }
    } else {
        while vr & mask == 0 {
            mask <<= 1;
        }
        let op = Op::Recv {
            dst: Loc::output(0),
            from: conn(real(vr - mask)),
        };
        s.push(Step::new(op, bytes));
    }
    let src = if vr == 0 {
        Loc::input(0)
    } else {
        Loc::output(0)
    };
    let mut m = mask >> 1;
    while m > 0 {
        if vr + m < n {
            let to = conn(real(vr + m));
            s.push(Step::new(Op::Send { src, to }, bytes));
        }
        m >>= 1;
    }
    let lane = if n == 1 {
        LaneKey::Local
    } else {
        LaneKey::Channel(0)
    };
    vec![(lane, s)]
}

/// Binomial-tree Reduce to the root. Non-root ranks accumulate in scratch; returns the lanes and
/// the scratch bytes needed.
pub(super) fn reduce(args: &CollArgs, rank: usize, n: usize) -> (Vec<Lane>, usize) {
    let bytes = args.count * args.dtype.size();
    if bytes == 0 {
        return (Vec::new(), 0);
    }
    let real = |v: usize| (v + args.root) % n;
    let vr = (rank + n - args.root) % n;
    let (acc, scratch) = if vr == 0 {
        (Loc::output(0), 0)
    } else {
        (Loc::scratch(0), bytes)
    };
    let mut s = Vec::new();
    let load = Op::Copy {
        src: Loc::input(0),
        dst: acc,
    };
    s.push(Step::new(load, bytes).transforms(true, false));
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let to = conn(real(vr - mask));
            s.push(Step::new(Op::Send { src: acc, to }, bytes));
            break;
        }
        if vr + mask < n {
            let op = Op::RecvReduceCopy {
                src: acc,
                dst: acc,
                from: conn(real(vr + mask)),
            };
            s.push(Step::new(op, bytes));
        }
        mask <<= 1;
    }
    if vr == 0 && has_post(args, n) {
        let op = Op::Copy { src: acc, dst: acc };
        s.push(Step::new(op, bytes).transforms(false, true));
    }
    let lane = if n == 1 {
        LaneKey::Local
    } else {
        LaneKey::Channel(0)
    };
    (vec![(lane, s)], scratch)
}
