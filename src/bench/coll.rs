//! The benchmarked collectives, with nccl-tests' conventions for counts and bandwidths
//! (nccl-tests `src/<coll>.cu` `*GetCollByteCount` and `*GetBw`; busbw factors from
//! doc/PERFORMANCE.md; internals §9.3).

use std::fmt;
use std::str::FromStr;

use crate::coll::Func;
use crate::error::{Error, Result};

/// A collective `rnccl bench` can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchColl {
    /// all_reduce_perf.
    AllReduce,
    /// all_gather_perf.
    AllGather,
    /// reduce_scatter_perf.
    ReduceScatter,
    /// broadcast_perf.
    Broadcast,
    /// reduce_perf.
    Reduce,
    /// alltoall_perf.
    AllToAll,
    /// gather_perf.
    Gather,
    /// scatter_perf.
    Scatter,
    /// sendrecv_perf: every rank sends to rank+1 and receives from rank-1.
    SendRecv,
}

/// Element counts of one benchmark point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// The `count` argument of the NCCL call (nccl-tests' `paramcount`, printed in the table).
    pub param: usize,
    /// Elements each rank sends.
    pub send: usize,
    /// Elements each rank receives.
    pub recv: usize,
}

impl BenchColl {
    /// Every benchmarked collective.
    pub const ALL: [BenchColl; 9] = [
        BenchColl::AllReduce,
        BenchColl::AllGather,
        BenchColl::ReduceScatter,
        BenchColl::Broadcast,
        BenchColl::Reduce,
        BenchColl::AllToAll,
        BenchColl::Gather,
        BenchColl::Scatter,
        BenchColl::SendRecv,
    ];

    /// rnccl's name (`all_reduce`, `alltoall`, `sendrecv`…).
    pub fn name(self) -> &'static str {
        match self {
            BenchColl::AllReduce => "all_reduce",
            BenchColl::AllGather => "all_gather",
            BenchColl::ReduceScatter => "reduce_scatter",
            BenchColl::Broadcast => "broadcast",
            BenchColl::Reduce => "reduce",
            BenchColl::AllToAll => "alltoall",
            BenchColl::Gather => "gather",
            BenchColl::Scatter => "scatter",
            BenchColl::SendRecv => "sendrecv",
        }
    }

    /// nccl-tests' binary name (`all_reduce_perf`…), printed in the header and footer.
    pub fn test_name(self) -> String {
        format!("{}_perf", self.name())
    }

    /// The engine function behind the benchmark (Send for sendrecv).
    pub fn func(self) -> Func {
        match self {
            BenchColl::AllReduce => Func::AllReduce,
            BenchColl::AllGather => Func::AllGather,
            BenchColl::ReduceScatter => Func::ReduceScatter,
            BenchColl::Broadcast => Func::Broadcast,
            BenchColl::Reduce => Func::Reduce,
            BenchColl::AllToAll => Func::AllToAll,
            BenchColl::Gather => Func::Gather,
            BenchColl::Scatter => Func::Scatter,
            BenchColl::SendRecv => Func::Send,
        }
    }

    /// True when the benchmark takes a reduction operation.
    pub fn reduces(self) -> bool {
        self.func().reduces()
    }

    /// True when the benchmark takes a root.
    pub fn rooted(self) -> bool {
        self.func().rooted()
    }

    /// Counts for a point of `bytes` (swept size) with `esize`-byte elements on `n` ranks.
    /// Per-rank blocks are rounded down to 16-byte multiples, as nccl-tests does.
    pub fn counts(self, bytes: usize, esize: usize, n: usize) -> Counts {
        let count = bytes / esize;
        let base = (count / n) & !((16 / esize).max(1) - 1);
        match self {
            BenchColl::AllReduce
            | BenchColl::Broadcast
            | BenchColl::Reduce
            | BenchColl::SendRecv => Counts {
                param: count,
                send: count,
                recv: count,
            },
            BenchColl::AllGather | BenchColl::Gather => Counts {
                param: base,
                send: base,
                recv: base * n,
            },
            BenchColl::ReduceScatter | BenchColl::Scatter => Counts {
                param: base,
                send: base * n,
                recv: base,
            },
            BenchColl::AllToAll => Counts {
                param: base,
                send: base * n,
                recv: base * n,
            },
        }
    }

    /// `(algbw, busbw)` in GB/s (1e9 B/s) for `param` elements of `esize` bytes on `n` ranks
    /// taking `secs`; busbw uses [`Func::bus_factor`] (nccl-tests doc/PERFORMANCE.md).
    pub fn bandwidth(self, param: usize, esize: usize, n: usize, secs: f64) -> (f64, f64) {
        if secs <= 0.0 {
            return (0.0, 0.0);
        }
        let bytes = (param * esize) as f64;
        let alg_bytes = match self {
            BenchColl::AllGather
            | BenchColl::ReduceScatter
            | BenchColl::AllToAll
            | BenchColl::Gather
            | BenchColl::Scatter => bytes * n as f64,
            BenchColl::AllReduce
            | BenchColl::Broadcast
            | BenchColl::Reduce
            | BenchColl::SendRecv => bytes,
        };
        let algbw = alg_bytes / 1e9 / secs;
        (algbw, algbw * self.func().bus_factor(n))
    }
}

impl fmt::Display for BenchColl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BenchColl {
    type Err = Error;

    /// Accepts rnccl's names, nccl-tests' binary names (`all_reduce_perf`), and the spellings
    /// without underscores (`allreduce`, `all_to_all`), case-insensitively.
    fn from_str(s: &str) -> Result<BenchColl> {
        let k = s.to_ascii_lowercase().replace(['-', '_'], "");
        let k = k.strip_suffix("perf").unwrap_or(&k);
        Ok(match k {
            "allreduce" => BenchColl::AllReduce,
            "allgather" => BenchColl::AllGather,
            "reducescatter" => BenchColl::ReduceScatter,
            "broadcast" | "bcast" => BenchColl::Broadcast,
            "reduce" => BenchColl::Reduce,
            "alltoall" => BenchColl::AllToAll,
            "gather" => BenchColl::Gather,
            "scatter" => BenchColl::Scatter,
            "sendrecv" => BenchColl::SendRecv,
            _ => {
                let names: Vec<&str> = BenchColl::ALL.iter().map(|c| c.name()).collect();
                return Err(Error::invalid_arg(format!(
                    "unknown collective '{s}': use one of {}",
                    names.join(", ")
                )));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        for c in BenchColl::ALL {
            assert_eq!(c.name().parse::<BenchColl>().unwrap(), c);
            assert_eq!(c.test_name().parse::<BenchColl>().unwrap(), c);
        }
        assert_eq!(
            "AllReduce".parse::<BenchColl>().unwrap(),
            BenchColl::AllReduce
        );
        assert_eq!(
            "all_to_all".parse::<BenchColl>().unwrap(),
            BenchColl::AllToAll
        );
        assert!(
            "allreduse"
                .parse::<BenchColl>()
                .unwrap_err()
                .to_string()
                .contains("all_reduce")
        );
    }

    #[test]
    fn counts_follow_nccl_tests() {
        // The anchor log (h200x2/all_gather.log): 128 B on 2 ranks of float -> count 16; 8 B -> 0.
        assert_eq!(
            BenchColl::AllGather.counts(128, 4, 2),
            Counts {
                param: 16,
                send: 16,
                recv: 32
            }
        );
        assert_eq!(BenchColl::AllGather.counts(8, 4, 2).param, 0);
        assert_eq!(BenchColl::AllToAll.counts(2048, 4, 2).param, 256);
        assert_eq!(BenchColl::AllReduce.counts(8, 4, 2).param, 2);
        assert_eq!(BenchColl::ReduceScatter.counts(1 << 20, 8, 3).param, 43690);
    }

    #[test]
    fn bus_bandwidth_factors() {
        let (alg, bus) = BenchColl::AllReduce.bandwidth(1_000_000, 4, 4, 1e-3);
        assert!((alg - 4.0).abs() < 1e-9 && (bus - 6.0).abs() < 1e-9);
        let (alg, bus) = BenchColl::AllGather.bandwidth(1_000_000, 4, 4, 1e-3);
        assert!((alg - 16.0).abs() < 1e-9 && (bus - 12.0).abs() < 1e-9);
        let (_, bus) = BenchColl::Broadcast.bandwidth(1_000_000, 4, 4, 1e-3);
        assert!((bus - 4.0).abs() < 1e-9);
    }
}
