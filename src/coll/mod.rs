//! Collective algorithms as data: a [`Plan`] says, per lane (a channel's ring, or a peer for
//! point-to-point traffic), the ordered steps this rank performs — send, receive, reduce, copy
//! over byte ranges of the input, output or scratch buffer, with which peer on which connection.
//! No I/O happens here; [`crate::exec`] runs plans, and the tests run every rank's plan on a
//! simulated fabric.
//!
//! Buffer conventions follow nccl.h: counts are elements; AllGather's count is per rank (output
//! holds `nranks × count`), ReduceScatter's count is per rank (input holds `nranks × count`),
//! AlltoAll/Gather/Scatter blocks are `count` elements per rank.

mod p2p;
mod ring;
mod select;
mod split;
mod tree;

#[cfg(test)]
mod sim;

pub use crate::func::Func;
pub use select::{Algo, choose};

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::RedOp;
use crate::transport::fifo::NSLOTS;
use crate::transport::setup::ConnKey;

/// One operation as the caller asked for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollArgs {
    /// The function.
    pub func: Func,
    /// Element count, with nccl.h's meaning for the function.
    pub count: usize,
    /// Element type.
    pub dtype: DataType,
    /// Reduction (ignored by non-reducing functions).
    pub op: RedOp,
    /// Root rank for rooted functions; the peer for Send/Recv.
    pub root: usize,
    /// The send data already sits at its in-place position in the output buffer.
    pub in_place: bool,
}

impl CollArgs {
    /// Checks counts, root and peer against `nranks`.
    ///
    /// Errors: [`Error::InvalidArgument`] saying which argument is wrong and its valid range.
    pub fn validate(&self, nranks: usize) -> Result<()> {
        let f = self.func.nccl_name();
        let esize = self.dtype.size();
        for (what, elems) in [
            ("input", self.func.input_elems(self.count, nranks)),
            ("output", self.func.output_elems(self.count, nranks)),
        ] {
            let ok = elems
                .and_then(|e| e.checked_mul(esize))
                .is_some_and(|b| b <= isize::MAX as usize);
            if !ok {
                return Err(Error::invalid_arg(format!(
                    "{f}: count {} of {} on {nranks} ranks overflows the {what} buffer size",
                    self.count, self.dtype
                )));
            }
        }
        if (self.func.rooted() || matches!(self.func, Func::Send | Func::Recv))
            && self.root >= nranks
        {
            let what = if matches!(self.func, Func::Send | Func::Recv) {
                "peer"
            } else {
                "root"
            };
            return Err(Error::invalid_arg(format!(
                "{f}: {what} {} is not a rank of this communicator (ranks are 0..{})",
                self.root,
                nranks - 1
            )));
        }
        Ok(())
    }

    /// Bytes of the input buffer.
    pub fn input_bytes(&self, nranks: usize) -> usize {
        self.func.input_elems(self.count, nranks).unwrap_or(0) * self.dtype.size()
    }

    /// Bytes of the output buffer.
    pub fn output_bytes(&self, nranks: usize) -> usize {
        self.func.output_elems(self.count, nranks).unwrap_or(0) * self.dtype.size()
    }
}

/// Where input and output lie inside the single buffer of an in-place operation (nccl.h's
/// in-place rules: AllGather's input is block `rank` of the output, ReduceScatter's output is
/// block `rank` of the input, Gather's input is block `root` of the root's output, Scatter's
/// output is block `root` of the root's input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    /// Bytes of the one buffer.
    pub buf_bytes: usize,
    /// Input byte range (offset, length) in the buffer.
    pub input: (usize, usize),
    /// Output byte range (offset, length) in the buffer.
    pub output: (usize, usize),
}

impl CollArgs {
    /// The in-place layout for this rank. In-place AlltoAll reads a snapshot of the buffer taken
    /// when the operation starts (NCCL has no in-place AlltoAll; rnccl makes it well defined).
    ///
    /// Errors: none today; the `Result` leaves room for functions without an in-place form.
    pub fn in_place_layout(&self, rank: usize, nranks: usize) -> Result<InPlace> {
        let blk = self.count * self.dtype.size();
        let all = blk * nranks;
        let l = |buf_bytes, input, output| {
            Ok(InPlace {
                buf_bytes,
                input,
                output,
            })
        };
        match self.func {
            Func::AllReduce | Func::Broadcast | Func::Reduce => l(blk, (0, blk), (0, blk)),
            Func::AllGather => l(all, (rank * blk, blk), (0, all)),
            Func::ReduceScatter => l(all, (0, all), (rank * blk, blk)),
            Func::Gather if rank == self.root => l(all, (rank * blk, blk), (0, all)),
            Func::Gather => l(blk, (0, blk), (0, 0)),
            Func::Scatter if rank == self.root => l(all, (0, all), (rank * blk, blk)),
            Func::Scatter => l(blk, (0, 0), (0, blk)),
            Func::Send => l(blk, (0, blk), (0, 0)),
            Func::Recv => l(blk, (0, 0), (0, blk)),
            Func::AllToAll => l(all, (0, all), (0, all)),
        }
    }
}

/// Which buffer a location refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    /// The caller's send buffer.
    Input,
    /// The caller's receive buffer.
    Output,
    /// Plan-owned temporary memory.
    Scratch,
}

/// A byte offset into one of the buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    /// The buffer.
    pub buf: Buf,
    /// Byte offset.
    pub off: usize,
}

impl Loc {
    /// Offset `off` of the input buffer.
    pub fn input(off: usize) -> Loc {
        Loc {
            buf: Buf::Input,
            off,
        }
    }

    /// Offset `off` of the output buffer.
    pub fn output(off: usize) -> Loc {
        Loc {
            buf: Buf::Output,
            off,
        }
    }

    /// Offset `off` of the scratch buffer.
    pub fn scratch(off: usize) -> Loc {
        Loc {
            buf: Buf::Scratch,
            off,
        }
    }
}

/// The primitive a step performs (NCCL's `prims` vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Send `pre(src)`.
    Send,
    /// Copy `src` to `dst` (unless equal) and send it.
    CopySend,
    /// Receive into `dst`.
    Recv,
    /// Receive into `dst` and forward the same bytes.
    RecvCopySend,
    /// Send `recv ⊕ pre(src)`.
    RecvReduceSend,
    /// `dst = post(recv ⊕ pre(src))`.
    RecvReduceCopy,
    /// `dst = post(recv ⊕ pre(src))` and send it.
    RecvReduceCopySend,
    /// Send `dst`, receive the peer's, `dst = dst ⊕ recv` (recursive doubling).
    Exchange,
    /// `dst = post(pre(src))`, no communication.
    Copy,
}

/// One step of a lane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// What to do.
    pub kind: Kind,
    /// Source location (local data read by the step).
    pub src: Option<Loc>,
    /// Destination location.
    pub dst: Option<Loc>,
    /// Bytes moved.
    pub bytes: usize,
    /// Connection the step sends on.
    pub send: Option<ConnKey>,
    /// Connection the step receives on.
    pub recv: Option<ConnKey>,
    /// Apply the operation's pre-multiplier to `src`.
    pub pre: bool,
    /// Apply the operation's post-divisor to the result.
    pub post: bool,
}

impl Step {
    fn new(kind: Kind, bytes: usize) -> Step {
        Step {
            kind,
            src: None,
            dst: None,
            bytes,
            send: None,
            recv: None,
            pre: false,
            post: false,
        }
    }
}

/// What a lane serialises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LaneKey {
    /// A collective channel.
    Channel(u16),
    /// Point-to-point sends to a peer.
    SendTo(usize),
    /// Point-to-point receives from a peer.
    RecvFrom(usize),
    /// Local copies.
    Local,
}

/// A rank's plan for one operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Lanes in a fixed order; each runs its steps in order, lanes run concurrently.
    pub lanes: Vec<(LaneKey, Vec<Step>)>,
    /// Scratch bytes the plan needs.
    pub scratch_bytes: usize,
    /// The algorithm chosen.
    pub algo: Algo,
    /// Every connection the plan sends on, once each.
    pub send_keys: Vec<ConnKey>,
    /// Every connection the plan receives on, once each.
    pub recv_keys: Vec<ConnKey>,
}

/// How channels are laid out for collectives: per channel, the ring order of all ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rings {
    /// `order[c]` is a permutation of `0..nranks`: channel `c`'s ring.
    pub order: Vec<Vec<usize>>,
}

impl Rings {
    /// Every channel in rank order.
    pub fn identity(nranks: usize, nchannels: usize) -> Rings {
        Rings {
            order: vec![(0..nranks).collect(); nchannels.max(1)],
        }
    }

    /// Number of channels.
    pub fn nchannels(&self) -> usize {
        self.order.len()
    }
}

/// Geometry the plans need: slot size and how many slots a ring chunk spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per FIFO slot (`NCCL_BUFFSIZE / NCCL_STEPS`).
    pub slot_bytes: usize,
}

impl Geometry {
    /// Bytes of one ring chunk: half the FIFO (NCCL's `CHUNKSTEPS = NCCL_STEPS/2` for AllReduce,
    /// AllGather, ReduceScatter, internals §5.4). A ring step never sends more than this, which
    /// keeps every ring deadlock-free.
    pub fn chunk_bytes(&self) -> usize {
        self.slot_bytes * (NSLOTS / 2)
    }
}

/// Builds this rank's plan for `args`.
///
/// Errors: [`Error::InvalidArgument`] for bad arguments, [`Error::InvalidUsage`] when
/// `NCCL_ALGO` allows nothing rnccl can run for the function.
pub fn plan(
    args: &CollArgs,
    rank: usize,
    nranks: usize,
    rings: &Rings,
    geo: Geometry,
    algo: Algo,
) -> Result<Plan> {
    args.validate(nranks)?;
    let mut scratch = 0;
    let lanes = match (args.func, algo) {
        (Func::AllReduce, Algo::Tree) => tree::all_reduce(args, rank, nranks),
        (Func::AllReduce, _) => ring::all_reduce(args, rank, nranks, rings, geo),
        (Func::Broadcast, Algo::Tree) => tree::broadcast(args, rank, nranks),
        (Func::Broadcast, _) => ring::broadcast(args, rank, nranks, rings, geo),
        (Func::Reduce, Algo::Tree) => {
            let (lanes, s) = tree::reduce(args, rank, nranks);
            scratch = s;
            lanes
        }
        (Func::Reduce, _) => ring::reduce(args, rank, nranks, rings, geo),
        (Func::AllGather, _) => ring::all_gather(args, rank, nranks, rings, geo),
        (Func::ReduceScatter, _) => ring::reduce_scatter(args, rank, nranks, rings, geo),
        (Func::AllToAll, _) => p2p::all_to_all(args, rank, nranks),
        (Func::Gather, _) => p2p::gather(args, rank, nranks),
        (Func::Scatter, _) => p2p::scatter(args, rank, nranks),
        (Func::Send, _) => p2p::send_op(args),
        (Func::Recv, _) => p2p::recv_op(args),
    };
    let lanes: Vec<(LaneKey, Vec<Step>)> = lanes
        .into_iter()
        .filter(|(_, steps)| !steps.is_empty())
        .collect();
    let keys = |pick: fn(&Step) -> Option<ConnKey>| {
        let mut k: Vec<ConnKey> = lanes
            .iter()
            .flat_map(|(_, s)| s.iter().filter_map(pick))
            .collect();
        k.sort_unstable();
        k.dedup();
        k
    };
    Ok(Plan {
        send_keys: keys(|s| s.send),
        recv_keys: keys(|s| s.recv),
        lanes,
        scratch_bytes: scratch,
        algo,
    })
}

/// Connection key for collectives on `channel` with `peer`.
fn coll_conn(peer: usize, channel: usize) -> ConnKey {
    ConnKey {
        peer,
        channel: channel as u16,
        index: 0,
    }
}

/// Connection key for point-to-point traffic with `peer`.
fn p2p_conn(peer: usize) -> ConnKey {
    ConnKey {
        peer,
        channel: 0,
        index: 1,
    }
}
