//! Collective algorithms as data: a [`Plan`] says, per lane (a channel's ring, or a peer for
//! point-to-point traffic), the ordered steps this rank performs — send, receive, reduce, copy
//! over byte ranges of the input, output or scratch buffer, with which peer on which connection.
//! No I/O happens here; [`crate::exec`] runs plans, and its tests run every rank's plan on a
//! simulated fabric.
//!
//! Buffer conventions follow nccl.h: counts are elements; AllGather's count is per rank (output
//! holds `nranks × count`), ReduceScatter's count is per rank (input holds `nranks × count`),
//! AlltoAll/Gather/Scatter blocks are `count` elements per rank.

mod algo;
mod args;
mod p2p;
mod ring;
mod rings;
mod split;
mod step;
mod tree;

pub(crate) use crate::func::Func;
pub(crate) use algo::Algo;
pub use args::{CollArgs, InPlace};
pub(crate) use rings::{Geometry, Rings};
pub(crate) use step::{Buf, LaneKey, Loc, Op, Step};

use crate::conn::ConnKey;
use crate::error::Result;

/// A lane's key and its steps, in order.
pub(crate) type Lane = (LaneKey, Vec<Step>);

/// A rank's plan for one operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Lanes in a fixed order; each runs its steps in order, lanes run concurrently.
    pub lanes: Vec<Lane>,
    /// Scratch bytes the plan needs.
    pub scratch_bytes: usize,
    /// The algorithm chosen.
    pub algo: Algo,
    /// Channels the plan's lanes use.
    pub nchannels: usize,
    /// Every connection the plan sends on, once each.
    pub send_keys: Vec<ConnKey>,
    /// Every connection the plan receives on, once each.
    pub recv_keys: Vec<ConnKey>,
}

impl Plan {
    /// A plan of `lanes` (empty lanes dropped), listing the connections its steps use.
    pub(crate) fn new(lanes: Vec<Lane>, scratch_bytes: usize, algo: Algo) -> Plan {
        let lanes: Vec<Lane> = lanes
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
        let nchannels = lanes
            .iter()
            .filter(|(k, _)| matches!(k, LaneKey::Channel(_)))
            .count()
            .max(1);
        Plan {
            send_keys: keys(Step::send_key),
            recv_keys: keys(Step::recv_key),
            lanes,
            scratch_bytes,
            algo,
            nchannels,
        }
    }
}

/// Builds this rank's plan for `args` with `algo`, spreading ring algorithms over the first
/// `nchannels` channels of `rings` (at least one, at most all of them).
///
/// Errors: [`crate::error::Error::InvalidArgument`] for bad arguments (see [`CollArgs::validate`]).
pub(crate) fn plan(
    args: &CollArgs,
    rank: usize,
    nranks: usize,
    rings: &Rings,
    geo: Geometry,
    algo: Algo,
    nchannels: usize,
) -> Result<Plan> {
    args.validate(nranks)?;
    let nch = nchannels.clamp(1, rings.nchannels());
    let ring = ring::RingArgs {
        args,
        rank,
        n: nranks,
        rings,
        geo,
        nch,
    };
    let mut scratch = 0;
    let lanes = match (args.func, algo) {
        (Func::AllReduce, Algo::Tree) => tree::all_reduce(args, rank, nranks),
        (Func::AllReduce, _) => ring.all_reduce(),
        (Func::Broadcast, Algo::Tree) => tree::broadcast(args, rank, nranks),
        (Func::Broadcast, _) => ring.broadcast(),
        (Func::Reduce, Algo::Tree) => {
            let (lanes, s) = tree::reduce(args, rank, nranks);
            scratch = s;
            lanes
        }
        (Func::Reduce, _) => ring.reduce(),
        (Func::AllGather, _) => ring.all_gather(),
        (Func::ReduceScatter, _) => ring.reduce_scatter(),
        (Func::AllToAll, _) => p2p::all_to_all(args, rank, nranks),
        (Func::Gather, _) => p2p::gather(args, rank, nranks),
        (Func::Scatter, _) => p2p::scatter(args, rank, nranks),
        (Func::Send, _) => p2p::send_op(args),
        (Func::Recv, _) => p2p::recv_op(args),
    };
    Ok(Plan::new(lanes, scratch, algo))
}
