//! The algorithms plans are built for. Which one an operation runs is the tuning model's choice
//! ([`crate::graph::tuning::Model::choose`]), restricted by `NCCL_ALGO`.

use crate::graph::tuning::{RING, TREE};

/// An algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub(crate) enum Algo {
    /// Rings over channels (NCCL's `Ring`).
    Ring,
    /// Latency-oriented: recursive doubling / binomial tree (selected by NCCL's `Tree` name).
    Tree,
    /// Direct point-to-point transfers (AlltoAll, Gather, Scatter, Send, Recv).
    Direct,
}

impl Algo {
    /// NCCL's name for the algorithm.
    pub(crate) fn nccl_name(self) -> &'static str {
        match self {
            Algo::Ring => "Ring",
            Algo::Tree => "Tree",
            Algo::Direct => "Direct",
        }
    }

    /// The plan algorithm for a tuning-model algorithm index (see
    /// [`crate::config::syntax::ALGORITHMS`]), when rnccl builds plans for it.
    pub(crate) fn from_model(index: usize) -> Option<Algo> {
        match index {
            RING => Some(Algo::Ring),
            TREE => Some(Algo::Tree),
            _ => None,
        }
    }
}
