//! Benchmark data: deterministic inputs every rank can recompute for any rank, the expected
//! result of each collective, and the count of wrong elements.
//!
//! Inputs are small integers (−3…4, 0…7 for unsigned types; ±0.5, ±1, ±2 for floating-point
//! products), so sums, maxima and products are exact in every type, including bfloat16 (in FP8
//! while they stay within 16 (E4M3) or 8 (E5M2)), and integer wrap-around (products in 8-bit
//! types) is reproduced exactly. Floating-point averages round once per step; they are compared
//! with a tolerance of `eps(type) × (nranks + 2) × max(|expected|, 4)` ([`tolerance`]).
//!
//! A check writes the expected output in the element type ([`expected_output`]) and compares it
//! with the output: on the host ([`count_wrong`]) or, for GPU ranks, by `kernels/check.cu` with
//! the same rule.

use half::{bf16, f16};

use crate::fp8::{F8E4M3, F8E5M2};

use super::coll::BenchColl;
use crate::dtype::DataType;
use crate::redop::RedOp;

/// What a rank's data depends on: the collective, its shape and a seed per check iteration.
#[derive(Debug, Clone, Copy)]
pub struct DataSpec {
    /// The collective.
    pub coll: BenchColl,
    /// Element type.
    pub dtype: DataType,
    /// Reduction (ignored for non-reducing collectives).
    pub op: RedOp,
    /// Root for rooted collectives.
    pub root: usize,
    /// nccl-tests' `paramcount`.
    pub count: usize,
    /// Number of ranks.
    pub nranks: usize,
    /// Varies the data between check iterations.
    pub seed: u64,
}

fn mix(rank: usize, idx: usize, seed: u64) -> u64 {
    let mut x = (rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (idx as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ seed.wrapping_mul(0x1656_67b1_9e37_79f9);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ (x >> 29)
}

/// Input element `idx` of rank `rank`, as f64.
pub(super) fn input_value(s: &DataSpec, rank: usize, idx: usize) -> f64 {
    let h = mix(rank, idx, s.seed);
    let unsigned = matches!(
        s.dtype,
        DataType::Uint8 | DataType::Uint32 | DataType::Uint64
    );
    match s.op {
        RedOp::Prod if s.dtype.is_float() => [-2.0, -1.0, -0.5, 0.5, 1.0, 2.0][(h % 6) as usize],
        RedOp::Prod => (1 + h % 3) as f64,
        _ if unsigned => (h % 8) as f64,
        _ => (h % 8) as f64 - 3.0,
    }
}

/// The reduction of `vals` as the engine computes it (integer results are wrapped and divided
/// in the element type by [`store`]).
fn reduce_values(op: RedOp, vals: impl Iterator<Item = f64>, n: usize, float: bool) -> f64 {
    match op {
        RedOp::Sum => vals.sum(),
        RedOp::Prod => vals.product(),
        RedOp::Max => vals.fold(f64::MIN, f64::max),
        RedOp::Min => vals.fold(f64::MAX, f64::min),
        RedOp::Avg if float => vals.sum::<f64>() / n as f64,
        RedOp::Avg => vals.sum(),
        RedOp::PreMulSum(s) => vals
            .map(|v| v * if float { s.as_f64() } else { s.as_i64() as f64 })
            .sum(),
    }
}

/// Whether `rank` has an output to check: every rank but a non-root's Reduce and Gather, whose
/// receive buffers NCCL leaves alone.
fn checks_output(s: &DataSpec, rank: usize) -> bool {
    !matches!(s.coll, BenchColl::Reduce | BenchColl::Gather) || rank == s.root
}

/// The expected output element `i` of `rank` as f64 before conversion, or `None` when the
/// element is not defined for that rank (a non-root's Reduce/Gather output).
pub(super) fn expected_value(s: &DataSpec, rank: usize, i: usize) -> Option<f64> {
    if !checks_output(s, rank) {
        return None;
    }
    let (n, m) = (s.nranks, s.count);
    let red = |idx: usize| {
        reduce_values(
            s.op,
            (0..n).map(|r| input_value(s, r, idx)),
            n,
            s.dtype.is_float(),
        )
    };
    Some(match s.coll {
        BenchColl::AllReduce | BenchColl::Reduce => red(i),
        BenchColl::ReduceScatter => red(rank * m + i),
        BenchColl::Broadcast => input_value(s, s.root, i),
        BenchColl::AllGather | BenchColl::Gather => input_value(s, i / m.max(1), i % m.max(1)),
        BenchColl::AllToAll => input_value(s, i / m.max(1), rank * m + i % m.max(1)),
        BenchColl::Scatter => input_value(s, s.root, rank * m + i),
        BenchColl::SendRecv => input_value(s, (rank + n - 1) % n, i),
    })
}

macro_rules! per_type {
    ($dtype:expr, $int:ident, $flt:ident) => {
        match $dtype {
            DataType::Int8 => $int!(i8),
            DataType::Uint8 => $int!(u8),
            DataType::Int32 => $int!(i32),
            DataType::Uint32 => $int!(u32),
            DataType::Int64 => $int!(i64),
            DataType::Uint64 => $int!(u64),
            DataType::Float16 => $flt!(f16, f16::from_f64, f16::to_f64),
            DataType::Bfloat16 => $flt!(bf16, bf16::from_f64, bf16::to_f64),
            DataType::Float32 => $flt!(f32, |v: f64| v as f32, |v: f32| v as f64),
            DataType::Float64 => $flt!(f64, |v: f64| v, |v: f64| v),
            DataType::Float8e4m3 => {
                $flt!(F8E4M3, |v: f64| F8E4M3::from_f32(v as f32), |v: F8E4M3| {
                    f64::from(v.to_f32())
                })
            }
            DataType::Float8e5m2 => {
                $flt!(F8E5M2, |v: f64| F8E5M2::from_f32(v as f32), |v: F8E5M2| {
                    f64::from(v.to_f32())
                })
            }
        }
    };
}

/// Writes `vals(i)` for `i in 0..count` into `buf` as elements of `dtype`.
pub(super) fn store(buf: &mut [u8], dtype: DataType, count: usize, vals: impl Fn(usize) -> f64) {
    macro_rules! int {
        ($t:ty) => {{
            let es = std::mem::size_of::<$t>();
            for (i, c) in buf.chunks_exact_mut(es).take(count).enumerate() {
                c.copy_from_slice(&((vals(i) as i64) as $t).to_ne_bytes());
            }
        }};
    }
    macro_rules! flt {
        ($t:ty, $from:expr, $to:expr) => {{
            let es = std::mem::size_of::<$t>();
            for (i, c) in buf.chunks_exact_mut(es).take(count).enumerate() {
                c.copy_from_slice(&($from)(vals(i)).to_ne_bytes());
            }
        }};
    }
    per_type!(dtype, int, flt)
}

/// Fills a rank's send region (`count` input elements).
pub(super) fn fill_input(s: &DataSpec, rank: usize, buf: &mut [u8], count: usize) {
    store(buf, s.dtype, count, |i| input_value(s, rank, i));
}

/// Bytes of input generated element by element when results are not checked (`-c 0`); the
/// rest of the input repeats them, copied in bulk. Generating 8 GB per rank on the host took
/// longer than the collectives it feeds (nccl-tests generates on the device). A multiple of
/// every element size.
pub(super) const TILE_BYTES: usize = 4 << 20;

/// Bytes of a `len`-byte input to generate: all of it when results are `checked`, else at most
/// [`TILE_BYTES`] (the rest repeats them).
pub(super) fn generated_bytes(len: usize, checked: bool) -> usize {
    if checked { len } else { len.min(TILE_BYTES) }
}

/// Fills `buf[head..]` with copies of `buf[..head]` (whole copies, then a prefix), doubling
/// what is copied each time.
pub(super) fn repeat_head(buf: &mut [u8], head: usize) {
    let mut have = head.min(buf.len());
    while have > 0 && have < buf.len() {
        let n = have.min(buf.len() - have);
        buf.copy_within(..n, have);
        have += n;
    }
}

/// The tolerance of the check for `dtype` on `nranks` ranks, as a fraction of
/// `max(|expected|, 4)`: `eps × (nranks + 2)` for floating-point types, with eps 2^-10 (half),
/// 2^-7 (bfloat16), 2^-23 (float), 2^-52 (double), 2^-3 (FP8 E4M3), 2^-2 (FP8 E5M2): an
/// average rounds once per step, and the expected value itself is rounded to the type. 0 for
/// integers, which must be exact.
pub(super) fn tolerance(dtype: DataType, nranks: usize) -> f64 {
    let eps = match dtype {
        DataType::Float16 => 2f64.powi(-10),
        DataType::Bfloat16 => 2f64.powi(-7),
        DataType::Float32 => 2f64.powi(-23),
        DataType::Float64 => 2f64.powi(-52),
        DataType::Float8e4m3 => 2f64.powi(-3),
        DataType::Float8e5m2 => 2f64.powi(-2),
        _ => return 0.0,
    };
    eps * (nranks as f64 + 2.0)
}

/// Writes the expected output of `rank` (`count` elements of `s.dtype`) into `want`, as the
/// engine computes it: integer results wrapped to the type, integer averages divided in the type.
/// Returns false, writing nothing, when the rank has no output to check (a non-root's Reduce or
/// Gather).
pub(super) fn expected_output(s: &DataSpec, rank: usize, want: &mut [u8], count: usize) -> bool {
    if !checks_output(s, rank) {
        return false;
    }
    let n = s.nranks;
    let int_avg = matches!(s.op, RedOp::Avg) && !s.dtype.is_float() && s.coll.reduces();
    let value = |i: usize| expected_value(s, rank, i).unwrap_or(0.0);
    macro_rules! int {
        ($t:ty) => {{
            let es = std::mem::size_of::<$t>();
            for (i, c) in want.chunks_exact_mut(es).take(count).enumerate() {
                let mut w = (value(i) as i64) as $t;
                if int_avg {
                    // A rank count the type cannot hold (0 after wrapping) leaves the sum.
                    w = w.checked_div(n as $t).unwrap_or(w);
                }
                c.copy_from_slice(&w.to_ne_bytes());
            }
        }};
    }
    macro_rules! flt {
        ($t:ty, $from:expr, $to:expr) => {{
            let es = std::mem::size_of::<$t>();
            for (i, c) in want.chunks_exact_mut(es).take(count).enumerate() {
                c.copy_from_slice(&($from)(value(i)).to_ne_bytes());
            }
        }};
    }
    per_type!(s.dtype, int, flt);
    true
}

/// Counts the elements of `out` that differ from `want` (both at least `count` elements of
/// `dtype`): integers must be equal, floating-point values within `tol × max(|want|, 4)` (see
/// [`tolerance`]; a NaN never is). `kernels/check.cu` applies the same rule on the device.
pub(super) fn count_wrong(dtype: DataType, tol: f64, out: &[u8], want: &[u8], count: usize) -> u64 {
    macro_rules! int {
        ($t:ty) => {{
            let es = std::mem::size_of::<$t>();
            out.chunks_exact(es)
                .zip(want.chunks_exact(es))
                .take(count)
                .filter(|(o, w)| o != w)
                .count() as u64
        }};
    }
    macro_rules! flt {
        ($t:ty, $from:expr, $to:expr) => {{
            let es = std::mem::size_of::<$t>();
            let get = |c: &[u8]| {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(c);
                ($to)(<$t>::from_ne_bytes(b))
            };
            out.chunks_exact(es)
                .zip(want.chunks_exact(es))
                .take(count)
                .filter(|(o, w)| {
                    let (got, want) = (get(o), get(w));
                    // A NaN on either side is never within tolerance, so it counts as wrong.
                    let within = (got - want).abs() <= tol * want.abs().max(4.0);
                    !within
                })
                .count() as u64
        }};
    }
    per_type!(dtype, int, flt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchecked_inputs_repeat_their_generated_head() {
        for len in [0usize, 5, 64, 4096 + 12] {
            let mut b: Vec<u8> = (0..len)
                .map(|i| if i < 7 { i as u8 + 1 } else { 0 })
                .collect();
            repeat_head(&mut b, 7);
            assert!(
                b.iter().enumerate().all(|(i, &v)| v == (i % 7) as u8 + 1),
                "{len}"
            );
        }
        assert_eq!(generated_bytes(1 << 30, true), 1 << 30);
        assert_eq!(generated_bytes(1 << 30, false), TILE_BYTES);
        assert_eq!(generated_bytes(100, false), 100);
    }

    fn spec(coll: BenchColl, dtype: DataType, op: RedOp) -> DataSpec {
        DataSpec {
            coll,
            dtype,
            op,
            root: 1,
            count: 100,
            nranks: 3,
            seed: 7,
        }
    }

    #[test]
    fn products_wrap_like_the_engine() {
        let s = spec(BenchColl::AllReduce, DataType::Int8, RedOp::Prod);
        let want: i64 = (0..3).map(|r| input_value(&s, r, 5) as i64).product();
        assert_eq!(expected_value(&s, 0, 5), Some(want as f64));
    }

    /// The expected output of `s` on rank 0.
    fn want(s: &DataSpec) -> Vec<u8> {
        let mut w = vec![0u8; s.count * s.dtype.size()];
        assert!(expected_output(s, 0, &mut w, s.count));
        w
    }

    #[test]
    fn a_correct_buffer_has_no_wrong_elements_and_a_bad_one_does() {
        for dtype in DataType::ALL {
            for op in [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Avg] {
                let s = spec(BenchColl::AllReduce, dtype, op);
                let w = want(&s);
                let tol = tolerance(dtype, 3);
                let mut out = w.clone();
                assert_eq!(count_wrong(dtype, tol, &out, &w, 100), 0, "{dtype} {op}");
                out[..dtype.size()].copy_from_slice(&vec![0x55; dtype.size()]);
                out[dtype.size()..2 * dtype.size()].copy_from_slice(&vec![0x7f; dtype.size()]);
                assert!(
                    count_wrong(dtype, tol, &out, &w, 100) >= 1,
                    "{dtype} {op}: corruption must be seen"
                );
            }
        }
    }

    #[test]
    fn integer_averages_divide_in_the_type() {
        let s = spec(BenchColl::AllReduce, DataType::Int32, RedOp::Avg);
        let w = want(&s);
        let sum: i64 = (0..3).map(|r| input_value(&s, r, 4) as i64).sum();
        assert_eq!(
            i32::from_ne_bytes(w[16..20].try_into().unwrap()),
            (sum as i32) / 3
        );
    }

    #[test]
    fn tolerance_grows_with_ranks_and_is_zero_for_integers() {
        assert_eq!(tolerance(DataType::Int8, 8), 0.0);
        assert_eq!(tolerance(DataType::Uint64, 8), 0.0);
        assert_eq!(tolerance(DataType::Float32, 2), 4.0 * 2f64.powi(-23));
        assert_eq!(tolerance(DataType::Float16, 6), 8.0 / 1024.0);
        assert_eq!(tolerance(DataType::Bfloat16, 0), 2.0 / 128.0);
        assert_eq!(tolerance(DataType::Float64, 14), 16.0 * 2f64.powi(-52));
        // Within tolerance passes, beyond fails: |out - want| <= tol * max(|want|, 4).
        let tol = tolerance(DataType::Float32, 2);
        let pair = |o: f32, w: f32| {
            count_wrong(
                DataType::Float32,
                tol,
                &o.to_ne_bytes(),
                &w.to_ne_bytes(),
                1,
            )
        };
        assert_eq!(
            pair(1.0 + 8.0 * 2f32.powi(-23), 1.0),
            0,
            "4 x tol at |want| < 4"
        );
        assert_eq!(pair(1.0 + 32.0 * 2f32.powi(-23), 1.0), 1);
        assert_eq!(pair(f32::NAN, 1.0), 1, "NaN is wrong");
        assert_eq!(pair(1.0, f32::NAN), 1, "NaN expected is wrong too");
    }

    #[test]
    fn non_root_outputs_are_not_checked() {
        let s = spec(BenchColl::Reduce, DataType::Float32, RedOp::Sum);
        assert_eq!(expected_value(&s, 0, 0), None);
        assert!(expected_value(&s, 1, 0).is_some());
        let mut w = vec![0xa5u8; 16];
        assert!(!expected_output(&s, 0, &mut w, 4));
        assert_eq!(w, vec![0xa5u8; 16], "nothing written for a non-root");
        let g = spec(BenchColl::Gather, DataType::Float32, RedOp::Sum);
        assert!(!expected_output(&g, 2, &mut w, 4));
        assert!(expected_output(&g, 1, &mut w, 4));
    }
}
