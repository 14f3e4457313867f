//! Ring algorithms (NCCL's `runRing` device functions, internals §3.5/§5.4).
//!
//! Data is split over channels; each channel runs its own ring in the order the channel layout
//! gives. AllReduce, AllGather and ReduceScatter loop over the channel's range in pieces of
//! `nranks × chunk`, so no ring step ever sends more than one chunk (half the FIFO) and the ring
//! cannot deadlock. Broadcast and Reduce are chains from/to the root, streamed slot by slot.

use super::split::{channels_for, line_elems, split_even};
use super::{CollArgs, Geometry, Kind, LaneKey, Loc, Rings, Step, coll_conn};

type Lanes = Vec<(LaneKey, Vec<Step>)>;

/// Ring neighbours of `rank` on channel `c`: (position in the ring, next, prev).
fn neighbours(rings: &Rings, c: usize, rank: usize) -> (usize, usize, usize) {
    let ring = &rings.order[c];
    let n = ring.len();
    let idx = ring.iter().position(|&r| r == rank).expect("rank in ring");
    (idx, ring[(idx + 1) % n], ring[(idx + n - 1) % n])
}

fn local_copy(bytes: usize, src: Loc, dst: Loc, pre: bool, post: bool) -> Lanes {
    if bytes == 0 {
        return Vec::new();
    }
    let mut s = Step::new(Kind::Copy, bytes);
    s.src = Some(src);
    s.dst = Some(dst);
    s.pre = pre;
    s.post = post;
    vec![(LaneKey::Local, vec![s])]
}

struct Emit<'a> {
    steps: &'a mut Vec<Step>,
    next: usize,
    prev: usize,
    channel: usize,
}

impl Emit<'_> {
    fn push(
        &mut self,
        kind: Kind,
        bytes: usize,
        src: Option<Loc>,
        dst: Option<Loc>,
        pre: bool,
        post: bool,
    ) {
        if bytes == 0 {
            return;
        }
        let sends = matches!(
            kind,
            Kind::Send
                | Kind::CopySend
                | Kind::RecvCopySend
                | Kind::RecvReduceSend
                | Kind::RecvReduceCopySend
        );
        let recvs = matches!(
            kind,
            Kind::Recv
                | Kind::RecvCopySend
                | Kind::RecvReduceSend
                | Kind::RecvReduceCopy
                | Kind::RecvReduceCopySend
        );
        self.steps.push(Step {
            kind,
            src,
            dst,
            bytes,
            send: sends.then(|| coll_conn(self.next, self.channel)),
            recv: recvs.then(|| coll_conn(self.prev, self.channel)),
            pre,
            post,
        });
    }
}

/// Ring AllReduce: reduce-scatter then all-gather around each channel's ring.
pub fn all_reduce(args: &CollArgs, rank: usize, n: usize, rings: &Rings, geo: Geometry) -> Lanes {
    let es = args.dtype.size();
    let bytes = args.count * es;
    if n == 1 {
        return local_copy(bytes, Loc::input(0), Loc::output(0), true, true);
    }
    let nch = channels_for(bytes, geo.chunk_bytes(), rings.nchannels());
    let unit = line_elems(es);
    let chunk_elems = (geo.chunk_bytes() / es).max(unit);
    let mut lanes = Vec::with_capacity(nch);
    for (c, (cstart, clen)) in split_even(args.count, nch, unit).into_iter().enumerate() {
        let (idx, next, prev) = neighbours(rings, c, rank);
        let mut steps = Vec::new();
        let mut e = Emit {
            steps: &mut steps,
            next,
            prev,
            channel: c,
        };
        let loop_elems = n * chunk_elems;
        let mut base = 0;
        while base < clen {
            let rem = (clen - base).min(loop_elems);
            let real = rem.div_ceil(n).next_multiple_of(unit).min(chunk_elems);
            // Chunk at ring position j: (byte offset, bytes).
            let chunk = |j: usize| {
                let lo = (j * real).min(rem);
                let hi = ((j + 1) * real).min(rem);
                ((cstart + base + lo) * es, (hi - lo) * es)
            };
            let pos = |k: usize| (idx + n - k) % n;
            let (o, b) = chunk(pos(1));
            e.push(Kind::Send, b, Some(Loc::input(o)), None, true, false);
            for k in 2..n {
                let (o, b) = chunk(pos(k));
                e.push(
                    Kind::RecvReduceSend,
                    b,
                    Some(Loc::input(o)),
                    None,
                    true,
                    false,
                );
            }
            let (o, b) = chunk(idx);
            e.push(
                Kind::RecvReduceCopySend,
                b,
                Some(Loc::input(o)),
                Some(Loc::output(o)),
                true,
                true,
            );
            for k in 1..n - 1 {
                let (o, b) = chunk(pos(k));
                e.push(
                    Kind::RecvCopySend,
                    b,
                    None,
                    Some(Loc::output(o)),
                    false,
                    false,
                );
            }
            let (o, b) = chunk(pos(n - 1));
            e.push(Kind::Recv, b, None, Some(Loc::output(o)), false, false);
            base += rem;
        }
        lanes.push((LaneKey::Channel(c as u16), steps));
    }
    lanes
}

/// Ring Broadcast: a chain from the root around each channel's ring.
pub fn broadcast(args: &CollArgs, rank: usize, n: usize, rings: &Rings, geo: Geometry) -> Lanes {
    if n == 1 {
        let bytes = args.count * args.dtype.size();
        return local_copy(bytes, Loc::input(0), Loc::output(0), false, false);
    }
    // Position 0 is the root; the chain runs on from it and ends at position n - 1.
    chain(args, rank, n, rings, geo, |e, p, o, b| match p {
        0 => e.push(
            Kind::CopySend,
            b,
            Some(Loc::input(o)),
            Some(Loc::output(o)),
            false,
            false,
        ),
        _ if p == n - 1 => e.push(Kind::Recv, b, None, Some(Loc::output(o)), false, false),
        _ => e.push(
            Kind::RecvCopySend,
            b,
            None,
            Some(Loc::output(o)),
            false,
            false,
        ),
    })
}

/// Ring Reduce: a chain that starts after the root and ends at it.
pub fn reduce(args: &CollArgs, rank: usize, n: usize, rings: &Rings, geo: Geometry) -> Lanes {
    if n == 1 {
        let bytes = args.count * args.dtype.size();
        return local_copy(bytes, Loc::input(0), Loc::output(0), true, true);
    }
    // Position 1 (the root's successor) starts the chain; the root (position 0) ends it.
    chain(args, rank, n, rings, geo, |e, p, o, b| match p {
        0 => e.push(
            Kind::RecvReduceCopy,
            b,
            Some(Loc::input(o)),
            Some(Loc::output(o)),
            true,
            true,
        ),
        1 => e.push(Kind::Send, b, Some(Loc::input(o)), None, true, false),
        _ => e.push(
            Kind::RecvReduceSend,
            b,
            Some(Loc::input(o)),
            None,
            true,
            false,
        ),
    })
}

/// A rooted chain around each channel's ring (Broadcast, Reduce): the buffer is split evenly
/// over the channels, and `step(emit, p, offset, bytes)` emits this rank's one step for its
/// channel slice, `p` being the rank's position after the root along that channel's ring.
fn chain(
    args: &CollArgs,
    rank: usize,
    n: usize,
    rings: &Rings,
    geo: Geometry,
    step: impl Fn(&mut Emit<'_>, usize, usize, usize),
) -> Lanes {
    let es = args.dtype.size();
    let nch = channels_for(args.count * es, geo.chunk_bytes(), rings.nchannels());
    let mut lanes = Vec::with_capacity(nch);
    for (c, (start, len)) in split_even(args.count, nch, line_elems(es))
        .into_iter()
        .enumerate()
    {
        let (idx, next, prev) = neighbours(rings, c, rank);
        let root_idx = rings.order[c]
            .iter()
            .position(|&r| r == args.root)
            .expect("root in ring");
        let mut steps = Vec::new();
        let mut e = Emit {
            steps: &mut steps,
            next,
            prev,
            channel: c,
        };
        step(&mut e, (idx + n - root_idx) % n, start * es, len * es);
        lanes.push((LaneKey::Channel(c as u16), steps));
    }
    lanes
}

/// Ring AllGather: every rank's block travels once around each channel's ring.
pub fn all_gather(args: &CollArgs, rank: usize, n: usize, rings: &Rings, geo: Geometry) -> Lanes {
    let (es, m) = (args.dtype.size(), args.count);
    if n == 1 {
        return local_copy(m * es, Loc::input(0), Loc::output(0), false, false);
    }
    per_rank_blocks(args, rank, n, rings, geo, |e, ring, idx, off, b| {
        let block = |q: usize| Loc::output((q * m + off) * es);
        e.push(
            Kind::CopySend,
            b,
            Some(Loc::input(off * es)),
            Some(block(rank)),
            false,
            false,
        );
        for k in 1..n - 1 {
            e.push(
                Kind::RecvCopySend,
                b,
                None,
                Some(block(ring[(idx + n - k) % n])),
                false,
                false,
            );
        }
        e.push(
            Kind::Recv,
            b,
            None,
            Some(block(ring[(idx + 1) % n])),
            false,
            false,
        );
    })
}

/// Ring ReduceScatter: every rank's block is reduced once around each channel's ring and ends
/// at its owner.
pub fn reduce_scatter(
    args: &CollArgs,
    rank: usize,
    n: usize,
    rings: &Rings,
    geo: Geometry,
) -> Lanes {
    let (es, m) = (args.dtype.size(), args.count);
    if n == 1 {
        return local_copy(m * es, Loc::input(0), Loc::output(0), true, true);
    }
    per_rank_blocks(args, rank, n, rings, geo, |e, ring, idx, off, b| {
        let block = |q: usize| Loc::input((q * m + off) * es);
        let owner = |k: usize| ring[(idx + n - k) % n];
        e.push(Kind::Send, b, Some(block(owner(1))), None, true, false);
        for k in 2..n {
            e.push(
                Kind::RecvReduceSend,
                b,
                Some(block(owner(k))),
                None,
                true,
                false,
            );
        }
        e.push(
            Kind::RecvReduceCopy,
            b,
            Some(block(rank)),
            Some(Loc::output(off * es)),
            true,
            true,
        );
    })
}

/// The channel and chunk loops AllGather and ReduceScatter share: each rank's block of
/// `args.count` elements is split evenly over the channels, and each channel's slice into
/// chunks of at most `geo.chunk_bytes()`. For every chunk, `chunk(emit, ring, idx, offset,
/// bytes)` emits the steps, with `ring` the channel's order, `idx` this rank's place in it,
/// `offset` the chunk's first element within a block and `bytes` its length.
fn per_rank_blocks(
    args: &CollArgs,
    rank: usize,
    n: usize,
    rings: &Rings,
    geo: Geometry,
    chunk: impl Fn(&mut Emit<'_>, &[usize], usize, usize, usize),
) -> Lanes {
    let (es, m) = (args.dtype.size(), args.count);
    let nch = channels_for(m * n * es, geo.chunk_bytes(), rings.nchannels());
    let unit = line_elems(es);
    let chunk_elems = (geo.chunk_bytes() / es).max(unit);
    let mut lanes = Vec::with_capacity(nch);
    for (c, (start, len)) in split_even(m, nch, unit).into_iter().enumerate() {
        let (idx, next, prev) = neighbours(rings, c, rank);
        let mut steps = Vec::new();
        let mut e = Emit {
            steps: &mut steps,
            next,
            prev,
            channel: c,
        };
        let mut base = 0;
        while base < len {
            let l = (len - base).min(chunk_elems);
            chunk(&mut e, &rings.order[c], idx, start + base, l * es);
            base += l;
        }
        lanes.push((LaneKey::Channel(c as u16), steps));
    }
    lanes
}
