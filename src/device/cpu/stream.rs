//! Streaming (non-temporal) stores for large outputs.
//!
//! Writing a line the cache does not hold costs a read of it first (read-for-ownership), so a
//! large out-of-place collective moves each output byte over the memory bus twice. Non-temporal
//! stores write whole lines without reading them; they pay off once the data no longer fits in
//! the caches (as glibc's `memcpy` does above its non-temporal threshold). Results are
//! computed into a small cache-resident block, then streamed out. [`fence`] orders the streamed
//! stores before the operation is reported complete.

use super::reduce::{ReduceSpec, Transforms, copy, reduce};

/// Outputs at least this large (bytes per rank) are written with streaming stores: past it, a
/// rank's input and output no longer share the 32 MiB last-level cache of the reference host
/// with its peer.
pub const STREAM_THRESHOLD: usize = 8 << 20;

/// Bytes computed per block before streaming.
const BLOCK: usize = 16 << 10;

#[repr(C, align(64))]
struct Block([u8; BLOCK]);

/// Copies `bytes` from `src` to `dst` with non-temporal stores where the CPU allows.
///
/// # Safety
/// `src` and `dst` must be valid for `bytes` and must not overlap.
pub unsafe fn stream_copy(dst: *mut u8, src: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = dst.align_offset(16).min(bytes);
        // SAFETY: within the caller's ranges; SSE2 is part of the x86-64 baseline.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let mut i = head;
            while i + 64 <= bytes {
                for k in (0..64).step_by(16) {
                    let v = _mm_loadu_si128(src.add(i + k).cast::<__m128i>());
                    _mm_stream_si128(dst.add(i + k).cast::<__m128i>(), v);
                }
                i += 64;
            }
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), bytes - i);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: caller contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, bytes)
    }
}

/// Makes streamed stores visible before anything that follows (`sfence`).
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no memory-safety preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// [`reduce`] whose first destination is written with streaming stores (the second, a FIFO
/// slot the peer reads next, stays cached). In-place calls (`d0` equal to an input) use
/// ordinary stores: their lines are already cached.
///
/// # Safety
/// As [`reduce`].
pub unsafe fn reduce_streaming(
    spec: &ReduceSpec,
    t: Transforms,
    d0: *mut u8,
    d1: Option<*mut u8>,
    a: *const u8,
    b: *const u8,
    n: usize,
) {
    let es = spec.dtype.size();
    if d0.cast_const() == a || d0.cast_const() == b {
        // SAFETY: caller contract.
        return unsafe { reduce(spec, t, d0, d1, a, b, n) };
    }
    let mut tmp = Block([0; BLOCK]);
    let per = BLOCK / es;
    let mut i = 0;
    while i < n {
        let m = per.min(n - i);
        let off = i * es;
        // SAFETY: offsets stay within the caller's n elements; tmp holds `per` elements.
        unsafe {
            reduce(
                spec,
                t,
                tmp.0.as_mut_ptr(),
                d1.map(|d| d.add(off)),
                a.add(off),
                b.add(off),
                m,
            );
            stream_copy(d0.add(off), tmp.0.as_ptr(), m * es);
        }
        i += m;
    }
}

/// [`copy`] whose first destination is written with streaming stores; transforms and an
/// in-place first destination fall back to [`copy`].
///
/// # Safety
/// As [`copy`].
pub unsafe fn copy_streaming(
    spec: &ReduceSpec,
    t: Transforms,
    d0: *mut u8,
    d1: Option<*mut u8>,
    src: *const u8,
    n: usize,
) {
    let transforms = (t.pre && spec.pre.is_some()) || (t.post && spec.post_div.is_some());
    let bytes = n * spec.dtype.size();
    if transforms || d0.cast_const() == src {
        // SAFETY: caller contract.
        return unsafe { copy(spec, t, d0, d1, src, n) };
    }
    // SAFETY: caller contract: distinct, valid ranges.
    unsafe {
        stream_copy(d0, src, bytes);
        if let Some(d1) = d1
            && d1.cast_const() != src
        {
            std::ptr::copy_nonoverlapping(src, d1, bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedOp;
    use crate::dtype::DataType;

    #[test]
    fn streamed_results_equal_plain_ones() {
        for n in [0usize, 1, 3, 17, 4096, 5000, 40_000] {
            let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let b: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
            let spec = ReduceSpec::new(DataType::Float32, RedOp::Sum.lower(DataType::Float32, 2));
            let mut d = vec![0f32; n + 1];
            let mut slot = vec![0f32; n];
            let dst = unsafe { d.as_mut_ptr().cast::<u8>().add(2) }; // misaligned on purpose
            unsafe {
                reduce_streaming(
                    &spec,
                    Transforms::default(),
                    dst,
                    Some(slot.as_mut_ptr().cast()),
                    a.as_ptr().cast(),
                    b.as_ptr().cast(),
                    n,
                )
            };
            fence();
            let got: Vec<f32> = (0..n)
                .map(|i| unsafe { dst.cast::<f32>().add(i).read_unaligned() })
                .collect();
            let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            assert_eq!(got, want, "n={n}");
            assert_eq!(slot, want);
            let mut c = vec![0u8; n * 4 + 3];
            unsafe {
                copy_streaming(
                    &spec,
                    Transforms::default(),
                    c.as_mut_ptr().add(3),
                    None,
                    a.as_ptr().cast(),
                    n,
                )
            };
            fence();
            assert_eq!(&c[3..], crate::dtype::as_bytes(&a));
        }
    }
}
