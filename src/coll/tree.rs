//! Latency-oriented algorithms for small messages: recursive doubling for AllReduce and binomial
//! trees for Broadcast and Reduce. They take `log2(nranks)` rounds where a ring takes
//! `nranks - 1` or `2 (nranks - 1)`, and run on channel 0.
//!
//! Recursive doubling (Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
//! Operations in MPICH", IJHPCA 2005): with `p` the largest power of two ≤ nranks, ranks
//! `p..nranks` first fold their data into rank `r - p`, the first `p` ranks exchange with partner
//! `r ^ 2^k` for each bit, and the folded ranks get the result back. Every rank combines the same
//! two values at each level, so all ranks end with bitwise identical results.

use super::{CollArgs, Kind, LaneKey, Loc, Step, coll_conn};

type Lanes = Vec<(LaneKey, Vec<Step>)>;

fn step(kind: Kind, bytes: usize, src: Option<Loc>, dst: Option<Loc>, peer: Option<usize>) -> Step {
    let sends = matches!(kind, Kind::Send | Kind::Exchange);
    let recvs = matches!(kind, Kind::Recv | Kind::RecvReduceCopy | Kind::Exchange);
    Step {
        kind,
        src,
        dst,
        bytes,
        send: peer.filter(|_| sends).map(|p| coll_conn(p, 0)),
        recv: peer.filter(|_| recvs).map(|p| coll_conn(p, 0)),
        pre: false,
        post: false,
    }
}

fn has_post(args: &CollArgs, n: usize) -> bool {
    args.op.lower(args.dtype, n).post_div.is_some()
}

/// Recursive-doubling AllReduce.
pub fn all_reduce(args: &CollArgs, rank: usize, n: usize) -> Lanes {
    let bytes = args.count * args.dtype.size();
    if bytes == 0 {
        return Vec::new();
    }
    let out = Some(Loc::output(0));
    let input = Some(Loc::input(0));
    let mut s = Vec::new();
    if n == 1 {
        let mut c = step(Kind::Copy, bytes, input, out, None);
        c.pre = true;
        c.post = true;
        return vec![(LaneKey::Local, vec![c])];
    }
    let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p;
    if rank >= p {
        let mut send = step(Kind::Send, bytes, input, None, Some(rank - p));
        send.pre = true;
        s.push(send);
        s.push(step(Kind::Recv, bytes, None, out, Some(rank - p)));
        return vec![(LaneKey::Channel(0), s)];
    }
    let mut first = if rank < rem {
        step(Kind::RecvReduceCopy, bytes, input, out, Some(rank + p))
    } else {
        step(Kind::Copy, bytes, input, out, None)
    };
    first.pre = true;
    s.push(first);
    let mut mask = 1;
    while mask < p {
        s.push(step(Kind::Exchange, bytes, None, out, Some(rank ^ mask)));
        mask <<= 1;
    }
    if has_post(args, n) {
        let mut post = step(Kind::Copy, bytes, out, out, None);
        post.post = true;
        s.push(post);
    }
    if rank < rem {
        s.push(step(Kind::Send, bytes, out, None, Some(rank + p)));
    }
    vec![(LaneKey::Channel(0), s)]
}

/// Binomial-tree Broadcast from the root.
pub fn broadcast(args: &CollArgs, rank: usize, n: usize) -> Lanes {
    let bytes = args.count * args.dtype.size();
    if bytes == 0 {
        return Vec::new();
    }
    let real = |v: usize| (v + args.root) % n;
    let vr = (rank + n - args.root) % n;
    let mut s = Vec::new();
    let mut mask = 1;
    if vr == 0 {
        s.push(step(
            Kind::Copy,
            bytes,
            Some(Loc::input(0)),
            Some(Loc::output(0)),
            None,
        ));
        while mask < n {
            mask <<= 1;
        }
    } else {
        while vr & mask == 0 {
            mask <<= 1;
        }
        s.push(step(
            Kind::Recv,
            bytes,
            None,
            Some(Loc::output(0)),
            Some(real(vr - mask)),
        ));
    }
    let src = if vr == 0 {
        Loc::input(0)
    } else {
        Loc::output(0)
    };
    let mut m = mask >> 1;
    while m > 0 {
        if vr + m < n {
            s.push(step(Kind::Send, bytes, Some(src), None, Some(real(vr + m))));
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
pub fn reduce(args: &CollArgs, rank: usize, n: usize) -> (Lanes, usize) {
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
    let mut load = step(Kind::Copy, bytes, Some(Loc::input(0)), Some(acc), None);
    load.pre = true;
    s.push(load);
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            s.push(step(
                Kind::Send,
                bytes,
                Some(acc),
                None,
                Some(real(vr - mask)),
            ));
            break;
        }
        if vr + mask < n {
            s.push(step(
                Kind::RecvReduceCopy,
                bytes,
                Some(acc),
                Some(acc),
                Some(real(vr + mask)),
            ));
        }
        mask <<= 1;
    }
    if vr == 0 && has_post(args, n) {
        let mut post = step(Kind::Copy, bytes, Some(acc), Some(acc), None);
        post.post = true;
        s.push(post);
    }
    let lane = if n == 1 {
        LaneKey::Local
    } else {
        LaneKey::Channel(0)
    };
    (vec![(lane, s)], scratch)
}
