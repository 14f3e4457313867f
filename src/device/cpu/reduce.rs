//! Element-wise reduction and copy kernels on host memory.
//!
//! One kernel shape serves every primitive of the collectives: `dst = post(a ⊕ pre(b))`, written to
//! one or two destinations in a single pass (a reduce that also feeds the next send slot reads its
//! inputs once). Loops are monomorphised per data type, combine operation and pre/post transform,
//! and compiled twice — baseline x86-64 and AVX2 — with the AVX2 copy chosen at run time.
//! Half-precision types are widened to f32 in blocks, combined, and rounded back (round to nearest
//! even, `half` crate), so every reduction step rounds once, as NCCL's `__hadd` does.

use half::{bf16, f16};

use crate::device::{ReduceSpec, Streams, Transforms};
use crate::dtype::DataType;
use crate::fp8::Fp8Format;
use crate::redop::{Combine, Scalar};

use super::elementwise::{map_binary, map_unary};
use super::fp8::{fp8_kernel, fp8_scalar};
use super::stream::stream_copy;

/// `d0[i] = post(a[i] ⊕ pre(b[i]))` for `n` elements, and the same into `d1` when given.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) must be valid for `n` elements of `spec.dtype`. A destination may be
/// the same address as `a` or `b` (in-place); partial overlaps are not allowed. Pointers need no
/// alignment.
pub(crate) unsafe fn reduce(
    spec: &ReduceSpec,
    t: Transforms,
    d0: *mut u8,
    d1: Option<*mut u8>,
    a: *const u8,
    b: *const u8,
    n: usize,
) {
    // SAFETY: forwarded caller contract.
    unsafe { reduce_with(spec, t, d0, d1, a, b, n, Streams::default()) }
}

/// [`reduce`] writing the destinations `s` names with streaming stores from the kernel's own
/// loop, one 64-byte line at a time (no intermediate block: on the reference VM a 16 KiB block
/// streamed out afterwards cost a C slot FIFO 25-30% of its 16 MiB all-reduce bandwidth).
/// Destinations that are not aligned to their element type, or that equal an input (in place),
/// are written with ordinary stores. The caller fences ([`super::stream::fence`]) before
/// publishing.
///
/// # Safety
/// As [`reduce`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce_with(
    spec: &ReduceSpec,
    t: Transforms,
    d0: *mut u8,
    d1: Option<*mut u8>,
    a: *const u8,
    b: *const u8,
    n: usize,
    s: Streams,
) {
    if n == 0 {
        return;
    }
    // A destination equal to an input is cached already: store it the ordinary way.
    let s = Streams {
        d0: s.d0 && d0.cast_const() != a && d0.cast_const() != b,
        d1: s.d1 && d1.is_some_and(|d| d.cast_const() != a && d.cast_const() != b),
    };
    let pre = if t.pre { spec.pre } else { None };
    let post = if t.post { spec.post_div } else { None };
    // SAFETY: forwarded caller contract.
    unsafe {
        match spec.dtype {
            DataType::Int8 => int_kernel::<i8>(spec.combine, pre, post, d0, d1, a, b, n, s),
            DataType::Uint8 => int_kernel::<u8>(spec.combine, pre, post, d0, d1, a, b, n, s),
            DataType::Int32 => int_kernel::<i32>(spec.combine, pre, post, d0, d1, a, b, n, s),
            DataType::Uint32 => int_kernel::<u32>(spec.combine, pre, post, d0, d1, a, b, n, s),
            DataType::Int64 => int_kernel::<i64>(spec.combine, pre, post, d0, d1, a, b, n, s),
            DataType::Uint64 => int_kernel::<u64>(spec.combine, pre, post, d0, d1, a, b, n, s),
            DataType::Float32 => float_kernel::<f32>(spec.combine, pre, d0, d1, a, b, n, s),
            DataType::Float64 => float_kernel::<f64>(spec.combine, pre, d0, d1, a, b, n, s),
            DataType::Float16 => half_kernel::<f16>(spec.combine, pre, d0, d1, a, b, n, s),
            DataType::Bfloat16 => half_kernel::<bf16>(spec.combine, pre, d0, d1, a, b, n, s),
            DataType::Float8e4m3 => {
                fp8_kernel(Fp8Format::E4M3, spec.combine, pre, d0, d1, a, b, n, s)
            }
            DataType::Float8e5m2 => {
                fp8_kernel(Fp8Format::E5M2, spec.combine, pre, d0, d1, a, b, n, s)
            }
        }
    }
}

/// `d0[i] = post(pre(src[i]))` for `n` elements (and into `d1` when given); a plain move when
/// neither transform applies. A destination equal to `src` is skipped when nothing changes.
///
/// # Safety
/// As [`reduce`]: pointers valid for `n` elements; destinations equal to `src` or disjoint.
pub(crate) unsafe fn copy(
    spec: &ReduceSpec,
    t: Transforms,
    d0: *mut u8,
    d1: Option<*mut u8>,
    src: *const u8,
    n: usize,
) {
    let pre = t.pre && spec.pre.is_some();
    let post = t.post && spec.post_div.is_some();
    if !pre && !post {
        let bytes = n * spec.dtype.size();
        for d in std::iter::once(d0).chain(d1) {
            if d.cast_const() != src {
                // SAFETY: caller guarantees validity; `copy` tolerates any overlap.
                unsafe { std::ptr::copy(src, d, bytes) };
            }
        }
        return;
    }
    // SAFETY: forwarded caller contract.
    unsafe { transform(spec, pre, post, d0, d1, src, n) }
}

/// `d0` (and `d1`) = `post(pre(src))` element-wise, with the spec's scalar and divisor.
///
/// # Safety
/// `src`, `d0` (and `d1`) valid for `n` elements of `spec.dtype`; destinations equal to `src`
/// or disjoint from it (the contract of [`copy`]).
unsafe fn transform(
    spec: &ReduceSpec,
    pre: bool,
    post: bool,
    d0: *mut u8,
    d1: Option<*mut u8>,
    src: *const u8,
    n: usize,
) {
    let scalar = if pre { spec.pre } else { None };
    let div = if post { spec.post_div } else { None };
    macro_rules! int {
        ($t:ty) => {{
            let s = scalar.map(|s| s.as_i64() as $t);
            let q = div.map(|d| d as $t);
            // SAFETY: caller contract.
            unsafe {
                map_unary::<$t>(d0, d1, src, n, |x| {
                    let x = match s {
                        Some(s) => x.wrapping_mul(s),
                        None => x,
                    };
                    match q {
                        Some(q) => x / q,
                        None => x,
                    }
                })
            }
        }};
    }
    match spec.dtype {
        DataType::Int8 => int!(i8),
        DataType::Uint8 => int!(u8),
        DataType::Int32 => int!(i32),
        DataType::Uint32 => int!(u32),
        DataType::Int64 => int!(i64),
        DataType::Uint64 => int!(u64),
        DataType::Float32 => {
            let s = scalar.map_or(1.0, |s| s.as_f64() as f32);
            // SAFETY: caller contract.
            unsafe { map_unary::<f32>(d0, d1, src, n, |x| x * s) }
        }
        DataType::Float64 => {
            let s = scalar.map_or(1.0, |s| s.as_f64());
            // SAFETY: caller contract.
            unsafe { map_unary::<f64>(d0, d1, src, n, |x| x * s) }
        }
        DataType::Float8e4m3 | DataType::Float8e5m2 => {
            let f = match spec.dtype {
                DataType::Float8e4m3 => Fp8Format::E4M3,
                _ => Fp8Format::E5M2,
            };
            let k = fp8_scalar(f, scalar);
            // SAFETY: caller contract.
            unsafe { map_unary::<u8>(d0, d1, src, n, |x| f.round_step(f.value(x) * k)) }
        }
        DataType::Float16 | DataType::Bfloat16 => {
            // Scale through the reduce kernel: 0 + pre(x) rounds once, like the GPU's half multiply.
            let zeros = vec![0u8; n * spec.dtype.size()];
            let combine = ReduceSpec {
                combine: Combine::Sum,
                ..*spec
            };
            let t = Transforms { pre, post: false };
            // SAFETY: caller contract; `zeros` holds n elements.
            unsafe { reduce(&combine, t, d0, d1, zeros.as_ptr(), src, n) }
        }
    }
}

/// Integer element operations with NCCL's wrapping semantics.
trait Int: Copy + PartialOrd + Send + Sync + 'static {
    fn wadd(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn from_i64(v: i64) -> Self;
}

macro_rules! int_impl {
    ($($t:ty),*) => {$(
        impl Int for $t {
            #[inline(always)] fn wadd(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn wmul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn div(self, o: Self) -> Self { self / o }
            #[inline(always)] fn from_i64(v: i64) -> Self { v as $t }
        }
    )*};
}
int_impl!(i8, u8, i32, u32, i64, u64);

/// [`reduce_with`] for an integer type: wrapping sum and product, optional pre-multiplier and
/// post-divisor.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of the type; a destination equal to an
/// input or disjoint from it; `d0` and `d1` disjoint (the contract of [`reduce_with`]).
#[allow(clippy::too_many_arguments)]
unsafe fn int_kernel<T: Int>(
    c: Combine,
    pre: Option<Scalar>,
    post: Option<u64>,
    d0: *mut u8,
    d1: Option<*mut u8>,
    a: *const u8,
    b: *const u8,
    n: usize,
    s: Streams,
) {
    let (d0, d1, a, b) = (
        d0.cast::<T>(),
        d1.map(|p| p.cast::<T>()),
        a.cast::<T>(),
        b.cast::<T>(),
    );
    macro_rules! go {
        ($f:expr) => {
            // SAFETY: caller contract.
            unsafe { map_binary::<T>(d0, d1, a, b, n, $f, s) }
        };
    }
    macro_rules! with_post {
        ($comb:expr) => {
            match (pre, post) {
                (None, None) => go!(|x: T, y: T| $comb(x, y)),
                (Some(k), None) => {
                    let k = T::from_i64(k.as_i64());
                    go!(move |x: T, y: T| $comb(x, y.wmul(k)))
                }
                (None, Some(q)) => {
                    let q = T::from_i64(q as i64);
                    go!(move |x: T, y: T| $comb(x, y).div(q))
                }
                (Some(k), Some(q)) => {
                    let (k, q) = (T::from_i64(k.as_i64()), T::from_i64(q as i64));
                    go!(move |x: T, y: T| $comb(x, y.wmul(k)).div(q))
                }
            }
        };
    }
    match c {
        Combine::Sum => with_post!(|x: T, y: T| x.wadd(y)),
        Combine::Prod => with_post!(|x: T, y: T| x.wmul(y)),
        Combine::Max => with_post!(|x: T, y: T| if x > y { x } else { y }),
        Combine::Min => with_post!(|x: T, y: T| if x < y { x } else { y }),
    }
}

/// Float operations for f32/f64.
trait Float:
    Copy
    + PartialOrd
    + Send
    + Sync
    + 'static
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
{
    fn from_f64(v: f64) -> Self;
}
impl Float for f32 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}
impl Float for f64 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// [`reduce_with`] for `f32`/`f64`, with an optional pre-multiplier.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of the type; a destination equal to an
/// input or disjoint from it; `d0` and `d1` disjoint (the contract of [`reduce_with`]).
#[allow(clippy::too_many_arguments)]
unsafe fn float_kernel<T: Float>(
    c: Combine,
    pre: Option<Scalar>,
    d0: *mut u8,
    d1: Option<*mut u8>,
    a: *const u8,
    b: *const u8,
    n: usize,
    s: Streams,
) {
    let (d0, d1, a, b) = (
        d0.cast::<T>(),
        d1.map(|p| p.cast::<T>()),
        a.cast::<T>(),
        b.cast::<T>(),
    );
    macro_rules! go {
        ($comb:expr) => {
            match pre {
                // SAFETY: caller contract.
                None => unsafe { map_binary::<T>(d0, d1, a, b, n, |x: T, y: T| $comb(x, y), s) },
                Some(k) => {
                    let k = T::from_f64(k.as_f64());
                    // SAFETY: caller contract.
                    unsafe {
                        map_binary::<T>(d0, d1, a, b, n, move |x: T, y: T| $comb(x, y * k), s)
                    }
                }
            }
        };
    }
    match c {
        Combine::Sum => go!(|x: T, y: T| x + y),
        Combine::Prod => go!(|x: T, y: T| x * y),
        Combine::Max => go!(|x: T, y: T| if x > y { x } else { y }),
        Combine::Min => go!(|x: T, y: T| if x < y { x } else { y }),
    }
}

/// The two 16-bit float types, widened to f32 for arithmetic.
trait Half: Copy + Default + Send + Sync + 'static {
    fn to_f32_slice(src: &[Self], dst: &mut [f32]);
    fn from_f32_slice(src: &[f32], dst: &mut [Self]);
}
impl Half for f16 {
    fn to_f32_slice(src: &[Self], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst)
    }
    fn from_f32_slice(src: &[f32], dst: &mut [Self]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(dst, src)
    }
}
impl Half for bf16 {
    fn to_f32_slice(src: &[Self], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst)
    }
    fn from_f32_slice(src: &[f32], dst: &mut [Self]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(dst, src)
    }
}

/// [`reduce_with`] for `f16`/`bf16`: widened to `f32` in blocks, combined, rounded back once.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of the type; a destination equal to an
/// input or disjoint from it; `d0` and `d1` disjoint (the contract of [`reduce_with`]).
#[allow(clippy::too_many_arguments)]
unsafe fn half_kernel<H: Half>(
    c: Combine,
    pre: Option<Scalar>,
    d0: *mut u8,
    d1: Option<*mut u8>,
    a: *const u8,
    b: *const u8,
    n: usize,
    s: Streams,
) {
    const BLOCK: usize = 256;
    let mut fa = [0f32; BLOCK];
    let mut fb = [0f32; BLOCK];
    let mut out = [H::default(); BLOCK];
    let spec = ReduceSpec {
        dtype: DataType::Float32,
        combine: c,
        pre,
        post_div: None,
    };
    let t = Transforms {
        pre: pre.is_some(),
        post: false,
    };
    let (a, b) = (a.cast::<H>(), b.cast::<H>());
    let mut i = 0;
    while i < n {
        let m = BLOCK.min(n - i);
        // SAFETY: caller contract: a and b are valid for n elements; reads may alias the
        // destinations, so copy the block out before writing.
        let (sa, sb) = unsafe {
            (
                std::slice::from_raw_parts(a.add(i), m),
                std::slice::from_raw_parts(b.add(i), m),
            )
        };
        H::to_f32_slice(sa, &mut fa[..m]);
        H::to_f32_slice(sb, &mut fb[..m]);
        let fa_ptr = fa.as_mut_ptr().cast::<u8>();
        // SAFETY: both blocks hold m f32s; the result overwrites `fa` in place.
        unsafe { reduce(&spec, t, fa_ptr, None, fa_ptr, fb.as_ptr().cast(), m) };
        H::from_f32_slice(&fa[..m], &mut out[..m]);
        for (d, streamed) in std::iter::once((d0, s.d0)).chain(d1.map(|d| (d, s.d1))) {
            // SAFETY: destination valid for n elements; `out` is a separate buffer.
            unsafe {
                let d = d.cast::<H>().add(i);
                if streamed {
                    stream_copy(d.cast(), out.as_ptr().cast(), m * std::mem::size_of::<H>());
                } else {
                    std::ptr::copy_nonoverlapping(out.as_ptr(), d, m);
                }
            }
        }
        i += m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redop::RedOp;

    fn run<T: Copy + Default>(spec: &ReduceSpec, t: Transforms, a: &[T], b: &[T]) -> Vec<T> {
        let mut d = vec![T::default(); a.len()];
        // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
        unsafe {
            reduce(
                spec,
                t,
                d.as_mut_ptr().cast(),
                None,
                a.as_ptr().cast(),
                b.as_ptr().cast(),
                a.len(),
            )
        };
        d
    }

    #[test]
    fn integer_ops_wrap_and_divide() {
        let sum = ReduceSpec::new(DataType::Int8, RedOp::Sum.lower(DataType::Int8, 2));
        assert_eq!(
            run(&sum, Transforms::default(), &[100i8, -5], &[100, 3]),
            vec![-56, -2]
        );
        let avg = ReduceSpec::new(DataType::Int32, RedOp::Avg.lower(DataType::Int32, 3));
        let t = Transforms {
            pre: true,
            post: true,
        };
        assert_eq!(
            run(&avg, t, &[10i32, -7], &[2, 0]),
            vec![4, -2],
            "truncating division like C"
        );
        let max = ReduceSpec::new(DataType::Uint64, RedOp::Max.lower(DataType::Uint64, 2));
        assert_eq!(run(&max, t, &[1u64, u64::MAX], &[2, 3]), vec![2, u64::MAX]);
        let pms = ReduceSpec::new(
            DataType::Uint8,
            RedOp::PreMulSum(Scalar::Int(3)).lower(DataType::Uint8, 2),
        );
        assert_eq!(
            run(&pms, t, &[1u8], &[100]),
            vec![45],
            "1 + 100*3 wraps mod 256"
        );
    }

    #[test]
    fn float_ops_and_pre_scaling() {
        let avg = ReduceSpec::new(DataType::Float32, RedOp::Avg.lower(DataType::Float32, 4));
        let t = Transforms {
            pre: true,
            post: true,
        };
        assert_eq!(run(&avg, t, &[1.0f32], &[8.0]), vec![3.0]);
        let min = ReduceSpec::new(DataType::Float64, RedOp::Min.lower(DataType::Float64, 2));
        assert_eq!(run(&min, t, &[1.5f64, -2.0], &[0.5, 7.0]), vec![0.5, -2.0]);
        let n = 1000;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
        let sum = ReduceSpec::new(DataType::Float32, RedOp::Sum.lower(DataType::Float32, 2));
        let d = run(&sum, t, &a, &b);
        assert!(d.iter().enumerate().all(|(i, &v)| v == 3.0 * i as f32));
    }

    #[test]
    fn half_types_round_once_per_step() {
        let spec = ReduceSpec::new(DataType::Float16, RedOp::Sum.lower(DataType::Float16, 2));
        let a: Vec<f16> = (0..700).map(|i| f16::from_f32(i as f32 * 0.5)).collect();
        let b: Vec<f16> = (0..700).map(|_| f16::from_f32(0.25)).collect();
        let d = run(&spec, Transforms::default(), &a, &b);
        for i in 0..700 {
            assert_eq!(d[i], f16::from_f32(a[i].to_f32() + 0.25), "element {i}");
        }
        let spec = ReduceSpec::new(DataType::Bfloat16, RedOp::Prod.lower(DataType::Bfloat16, 2));
        let d = run(
            &spec,
            Transforms::default(),
            &[bf16::from_f32(3.0)],
            &[bf16::from_f32(-2.0)],
        );
        assert_eq!(d, vec![bf16::from_f32(-6.0)]);
    }

    #[test]
    fn fp8_follows_nccl_rounding_rules() {
        use crate::fp8::{F8E4M3, F8E5M2};
        let e4 = |v: f32| F8E4M3::from_f32(v);
        // The scalar is rounded to E4M3 (0.3 → 0.3125) and the product to E4M3 (0.9375) before
        // the sum, whose tie (1.9375, between 1.875 and 2) goes to the even code: 2. Rounding
        // only once would give 1 + 0.9 = 1.9 → 1.875.
        let spec = ReduceSpec::new(
            DataType::Float8e4m3,
            RedOp::PreMulSum(Scalar::Float(0.3)).lower(DataType::Float8e4m3, 2),
        );
        let pre = Transforms {
            pre: true,
            post: false,
        };
        assert_eq!(run(&spec, pre, &[e4(1.0)], &[e4(3.0)]), vec![e4(2.0)]);
        // Past the largest finite value the sum saturates (E5M2 through binary16's infinity).
        let spec = ReduceSpec::new(
            DataType::Float8e5m2,
            RedOp::Sum.lower(DataType::Float8e5m2, 2),
        );
        let big = F8E5M2::from_f32(57344.0);
        let d = run(
            &spec,
            Transforms::default(),
            &[big, big],
            &[big, F8E5M2::from_f32(-1.0)],
        );
        assert_eq!(d, vec![big, big]);
        let spec = ReduceSpec::new(
            DataType::Float8e4m3,
            RedOp::Max.lower(DataType::Float8e4m3, 2),
        );
        let d = run(
            &spec,
            Transforms::default(),
            &[e4(-3.0), e4(2.5)],
            &[e4(-4.0), e4(6.0)],
        );
        assert_eq!(d, vec![e4(-3.0), e4(6.0)]);
        // Avg on four ranks multiplies each input by E4M3(1/4) first.
        let spec = ReduceSpec::new(
            DataType::Float8e4m3,
            RedOp::Avg.lower(DataType::Float8e4m3, 4),
        );
        let mut d = vec![F8E4M3::default(); 1];
        // SAFETY: `d` and the source hold one element each.
        unsafe {
            copy(
                &spec,
                pre,
                d.as_mut_ptr().cast(),
                None,
                [e4(6.0)].as_ptr().cast(),
                1,
            )
        };
        assert_eq!(d, vec![e4(1.5)]);
    }

    #[test]
    fn two_destinations_and_in_place() {
        let spec = ReduceSpec::new(DataType::Uint32, RedOp::Sum.lower(DataType::Uint32, 2));
        let mut acc = vec![1u32, 2, 3];
        let b = [10u32, 20, 30];
        let mut d1 = vec![0u32; 3];
        let p = acc.as_mut_ptr().cast::<u8>();
        // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
        unsafe {
            reduce(
                &spec,
                Transforms::default(),
                p,
                Some(d1.as_mut_ptr().cast()),
                p,
                b.as_ptr().cast(),
                3,
            )
        };
        assert_eq!(acc, vec![11, 22, 33]);
        assert_eq!(d1, acc);
    }

    #[test]
    fn copy_with_and_without_transforms() {
        let spec = ReduceSpec::new(
            DataType::Int64,
            RedOp::PreMulSum(Scalar::Int(-2)).lower(DataType::Int64, 2),
        );
        let src = vec![1i64, 2, 3];
        let mut d = vec![0i64; 3];
        // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
        unsafe {
            copy(
                &spec,
                Transforms {
                    pre: true,
                    post: false,
                },
                d.as_mut_ptr().cast(),
                None,
                src.as_ptr().cast(),
                3,
            )
        };
        assert_eq!(d, vec![-2, -4, -6]);
        // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
        unsafe {
            copy(
                &spec,
                Transforms::default(),
                d.as_mut_ptr().cast(),
                None,
                src.as_ptr().cast(),
                3,
            )
        };
        assert_eq!(d, src);
        let h = ReduceSpec::new(
            DataType::Bfloat16,
            RedOp::PreMulSum(Scalar::Float(0.5)).lower(DataType::Bfloat16, 2),
        );
        let hs = [bf16::from_f32(3.0)];
        let mut hd = vec![bf16::ZERO];
        // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
        unsafe {
            copy(
                &h,
                Transforms {
                    pre: true,
                    post: false,
                },
                hd.as_mut_ptr().cast(),
                None,
                hs.as_ptr().cast(),
                1,
            )
        };
        assert_eq!(hd[0], bf16::from_f32(1.5));
    }
}
