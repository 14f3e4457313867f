//! Multi-host health checks (`rnccl check`): each host alone, pairs of hosts, per rail; a
//! bandwidth matrix, outliers flagged.
//!
//! Every rank of the check joins one world communicator on host memory (the control plane:
//! hosts, rendezvous ids and results go round it) and runs [`run_rank`] with the others in
//! lockstep. The unit of work is a round ([`schedule`]): groups that share no host — each
//! host alone, or disjoint pairs — measured at once with the library's benchmark
//! ([`crate::bench::run_ranks`], all_reduce) on communicators split from the plane's, each
//! bounded by the measurement timeout. World rank 0 streams [`Event`]s as rounds finish;
//! [`judge`] turns them into the [`CheckReport`], flagging results by the rule in
//! [`verdict`]. Nothing here starts processes: launchers, or `rnccl check`'s ssh fan-out, do.

mod driver;
mod planes;
mod records;
pub mod report;
pub mod schedule;
pub mod verdict;

use std::time::Duration;

pub use driver::run_rank;
pub use planes::{Rails, RankSetup};
pub use report::{Event, HostFacts, HostProblem, Measurement, Outcome, SizeResult};
pub use schedule::{Group, Pairing};
pub use verdict::{
    CheckReport, CheckSetup, Judged, RailReport, Rule, Suspect, gbps, judge, median,
};

use crate::bench::BenchOptions;

/// What a check measures.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The benchmark each group runs (all_reduce, its sizes and iterations).
    pub bench: BenchOptions,
    /// Which pairs of hosts.
    pub pairing: Pairing,
    /// Which NICs pairs are measured on.
    pub rails: Rails,
    /// The longest a group's measurement may run, and every wait of a measurement
    /// communicator: a group still running then is stopped and reported as failed.
    pub timeout: Duration,
}

/// The timeout the world communicator needs for a check whose measurements are bounded by
/// `measure` (one of them: its split, connection and run, plus a margin): `3 × measure + 30 s`.
pub fn world_timeout(measure: Duration) -> Duration {
    measure * 3 + Duration::from_secs(30)
}
