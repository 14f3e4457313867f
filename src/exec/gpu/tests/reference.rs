//! What every collective must produce, computed on the host from the inputs: values are small
//! integers (and halves of them) that every data type holds exactly and no reduction of up to
//! four ranks overflows, so results compare bit for bit, floats included.

use half::{bf16, f16};

use crate::coll::{CollArgs, Func};
use crate::dtype::DataType;
use crate::fp8::{F8E4M3, F8E5M2};
use crate::redop::RedOp;

/// Element `i` of rank `r`'s input for a reduction `op` in `dtype`: 0..=7 (0..=2 in FP8, so
/// every partial sum of four ranks stays an integer up to 8, which E5M2 holds), or 1..=2 for
/// products (so a product of four stays exact in bfloat16 and FP8).
pub(super) fn input_value(r: usize, i: usize, op: RedOp, dtype: DataType) -> f64 {
    let h = (r * 7919 + i * 104_729 + 17) % 97;
    match op {
        RedOp::Prod => (1 + h % 2) as f64,
        _ if dtype.fp8().is_some() => (h % 3) as f64,
        _ => (h % 8) as f64,
    }
}

/// `vals` as little-endian `dtype` elements.
pub(super) fn to_bytes(dtype: DataType, vals: &[f64]) -> Vec<u8> {
    vals.iter()
        .flat_map(|&v| match dtype {
            DataType::Int8 => (v as i8).to_le_bytes().to_vec(),
            DataType::Uint8 => (v as u8).to_le_bytes().to_vec(),
            DataType::Int32 => (v as i32).to_le_bytes().to_vec(),
            DataType::Uint32 => (v as u32).to_le_bytes().to_vec(),
            DataType::Int64 => (v as i64).to_le_bytes().to_vec(),
            DataType::Uint64 => (v as u64).to_le_bytes().to_vec(),
            DataType::Float16 => f16::from_f64(v).to_le_bytes().to_vec(),
            DataType::Float32 => (v as f32).to_le_bytes().to_vec(),
            DataType::Float64 => v.to_le_bytes().to_vec(),
            DataType::Bfloat16 => bf16::from_f64(v).to_le_bytes().to_vec(),
            DataType::Float8e4m3 => F8E4M3::from_f32(v as f32).to_ne_bytes().to_vec(),
            DataType::Float8e5m2 => F8E5M2::from_f32(v as f32).to_ne_bytes().to_vec(),
        })
        .collect()
}

/// The reduction of one element's values over the ranks, in exact arithmetic. Float averages
/// are exact only on power-of-two rank counts (each value is scaled by `1/n` first, as the
/// lowered `PreMulSum` does); callers keep to those.
pub(super) fn reduce_values(op: RedOp, dtype: DataType, vals: &[f64]) -> f64 {
    let n = vals.len() as f64;
    let sum: f64 = vals.iter().sum();
    match op {
        RedOp::Sum => sum,
        RedOp::Prod => vals.iter().product(),
        RedOp::Max => vals.iter().copied().fold(f64::MIN, f64::max),
        RedOp::Min => vals.iter().copied().fold(f64::MAX, f64::min),
        RedOp::Avg if dtype.is_float() => sum / n,
        RedOp::Avg => (sum / n).trunc(),
        RedOp::PreMulSum(s) if dtype.is_float() => sum * s.as_f64(),
        RedOp::PreMulSum(s) => sum * s.as_i64() as f64,
    }
}

/// Rank `r`'s expected output values for `args` with `inputs` (each rank's input buffer, in
/// elements, one per rank); `None` where the output must stay as it was (a non-root rank of
/// Reduce or Gather). Not for Send and Recv.
pub(super) fn expected(args: &CollArgs, r: usize, inputs: &[Vec<f64>]) -> Option<Vec<f64>> {
    let m = args.count;
    let reduced = |at: usize| {
        (0..m)
            .map(|i| {
                let vals: Vec<f64> = inputs.iter().map(|v| v[at + i]).collect();
                reduce_values(args.op, args.dtype, &vals)
            })
            .collect()
    };
    let root = args.root;
    let rooted_elsewhere = args.func.rooted() && r != root;
    match args.func {
        Func::AllReduce => Some(reduced(0)),
        Func::Reduce | Func::Gather if rooted_elsewhere => None,
        Func::Reduce => Some(reduced(0)),
        Func::ReduceScatter => Some(reduced(r * m)),
        Func::Broadcast => Some(inputs[root][..m].to_vec()),
        Func::AllGather | Func::Gather => {
            Some(inputs.iter().flat_map(|v| v[..m].to_vec()).collect())
        }
        Func::AllToAll => Some(
            inputs
                .iter()
                .flat_map(|v| v[r * m..(r + 1) * m].to_vec())
                .collect(),
        ),
        Func::Scatter => Some(inputs[root][r * m..(r + 1) * m].to_vec()),
        Func::Send | Func::Recv => unreachable!("point-to-point is checked pairwise"),
    }
}
