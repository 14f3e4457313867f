//! Every rank ends an AllReduce with the same bits, even where the combine is not symmetric:
//! `a > b ? a : b` keeps `b` when comparing +0 with -0 or with NaN, so recursive doubling's
//! exchange must combine the two partners' values in the same order on both sides.

use super::case::{LIMIT, PATIENCE, SLOT, rings};
use super::fabric::{Fabric, Job, Words};
use crate::coll::{Algo, CollArgs, Func, Geometry, Plan, plan};
use crate::device::ReduceSpec;
use crate::dtype::DataType;
use crate::exec::gpu::program::DevBuffers;
use crate::redop::RedOp;

/// Element `i` of rank `r`: +0, -0, NaN or 1, so that most elements meet a tie or a NaN.
fn value(r: usize, i: usize) -> f32 {
    [0.0, -0.0, f32::NAN, 1.0][(r + i * (r + 1)) % 4]
}

#[test]
fn recursive_doubling_gives_every_rank_the_same_bits() {
    let count = 64;
    for n in 2..=4 {
        for op in [RedOp::Max, RedOp::Min] {
            let args = CollArgs {
                func: Func::AllReduce,
                count,
                dtype: DataType::Float32,
                op,
                root: 0,
                in_place: false,
            };
            let geo = Geometry { slot_bytes: SLOT };
            let plans: Vec<Plan> = (0..n)
                .map(|r| plan(&args, r, n, &rings(n, 1), geo, Algo::Tree, 1).expect("plan"))
                .collect();
            let bytes = count * 4;
            let inputs: Vec<Words> = (0..n)
                .map(|r| {
                    let v: Vec<u8> = (0..count).flat_map(|i| value(r, i).to_le_bytes()).collect();
                    Words::from_bytes(&v)
                })
                .collect();
            let outputs: Vec<Words> = (0..n).map(|_| Words::zeroed(bytes)).collect();
            let jobs: Vec<Job<'_>> = (0..n)
                .map(|r| Job {
                    rank: r,
                    plan: &plans[r],
                    bufs: DevBuffers {
                        input: (inputs[r].addr(), bytes),
                        output: (outputs[r].addr(), bytes),
                        scratch: (inputs[r].addr(), 0),
                    },
                })
                .collect();
            let spec = ReduceSpec::new(args.dtype, op.lower(args.dtype, n));
            let mut f = Fabric::new(n, SLOT, PATIENCE);
            f.run(&jobs, &spec, LIMIT);
            let first = outputs[0].read(0, bytes);
            for (r, out) in outputs.iter().enumerate() {
                assert_eq!(f.report(r).code, None);
                assert!(
                    out.read(0, bytes) == first,
                    "{op:?} on {n} ranks: rank {r}'s result differs from rank 0's"
                );
            }
        }
    }
}
