//! Choosing the algorithm for an operation: by size, overridable with `NCCL_ALGO`.
//!
//! The latency algorithms ([`Algo::Tree`]: recursive doubling for AllReduce, binomial trees for
//! Broadcast and Reduce) win while a transfer is dominated by per-round latency; rings win once
//! bandwidth dominates, because they move each byte over each link once. The thresholds below
//! were measured with `rnccl bench` on 2-core hosts (see README "Performance").

use super::Func;
use crate::config::syntax::{ALGORITHMS, AlgoProtoList};
use crate::error::{Error, Result};

/// An algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Algo {
    /// Rings over channels (NCCL's `Ring`).
    Ring,
    /// Latency-oriented: recursive doubling / binomial tree (selected by NCCL's `Tree` name).
    Tree,
    /// Direct point-to-point transfers (AlltoAll, Gather, Scatter, Send, Recv).
    Direct,
}

impl Algo {
    /// NCCL's name for the algorithm.
    pub fn nccl_name(self) -> &'static str {
        match self {
            Algo::Ring => "Ring",
            Algo::Tree => "Tree",
            Algo::Direct => "Direct",
        }
    }
}

/// Largest AllReduce (bytes) that uses recursive doubling by default.
pub const TREE_ALLREDUCE_MAX_BYTES: usize = 64 << 10;
/// Largest Broadcast/Reduce (bytes) that uses a binomial tree by default (more than 2 ranks).
pub const TREE_ROOTED_MAX_BYTES: usize = 32 << 10;

/// Picks the algorithm for `func` moving `bytes` (the larger of input and output) on `nranks`,
/// honouring `algo_knob` (a parsed `NCCL_ALGO`) when given.
///
/// Errors: [`Error::InvalidUsage`] when `NCCL_ALGO` leaves no algorithm rnccl implements for the
/// function.
pub fn choose(
    func: Func,
    bytes: usize,
    nranks: usize,
    algo_knob: Option<(&str, &AlgoProtoList)>,
) -> Result<Algo> {
    let has_tree = matches!(func, Func::AllReduce | Func::Broadcast | Func::Reduce);
    let by_size = match func {
        Func::AllReduce if bytes <= TREE_ALLREDUCE_MAX_BYTES => Algo::Tree,
        Func::Broadcast | Func::Reduce if nranks > 2 && bytes <= TREE_ROOTED_MAX_BYTES => {
            Algo::Tree
        }
        Func::AllToAll | Func::Gather | Func::Scatter | Func::Send | Func::Recv => {
            return Ok(Algo::Direct);
        }
        _ => Algo::Ring,
    };
    let Some((raw, list)) = algo_knob else {
        return Ok(by_size);
    };
    let ring_ok = list.allows(func.nccl_name(), "Ring", &ALGORITHMS);
    let tree_ok = has_tree && list.allows(func.nccl_name(), "Tree", &ALGORITHMS);
    match (by_size, ring_ok, tree_ok) {
        (Algo::Tree, _, true) | (Algo::Ring, false, true) => Ok(Algo::Tree),
        (_, true, _) => Ok(Algo::Ring),
        _ => Err(Error::invalid_usage(format!(
            "NCCL_ALGO={raw:?} allows no algorithm rnccl runs for {} (rnccl implements Ring{}); unset it or include one of those",
            func.nccl_name(),
            if has_tree { " and Tree" } else { "" }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knob(s: &str) -> AlgoProtoList {
        AlgoProtoList::parse(s, &ALGORITHMS).unwrap()
    }

    #[test]
    fn size_based_default() {
        assert_eq!(choose(Func::AllReduce, 8, 4, None).unwrap(), Algo::Tree);
        assert_eq!(
            choose(Func::AllReduce, 64 << 20, 4, None).unwrap(),
            Algo::Ring
        );
        assert_eq!(choose(Func::Broadcast, 8, 2, None).unwrap(), Algo::Ring);
        assert_eq!(choose(Func::Broadcast, 8, 3, None).unwrap(), Algo::Tree);
        assert_eq!(choose(Func::AllToAll, 8, 3, None).unwrap(), Algo::Direct);
    }

    #[test]
    fn nccl_algo_overrides() {
        let ring = knob("Ring");
        assert_eq!(
            choose(Func::AllReduce, 8, 4, Some(("Ring", &ring))).unwrap(),
            Algo::Ring
        );
        let tree = knob("Tree");
        assert_eq!(
            choose(Func::AllReduce, 1 << 30, 4, Some(("Tree", &tree))).unwrap(),
            Algo::Tree
        );
        let e = choose(Func::AllGather, 8, 4, Some(("Tree", &tree)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("AllGather") && e.contains("NCCL_ALGO"), "{e}");
        let nvls = knob("NVLS");
        assert!(choose(Func::AllReduce, 8, 4, Some(("NVLS", &nvls))).is_err());
        let per_func = knob("Ring;AllReduce:Tree");
        assert_eq!(
            choose(Func::AllReduce, 1 << 30, 4, Some(("x", &per_func))).unwrap(),
            Algo::Tree
        );
        assert_eq!(
            choose(Func::Broadcast, 8, 4, Some(("x", &per_func))).unwrap(),
            Algo::Ring
        );
    }
}
