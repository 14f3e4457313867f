//! Streaming (non-temporal) stores for large outputs.
//!
//! Writing a line the cache does not hold costs a read of it first (read-for-ownership), so a
//! large out-of-place collective moves each output byte over the memory bus twice. Non-temporal
//! stores write whole lines without reading them; they pay off once the data no longer fits in
//! the caches (as glibc's `memcpy` does above its non-temporal threshold). Reductions stream
//! each 64-byte line from inside the kernel loop as it is computed
//! ([`super::reduce::reduce_with`]); copies stream straight from the source. [`fence`] orders
//! the streamed stores before the operation is reported complete.

use super::reduce::copy;
use crate::device::{ReduceSpec, Streams, Transforms};

/// Outputs at least this large (bytes per rank) are written with streaming stores: past it, a
/// rank's input and output no longer share the 32 MiB last-level cache of the reference host
/// with its peer.
pub(crate) const STREAM_THRESHOLD: usize = 8 << 20;

/// Copies `bytes` from `src` to `dst` with non-temporal stores where the CPU allows.
///
/// # Safety
/// `src` and `dst` must be valid for `bytes` and must not overlap.
pub(crate) unsafe fn stream_copy(dst: *mut u8, src: *const u8, bytes: usize) {
    let head = dst.align_offset(16).min(bytes);
    // SAFETY: within the caller's ranges; every line written starts 16-byte aligned.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 64 <= bytes {
            stream_line(dst.add(i), src.add(i));
            i += 64;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), bytes - i);
    }
}

/// Writes one 64-byte line from `src` to `dst` with non-temporal stores.
///
/// # Safety
/// `src` and `dst` must be valid for 64 bytes and must not overlap; `dst` must be 16-byte
/// aligned.
#[inline(always)]
pub(crate) unsafe fn stream_line(dst: *mut u8, src: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        // SAFETY: caller contract; SSE2 is part of the x86-64 baseline.
        unsafe {
            for k in (0..64).step_by(16) {
                let v = _mm_loadu_si128(src.add(k).cast::<__m128i>());
                _mm_stream_si128(dst.add(k).cast::<__m128i>(), v);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: caller contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, 64)
    }
}

/// Makes streamed stores visible before anything that follows (`sfence`).
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no memory-safety preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// [`copy`] with the destinations `s` names written with streaming stores; transforms and a
/// destination equal to the source fall back to [`copy`] for that call.
///
/// # Safety
/// As [`copy`].
pub(crate) unsafe fn copy_streaming(
    spec: &ReduceSpec,
    t: Transforms,
    d0: *mut u8,
    d1: Option<*mut u8>,
    src: *const u8,
    n: usize,
    s: Streams,
) {
    let transforms = (t.pre && spec.pre.is_some()) || (t.post && spec.post_div.is_some());
    let bytes = n * spec.dtype.size();
    if transforms || !s.any(d1) {
        // SAFETY: caller contract.
        return unsafe { copy(spec, t, d0, d1, src, n) };
    }
    for (d, streamed) in [(Some(d0), s.d0), (d1, s.d1)] {
        let Some(d) = d.filter(|d| d.cast_const() != src) else {
            continue;
        };
        // SAFETY: caller contract: distinct, valid ranges.
        unsafe {
            if streamed {
                stream_copy(d, src, bytes)
            } else {
                std::ptr::copy_nonoverlapping(src, d, bytes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::reduce::reduce_with;
    use super::*;
    use crate::dtype::DataType;
    use crate::redop::RedOp;

    #[test]
    fn streamed_results_equal_plain_ones() {
        let every = [(false, false), (true, false), (false, true), (true, true)];
        for n in [0usize, 1, 3, 17, 4096, 5000, 40_000] {
            let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let b: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
            let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            let spec = ReduceSpec::new(DataType::Float32, RedOp::Sum.lower(DataType::Float32, 2));
            for (d0, d1) in every {
                let s = Streams { d0, d1 };
                let mut d = vec![0f32; n + 1];
                let mut slot = vec![0f32; n];
                // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
                let dst = unsafe { d.as_mut_ptr().cast::<u8>().add(2) }; // misaligned on purpose
                // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
                unsafe {
                    reduce_with(
                        &spec,
                        Transforms::default(),
                        dst,
                        Some(slot.as_mut_ptr().cast()),
                        a.as_ptr().cast(),
                        b.as_ptr().cast(),
                        n,
                        s,
                    )
                };
                fence();
                let got: Vec<f32> = (0..n)
                    // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
                    .map(|i| unsafe { dst.cast::<f32>().add(i).read_unaligned() })
                    .collect();
                assert_eq!(got, want, "n={n} {s:?}");
                assert_eq!(slot, want, "n={n} {s:?}");
                let mut c = vec![0u8; n * 4 + 3];
                let mut e = vec![0f32; n];
                // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
                unsafe {
                    copy_streaming(
                        &spec,
                        Transforms::default(),
                        c.as_mut_ptr().add(3),
                        Some(e.as_mut_ptr().cast()),
                        a.as_ptr().cast(),
                        n,
                        s,
                    )
                };
                fence();
                assert_eq!(&c[3..], crate::dtype::as_bytes(&a), "n={n} {s:?}");
                assert_eq!(e, a, "n={n} {s:?}");
            }
        }
    }

    /// Element bytes 1..=5 in a pattern: no NaN or infinity for any type, so results compare
    /// bitwise.
    fn pattern(bytes: usize, seed: usize) -> Vec<u8> {
        (0..bytes).map(|i| ((i * 7 + seed) % 5 + 1) as u8).collect()
    }

    /// The line loop that streams from inside the kernel gives bit-for-bit the plain kernel's
    /// results for every type and operation, wherever the destinations start relative to a
    /// cache line, with either destination streamed, and in place.
    #[test]
    fn streamed_kernel_lines_equal_the_plain_kernel() {
        use crate::redop::Scalar;
        let ops = RedOp::BUILTIN
            .into_iter()
            .chain([RedOp::PreMulSum(Scalar::Int(3))]);
        let every = [(true, false), (false, true), (true, true)];
        for dtype in DataType::ALL {
            let es = dtype.size();
            for op in ops.clone() {
                let spec = ReduceSpec::new(dtype, op.lower(dtype, 3));
                let t = Transforms {
                    pre: true,
                    post: true,
                };
                for n in [0usize, 1, 63, 64, 65, 1000] {
                    for (off0, off1) in [(0, 0), (1, 0), (5, 3), (0, 3)] {
                        // 0: out of place; 1: d0 is a; 2: d0 is b.
                        for in_place in 0..3 {
                            for (x0, x1) in every {
                                let len = (n + 8) * es;
                                let (a0, b0) = (pattern(len, 1), pattern(len, 2));
                                let mut want =
                                    (a0.clone(), b0.clone(), vec![0u8; len], vec![0u8; len]);
                                let mut got = want.clone();
                                for (bufs, s) in [
                                    (&mut want, Streams::default()),
                                    (&mut got, Streams { d0: x0, d1: x1 }),
                                ] {
                                    let (a, b, d, e) = bufs;
                                    // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
                                    let e1 = unsafe { e.as_mut_ptr().add(off1 * es) };
                                    // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
                                    let (d0, pa, pb) = unsafe {
                                        match in_place {
                                            0 => (
                                                d.as_mut_ptr().add(off0 * es),
                                                a.as_ptr(),
                                                b.as_ptr(),
                                            ),
                                            1 => (
                                                a.as_mut_ptr().add(off0 * es),
                                                a.as_ptr().add(off0 * es),
                                                b.as_ptr(),
                                            ),
                                            _ => (
                                                b.as_mut_ptr().add(off0 * es),
                                                a.as_ptr(),
                                                b.as_ptr().add(off0 * es),
                                            ),
                                        }
                                    };
                                    // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
                                    unsafe { reduce_with(&spec, t, d0, Some(e1), pa, pb, n, s) };
                                    fence();
                                }
                                assert!(
                                    got == want,
                                    "{dtype:?} {op:?} n={n} offsets {off0}/{off1} in_place={in_place} streams {x0}/{x1}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn in_place_destinations_are_not_streamed_over_their_input() {
        let spec = ReduceSpec::new(DataType::Float32, RedOp::Sum.lower(DataType::Float32, 2));
        let mut a: Vec<f32> = (0..5000).map(|i| i as f32).collect();
        let b: Vec<f32> = vec![1.0; 5000];
        let want: Vec<f32> = a.iter().map(|x| x + 1.0).collect();
        let p = a.as_mut_ptr().cast::<u8>();
        let s = Streams { d0: true, d1: true };
        // SAFETY: every pointer comes from a vector that holds the elements the call touches, and destinations are distinct from or equal to their sources as the kernels require.
        unsafe {
            reduce_with(
                &spec,
                Transforms::default(),
                p,
                None,
                p,
                b.as_ptr().cast(),
                5000,
                s,
            )
        };
        fence();
        assert_eq!(a, want);
    }
}
