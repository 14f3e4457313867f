//! What a health check measured, as events streamed by world rank 0 while it runs, and the
//! judged report built from them ([`super::verdict::judge`]). Bandwidths are GB/s (1e9 B/s),
//! sizes bytes, times µs.

use serde::{Deserialize, Serialize};

use crate::bench::BenchRow;

/// One size's result for a group: nccl-tests' numbers, out-of-place and in-place combined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    /// Bytes per rank.
    pub size: usize,
    /// Time per operation in µs, mean of out-of-place and in-place.
    pub time_us: f64,
    /// Algorithm bandwidth in GB/s, mean of out-of-place and in-place.
    pub algbw: f64,
    /// Bus bandwidth in GB/s, mean of out-of-place and in-place (what nccl-tests' `# Avg bus
    /// bandwidth` averages).
    pub busbw: f64,
    /// Out-of-place bus bandwidth in GB/s.
    pub busbw_out_of_place: f64,
    /// In-place bus bandwidth in GB/s.
    pub busbw_in_place: f64,
    /// Wrong elements over both sides and every rank; `None` with the data check off.
    pub wrong: Option<u64>,
}

impl From<&BenchRow> for SizeResult {
    fn from(r: &BenchRow) -> SizeResult {
        let (o, i) = (&r.out_of_place, &r.in_place);
        SizeResult {
            size: r.size,
            time_us: (o.time_us + i.time_us) / 2.0,
            algbw: (o.algbw + i.algbw) / 2.0,
            busbw: (o.busbw + i.busbw) / 2.0,
            busbw_out_of_place: o.busbw,
            busbw_in_place: i.busbw,
            wrong: match (o.wrong, i.wrong) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            },
        }
    }
}

/// How a group's measurement ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// It ran: one result per size, in the order measured.
    Measured {
        /// The results.
        sizes: Vec<SizeResult>,
    },
    /// It did not run to the end: why, naming the ranks and hosts involved.
    Failed {
        /// The reason.
        reason: String,
    },
}

impl Outcome {
    /// The bus bandwidth a check judges, in GB/s: the largest size's (bandwidth-bound sizes say
    /// most about a link); `None` when the measurement failed.
    pub fn busbw(&self) -> Option<f64> {
        match self {
            Outcome::Measured { sizes } => sizes.iter().max_by_key(|s| s.size).map(|s| s.busbw),
            Outcome::Failed { .. } => None,
        }
    }

    /// Wrong elements over every size (0 when the check was off or the measurement failed).
    pub fn wrong(&self) -> u64 {
        match self {
            Outcome::Measured { sizes } => sizes.iter().filter_map(|s| s.wrong).sum(),
            Outcome::Failed { .. } => 0,
        }
    }
}

/// One group's measurement: a host alone or a pair, on a rail or on the default interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The rail (the interface `NCCL_SOCKET_IFNAME` selected on the first host, or `rail N`
    /// where hosts name it differently); `None` for the default interface and for hosts alone.
    pub rail: Option<String>,
    /// The hosts: one (alone) or two (a pair), by name.
    pub hosts: Vec<String>,
    /// Ranks in the group.
    pub ranks: usize,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What one host brings to the check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// The host's name (as the host list gives it, or its own short name under a launcher).
    pub name: String,
    /// Its ranks (0 for a host that never joined).
    pub ranks: usize,
    /// Where its ranks run: `CPU` or the GPUs' name.
    pub device: String,
    /// Its socket NICs in NCCL's order (the interfaces NCCL's Socket transport would use).
    pub nics: Vec<String>,
}

/// A host that could not be checked, or that the check found wrong as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostProblem {
    /// The host's name.
    pub host: String,
    /// What is wrong, in words (an unreachable host's ssh error, a worker's exit status, a
    /// missing NIC).
    pub reason: String,
}

/// What world rank 0 reports while a check runs, in order: the hosts first, then problems
/// and measurements as they come.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Every host of the world, in host order.
    Hosts {
        /// The hosts.
        hosts: Vec<HostFacts>,
    },
    /// A host-level problem.
    Problem(HostProblem),
    /// A finished measurement.
    Measured(Measurement),
}
