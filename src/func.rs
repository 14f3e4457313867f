//! The collective and point-to-point functions, one enum for the whole engine: plans
//! ([`crate::coll`]), the tuning model ([`crate::graph::tuning`]), the benchmark and the knobs
//! that name functions (`NCCL_ALGO`, `NCCL_PROTO`).

/// The collective functions `NCCL_ALGO`/`NCCL_PROTO` entries may name: the names of
/// [`Func::TUNED`], in NCCL's `ncclFunc_t` order.
pub const FUNCTIONS: [&str; 5] = [
    "Broadcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AllReduce",
];

/// A function of nccl.h. The first five are the collectives NCCL's tuning model covers, with
/// NCCL's `ncclFunc_t` indices (Broadcast 0 … AllReduce 4; `NCCL_NUM_FUNCTIONS` = 5): the tuning
/// tables and [`FUNCTIONS`] are indexed by [`Func::tuned_index`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Func {
    /// `ncclBroadcast`.
    Broadcast = 0,
    /// `ncclReduce`.
    Reduce = 1,
    /// `ncclAllGather`.
    AllGather = 2,
    /// `ncclReduceScatter`.
    ReduceScatter = 3,
    /// `ncclAllReduce`.
    AllReduce = 4,
    /// `ncclAlltoAll`.
    AllToAll = 5,
    /// `ncclGather`.
    Gather = 6,
    /// `ncclScatter`.
    Scatter = 7,
    /// `ncclSend`.
    Send = 8,
    /// `ncclRecv`.
    Recv = 9,
}

impl Func {
    /// The five collectives NCCL's tuning model covers, in `ncclFunc_t` order.
    pub const TUNED: [Func; 5] = [
        Func::Broadcast,
        Func::Reduce,
        Func::AllGather,
        Func::ReduceScatter,
        Func::AllReduce,
    ];

    /// Every function.
    pub const ALL: [Func; 10] = [
        Func::Broadcast,
        Func::Reduce,
        Func::AllGather,
        Func::ReduceScatter,
        Func::AllReduce,
        Func::AllToAll,
        Func::Gather,
        Func::Scatter,
        Func::Send,
        Func::Recv,
    ];

    /// The index of the function in NCCL's tuning tables and in [`FUNCTIONS`] (`ncclFunc_t`),
    /// or `None` for functions NCCL does not tune (AlltoAll, Gather, Scatter, Send, Recv run as
    /// grouped point-to-point transfers).
    pub fn tuned_index(self) -> Option<usize> {
        let i = self as usize;
        (i < FUNCTIONS.len()).then_some(i)
    }

    /// NCCL's name of the function (`NCCL_ALGO` entries, log lines, messages).
    pub fn nccl_name(self) -> &'static str {
        match self {
            Func::Broadcast => "Broadcast",
            Func::Reduce => "Reduce",
            Func::AllGather => "AllGather",
            Func::ReduceScatter => "ReduceScatter",
            Func::AllReduce => "AllReduce",
            Func::AllToAll => "AlltoAll",
            Func::Gather => "Gather",
            Func::Scatter => "Scatter",
            Func::Send => "Send",
            Func::Recv => "Recv",
        }
    }

    /// The function named `s`: NCCL's names and nccl-tests' (`all_reduce`, `alltoall`), any case,
    /// with or without `_`/`-`.
    pub fn parse(s: &str) -> Option<Func> {
        let k: String = s
            .chars()
            .filter(|c| *c != '_' && *c != '-')
            .collect::<String>()
            .to_lowercase();
        Func::ALL
            .into_iter()
            .find(|f| f.nccl_name().to_lowercase() == k)
    }

    /// Whether the function reduces (and so takes an operation).
    pub fn reduces(self) -> bool {
        matches!(self, Func::AllReduce | Func::Reduce | Func::ReduceScatter)
    }

    /// Whether the function has a root rank.
    pub fn rooted(self) -> bool {
        matches!(
            self,
            Func::Broadcast | Func::Reduce | Func::Gather | Func::Scatter
        )
    }

    /// Whether the function is a point-to-point transfer (`ncclSend`/`ncclRecv`).
    pub fn p2p(self) -> bool {
        matches!(self, Func::Send | Func::Recv)
    }

    /// Elements of the input buffer for `count` on `nranks` ranks (as nccl.h defines `count`);
    /// `None` when the product overflows.
    pub fn input_elems(self, count: usize, nranks: usize) -> Option<usize> {
        match self {
            Func::ReduceScatter | Func::AllToAll | Func::Scatter => count.checked_mul(nranks),
            Func::Recv => Some(0),
            _ => Some(count),
        }
    }

    /// Elements of the output buffer for `count` on `nranks` ranks; `None` on overflow.
    pub fn output_elems(self, count: usize, nranks: usize) -> Option<usize> {
        match self {
            Func::AllGather | Func::AllToAll | Func::Gather => count.checked_mul(nranks),
            Func::Send => Some(0),
            _ => Some(count),
        }
    }

    /// nccl-tests' bus-bandwidth factor on `nranks` ranks (doc/PERFORMANCE.md; internals §9.3):
    /// busbw = algbw × factor. AllReduce 2(n-1)/n; AllGather, ReduceScatter, AlltoAll, Gather,
    /// Scatter (n-1)/n; Broadcast, Reduce, Send, Recv 1.
    pub fn bus_factor(self, nranks: usize) -> f64 {
        let n = nranks.max(1) as f64;
        match self {
            Func::AllReduce => 2.0 * (n - 1.0) / n,
            Func::AllGather
            | Func::ReduceScatter
            | Func::AllToAll
            | Func::Gather
            | Func::Scatter => (n - 1.0) / n,
            Func::Broadcast | Func::Reduce | Func::Send | Func::Recv => 1.0,
        }
    }
}

impl std::fmt::Display for Func {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.nccl_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuned_indices_are_ncclfunc_order() {
        for (i, f) in Func::TUNED.into_iter().enumerate() {
            assert_eq!(f.tuned_index(), Some(i));
            assert_eq!(FUNCTIONS[i], f.nccl_name());
        }
        for f in [
            Func::AllToAll,
            Func::Gather,
            Func::Scatter,
            Func::Send,
            Func::Recv,
        ] {
            assert_eq!(f.tuned_index(), None, "{f}");
        }
    }

    #[test]
    fn names_parse_back() {
        for f in Func::ALL {
            assert_eq!(Func::parse(f.nccl_name()), Some(f));
        }
        assert_eq!(Func::parse("all_reduce"), Some(Func::AllReduce));
        assert_eq!(Func::parse("reduce-scatter"), Some(Func::ReduceScatter));
        assert_eq!(Func::parse("alltoall"), Some(Func::AllToAll));
        assert_eq!(Func::parse("allreduse"), None);
    }

    #[test]
    fn bus_factors_follow_nccl_tests() {
        assert!((Func::AllReduce.bus_factor(4) - 1.5).abs() < 1e-12);
        assert!((Func::AllGather.bus_factor(4) - 0.75).abs() < 1e-12);
        assert!((Func::AllToAll.bus_factor(2) - 0.5).abs() < 1e-12);
        assert_eq!(Func::Broadcast.bus_factor(8), 1.0);
        assert_eq!(Func::Send.bus_factor(8), 1.0);
    }
}
