//! FP8 reductions on host memory, with NCCL's rounding (`src/device/reduce_kernel.h`): the FP8
//! arm of [`super::reduce`].

use crate::device::Streams;
use crate::fp8::Fp8Format;
use crate::redop::{Combine, Scalar};

use super::elementwise::map_binary;

/// The pre-multiplier of an FP8 reduction: the scalar rounded to the format (NCCL keeps
/// PreMulSum's scalar in the element type), as an f32; 1 without one.
pub(super) fn fp8_scalar(f: Fp8Format, scalar: Option<Scalar>) -> f32 {
    scalar.map_or(1.0, |s| f.value(f.encode(s.as_f64() as f32)))
}

/// [`super::reduce::reduce_with`] for an FP8 type, with NCCL's rules (`src/device/reduce_kernel.h`): each step
/// is the exact result rounded to binary16, then to FP8 with saturation; `pre` multiplies by the
/// scalar rounded to FP8 and rounds the product the same way before it is combined. Values are
/// decoded and rounded through tables ([`Fp8Format::value`], [`Fp8Format::round_step`]).
///
/// # Safety
/// As `reduce_with`'s integer kernel: pointers valid for `n` one-byte elements; a destination
/// equal to an input or disjoint from it; `d0` and `d1` disjoint.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn fp8_kernel(
    f: Fp8Format,
    c: Combine,
    pre: Option<Scalar>,
    d0: *mut u8,
    d1: Option<*mut u8>,
    a: *const u8,
    b: *const u8,
    n: usize,
    s: Streams,
) {
    let k = pre.map(|p| fp8_scalar(f, Some(p)));
    let op = move |x: f32, y: f32| match c {
        Combine::Sum => x + y,
        Combine::Prod => x * y,
        // As the float kernels compare (`x > y ? x : y`, kernels/reduce.cuh).
        Combine::Max => {
            if x > y {
                x
            } else {
                y
            }
        }
        Combine::Min => {
            if x < y {
                x
            } else {
                y
            }
        }
    };
    let step = move |x: u8, y: u8| {
        let y = match k {
            Some(k) => f.value(f.round_step(f.value(y) * k)),
            None => f.value(y),
        };
        f.round_step(op(f.value(x), y))
    };
    // SAFETY: caller contract.
    unsafe { map_binary::<u8>(d0, d1, a, b, n, step, s) }
}
