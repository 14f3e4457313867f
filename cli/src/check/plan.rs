//! The measurements of a check, as the coordinator sends them to its workers.

use std::time::Duration;

use rnccl::bench::{Average, BenchColl, BenchOptions};
use rnccl::check::{CheckOptions, CheckSetup, Pairing, Rails};
use rnccl::{DataType, RedOp};
use serde::{Deserialize, Serialize};

/// What every group measures, and which groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// all_reduce sizes in bytes per rank.
    pub sizes: Vec<usize>,
    /// Warm-up iterations per size.
    pub warmup: usize,
    /// Timed iterations per size.
    pub iters: usize,
    /// Data-check iterations per size.
    pub check: usize,
    /// Which pairs.
    pub pairing: Pairing,
    /// Which NICs.
    pub rails: Rails,
    /// Seconds a measurement may take.
    pub timeout_s: u64,
}

impl Plan {
    /// The library's options.
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            bench: BenchOptions {
                coll: BenchColl::AllReduce,
                sizes: self.sizes.clone(),
                dtypes: vec![DataType::Float32],
                ops: vec![RedOp::Sum],
                roots: Vec::new(),
                warmup: self.warmup,
                iters: self.iters,
                agg: 1,
                check: self.check,
                average: Average::Mean,
                windows: false,
                local_register: false,
                graph_launches: 0,
            },
            pairing: self.pairing,
            rails: self.rails.clone(),
            timeout: self.timeout(),
        }
    }

    /// The measurement timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s.max(1))
    }

    /// How the check ran, for the report.
    pub fn setup(&self) -> CheckSetup {
        CheckSetup {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            sizes: self.sizes.clone(),
            warmup_iters: self.warmup,
            iters: self.iters,
            check_iters: self.check,
            timeout_s: self.timeout_s,
            pairing: self.pairing,
            rails: self.rails.to_string(),
        }
    }
}
