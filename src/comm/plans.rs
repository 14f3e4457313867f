//! A communicator's plan cache: an operation repeated with the same shape (the common case in
//! training loops and benchmarks) reuses its plan instead of choosing the algorithm and building
//! the steps again.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::Core;
use crate::coll::{self, CollArgs, Func, Plan};
use crate::dtype::DataType;
use crate::error::Result;
use crate::redop::{RedOp, Scalar};

/// Plans kept before the cache starts over.
const CAPACITY: usize = 512;

/// What a plan depends on (besides the communicator, which owns the cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PlanKey {
    func: Func,
    count: usize,
    dtype: DataType,
    op: (u8, u8, u64),
    root: usize,
    in_place: bool,
}

fn op_key(op: RedOp) -> (u8, u8, u64) {
    let scalar = |s: Scalar| match s {
        Scalar::Int(v) => (0, v as u64),
        Scalar::Uint(v) => (1, v),
        Scalar::Float(v) => (2, v.to_bits()),
    };
    match op {
        RedOp::Sum => (0, 0, 0),
        RedOp::Prod => (1, 0, 0),
        RedOp::Max => (2, 0, 0),
        RedOp::Min => (3, 0, 0),
        RedOp::Avg => (4, 0, 0),
        RedOp::PreMulSum(s) => {
            let (k, bits) = scalar(s);
            (5, k, bits)
        }
    }
}

/// Cached plans of one communicator.
#[derive(Default)]
pub struct PlanCache {
    plans: FxHashMap<PlanKey, Arc<Plan>>,
}

impl PlanCache {
    /// The plan for `args` on this rank, built (algorithm chosen by size and `NCCL_ALGO`) on
    /// first use.
    ///
    /// Errors: as [`coll::plan`] and [`coll::choose`].
    pub fn get(&mut self, core: &Core, args: &CollArgs) -> Result<Arc<Plan>> {
        let key = PlanKey {
            func: args.func,
            count: args.count,
            dtype: args.dtype,
            op: op_key(args.op),
            root: args.root,
            in_place: args.in_place,
        };
        if let Some(p) = self.plans.get(&key) {
            return Ok(p.clone());
        }
        let n = core.nranks;
        let bytes = args.input_bytes(n).max(args.output_bytes(n));
        let knob = core.algo.as_ref().map(|(raw, l)| (raw.as_str(), l));
        let algo = coll::choose(args.func, bytes, n, knob)?;
        let nch = coll::channels_for(bytes, core.geo.chunk_bytes(), core.rings.nchannels());
        let plan = Arc::new(coll::plan(
            args,
            core.rank,
            n,
            &core.rings,
            core.geo,
            algo,
            nch,
        )?);
        if self.plans.len() >= CAPACITY {
            self.plans.clear();
        }
        self.plans.insert(key, plan.clone());
        Ok(plan)
    }
}
