//! Ring algorithms (NCCL's `runRing` device functions, internals §3.5/§5.4).
//!
//! Data is split over channels; each channel runs its own ring in the order the channel layout
//! gives. AllReduce, AllGather and ReduceScatter loop over the channel's range in pieces of
//! `nranks × chunk`, so no ring step ever sends more than one chunk (half the FIFO) and the ring
//! cannot deadlock. Broadcast and Reduce are chains from/to the root, streamed slot by slot.

use super::split::{line_elems, split_even};
use super::{CollArgs, Geometry, Lane, LaneKey, Loc, Op, Rings, Step};
use crate::conn::ConnKey;

/// What every ring builder needs: the operation, this rank among `n`, the channel layout and
/// geometry, and how many channels (`nch` ≤ the layout's) the operation is spread over.
pub(super) struct RingArgs<'a> {
    pub args: &'a CollArgs,
    pub rank: usize,
    pub n: usize,
    pub rings: &'a Rings,
    pub geo: Geometry,
    pub nch: usize,
}

fn local_copy(bytes: usize, src: Loc, dst: Loc, pre: bool, post: bool) -> Vec<Lane> {
    if bytes == 0 {
        return Vec::new();
    }
    let s = Step::new(Op::Copy { src, dst }, bytes).transforms(pre, post);
    vec![(LaneKey::Local, vec![s])]
}

/// Appends one channel's steps, with the connections to its ring neighbours.
struct Emit<'a> {
    steps: &'a mut Vec<Step>,
    /// Sends go to the next rank.
    to: ConnKey,
    /// Receives come from the previous rank.
    from: ConnKey,
}

impl Emit<'_> {
    fn push(&mut self, op: Op, bytes: usize, pre: bool, post: bool) {
        if bytes > 0 {
            self.steps.push(Step::new(op, bytes).transforms(pre, post));
        }
    }

    fn send(&mut self, bytes: usize, src: Loc, pre: bool) {
        let to = self.to;
        self.push(Op::Send { src, to }, bytes, pre, false);
    }

    fn copy_send(&mut self, bytes: usize, src: Loc, dst: Loc) {
        let to = self.to;
        self.push(Op::CopySend { src, dst, to }, bytes, false, false);
    }

    fn recv(&mut self, bytes: usize, dst: Loc) {
        let from = self.from;
        self.push(Op::Recv { dst, from }, bytes, false, false);
    }

    fn recv_copy_send(&mut self, bytes: usize, dst: Loc) {
        let (from, to) = (self.from, self.to);
        self.push(Op::RecvCopySend { dst, from, to }, bytes, false, false);
    }

    fn recv_reduce_send(&mut self, bytes: usize, src: Loc) {
        let (from, to) = (self.from, self.to);
        self.push(Op::RecvReduceSend { src, from, to }, bytes, true, false);
    }

    fn recv_reduce_copy(&mut self, bytes: usize, src: Loc, dst: Loc) {
        let from = self.from;
        self.push(Op::RecvReduceCopy { src, dst, from }, bytes, true, true);
    }

    fn recv_reduce_copy_send(&mut self, bytes: usize, src: Loc, dst: Loc) {
        let (from, to) = (self.from, self.to);
        let op = Op::RecvReduceCopySend { src, dst, from, to };
        self.push(op, bytes, true, true);
    }
}

impl RingArgs<'_> {
    /// The emitter for channel `c` and this rank's position in its ring.
    fn channel<'s>(&self, c: usize, steps: &'s mut Vec<Step>) -> (usize, Emit<'s>) {
        let (idx, next, prev) = self.rings.neighbours(c, self.rank);
        let e = Emit {
            steps,
            to: ConnKey::collective(next, c),
            from: ConnKey::collective(prev, c),
        };
        (idx, e)
    }

    /// Ring AllReduce: reduce-scatter then all-gather around each channel's ring.
    pub(super) fn all_reduce(&self) -> Vec<Lane> {
        let (args, n) = (self.args, self.n);
        let es = args.dtype.size();
        let bytes = args.count * es;
        if n == 1 {
            return local_copy(bytes, Loc::input(0), Loc::output(0), true, true);
        }
        let unit = line_elems(es);
        let chunk_elems = (self.geo.chunk_bytes() / es).max(unit);
        let mut lanes = Vec::with_capacity(self.nch);
        for (c, (cstart, clen)) in split_even(args.count, self.nch, unit)
            .into_iter()
            .enumerate()
        {
            let mut steps = Vec::new();
            let (idx, mut e) = self.channel(c, &mut steps);
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
                e.send(b, Loc::input(o), true);
                for k in 2..n {
                    let (o, b) = chunk(pos(k));
                    e.recv_reduce_send(b, Loc::input(o));
                }
                let (o, b) = chunk(idx);
                e.recv_reduce_copy_send(b, Loc::input(o), Loc::output(o));
                for k in 1..n - 1 {
                    let (o, b) = chunk(pos(k));
                    e.recv_copy_send(b, Loc::output(o));
                }
                let (o, b) = chunk(pos(n - 1));
                e.recv(b, Loc::output(o));
                base += rem;
            }
            lanes.push((LaneKey::Channel(c as u16), steps));
        }
        lanes
    }

    /// Ring Broadcast: a chain from the root around each channel's ring.
    pub(super) fn broadcast(&self) -> Vec<Lane> {
        let n = self.n;
        if n == 1 {
            let bytes = self.args.count * self.args.dtype.size();
            return local_copy(bytes, Loc::input(0), Loc::output(0), false, false);
        }
        // Position 0 is the root; the chain runs on from it and ends at position n - 1.
        self.chain(|e, p, o, b| match p {
            0 => e.copy_send(b, Loc::input(o), Loc::output(o)),
            _ if p == n - 1 => e.recv(b, Loc::output(o)),
            _ => e.recv_copy_send(b, Loc::output(o)),
        })
    }

    /// Ring Reduce: a chain that starts after the root and ends at it.
    pub(super) fn reduce(&self) -> Vec<Lane> {
        if self.n == 1 {
            let bytes = self.args.count * self.args.dtype.size();
            return local_copy(bytes, Loc::input(0), Loc::output(0), true, true);
        }
        // Position 1 (the root's successor) starts the chain; the root (position 0) ends it.
        self.chain(|e, p, o, b| match p {
            0 => e.recv_reduce_copy(b, Loc::input(o), Loc::output(o)),
            1 => e.send(b, Loc::input(o), true),
            _ => e.recv_reduce_send(b, Loc::input(o)),
        })
    }

    /// A rooted chain around each channel's ring (Broadcast, Reduce): the buffer is split
    /// evenly over the channels, and `step(emit, p, offset, bytes)` emits this rank's one step
    /// for its channel slice, `p` being the rank's position after the root along that ring.
    fn chain(&self, step: impl Fn(&mut Emit<'_>, usize, usize, usize)) -> Vec<Lane> {
        let (args, n) = (self.args, self.n);
        let es = args.dtype.size();
        let mut lanes = Vec::with_capacity(self.nch);
        for (c, (start, len)) in split_even(args.count, self.nch, line_elems(es))
            .into_iter()
            .enumerate()
        {
            let root_idx = self.rings.position(c, args.root);
            let mut steps = Vec::new();
            let (idx, mut e) = self.channel(c, &mut steps);
            step(&mut e, (idx + n - root_idx) % n, start * es, len * es);
            lanes.push((LaneKey::Channel(c as u16), steps));
        }
        lanes
    }

    /// Ring AllGather: every rank's block travels once around each channel's ring.
    pub(super) fn all_gather(&self) -> Vec<Lane> {
        let (args, n, rank) = (self.args, self.n, self.rank);
        let (es, m) = (args.dtype.size(), args.count);
        if n == 1 {
            return local_copy(m * es, Loc::input(0), Loc::output(0), false, false);
        }
        self.per_rank_blocks(|e, ring, idx, off, b| {
            let block = |q: usize| Loc::output((q * m + off) * es);
            e.copy_send(b, Loc::input(off * es), block(rank));
            for k in 1..n - 1 {
                e.recv_copy_send(b, block(ring[(idx + n - k) % n]));
            }
            e.recv(b, block(ring[(idx + 1) % n]));
        })
    }

    /// Ring ReduceScatter: every rank's block is reduced once around each channel's ring and
    /// ends at its owner.
    pub(super) fn reduce_scatter(&self) -> Vec<Lane> {
        let (args, n, rank) = (self.args, self.n, self.rank);
        let (es, m) = (args.dtype.size(), args.count);
        if n == 1 {
            return local_copy(m * es, Loc::input(0), Loc::output(0), true, true);
        }
        self.per_rank_blocks(|e, ring, idx, off, b| {
            let block = |q: usize| Loc::input((q * m + off) * es);
            let owner = |k: usize| ring[(idx + n - k) % n];
            e.send(b, block(owner(1)), true);
            for k in 2..n {
                e.recv_reduce_send(b, block(owner(k)));
            }
            e.recv_reduce_copy(b, block(rank), Loc::output(off * es));
        })
    }

    /// The channel and chunk loops AllGather and ReduceScatter share: each rank's block of
    /// `args.count` elements is split evenly over the channels, and each channel's slice into
    /// chunks of at most `geo.chunk_bytes()`. For every chunk, `chunk(emit, ring, idx, offset,
    /// bytes)` emits the steps, with `ring` the channel's order, `idx` this rank's place in it,
    /// `offset` the chunk's first element within a block and `bytes` its length.
    fn per_rank_blocks(
        &self,
        chunk: impl Fn(&mut Emit<'_>, &[usize], usize, usize, usize),
    ) -> Vec<Lane> {
        let (es, m) = (self.args.dtype.size(), self.args.count);
        let unit = line_elems(es);
        let chunk_elems = (self.geo.chunk_bytes() / es).max(unit);
        let mut lanes = Vec::with_capacity(self.nch);
        for (c, (start, len)) in split_even(m, self.nch, unit).into_iter().enumerate() {
            let mut steps = Vec::new();
            let (idx, mut e) = self.channel(c, &mut steps);
            let mut base = 0;
            while base < len {
                let l = (len - base).min(chunk_elems);
                chunk(&mut e, self.rings.ring(c), idx, start + base, l * es);
                base += l;
            }
            lanes.push((LaneKey::Channel(c as u16), steps));
        }
        lanes
    }
}
