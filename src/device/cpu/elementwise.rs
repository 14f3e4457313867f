//! The element loops under every kernel: `f` applied element-wise over one or two inputs into
//! one or two destinations, built for baseline x86-64 and for AVX2 (chosen at run time), with a
//! line-at-a-time variant for destinations written with streaming stores.

use super::stream::stream_line;
use crate::device::Streams;

/// Applies `f` element-wise to `a` and `b` into `d0` (and `d1`), choosing the AVX2 build when
/// the CPU has it.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of `T`; a destination equal to an input or
/// disjoint from it; `d0` and `d1` disjoint.
#[inline(always)]
pub(super) unsafe fn map_binary<T: Copy>(
    d0: *mut T,
    d1: Option<*mut T>,
    a: *const T,
    b: *const T,
    n: usize,
    f: impl Fn(T, T) -> T + Copy,
    s: Streams,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2; pointer validity is the caller's contract.
        return unsafe { binary_avx2(d0, d1, a, b, n, f, s) };
    }
    // SAFETY: caller contract.
    unsafe { binary_dispatch(d0, d1, a, b, n, f, s) }
}

/// [`binary_dispatch`] compiled for AVX2.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of `T`; a destination equal to an input or
/// disjoint from it; `d0` and `d1` disjoint.
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn binary_avx2<T: Copy>(
    d0: *mut T,
    d1: Option<*mut T>,
    a: *const T,
    b: *const T,
    n: usize,
    f: impl Fn(T, T) -> T + Copy,
    s: Streams,
) {
    // SAFETY: caller contract.
    unsafe { binary_dispatch(d0, d1, a, b, n, f, s) }
}

/// The streamed line loop when some destination streams, else the plain element loop.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of `T`; a destination equal to an input or
/// disjoint from it; `d0` and `d1` disjoint.
#[inline(always)]
unsafe fn binary_dispatch<T: Copy>(
    d0: *mut T,
    d1: Option<*mut T>,
    a: *const T,
    b: *const T,
    n: usize,
    f: impl Fn(T, T) -> T + Copy,
    s: Streams,
) {
    let aligned = |p: *const T| (p as usize).is_multiple_of(std::mem::align_of::<T>());
    let all_aligned = aligned(d0) && aligned(a) && aligned(b) && d1.is_none_or(|d| aligned(d));
    // SAFETY: caller contract, for both loops.
    unsafe {
        if (s.d0 || s.d1) && all_aligned {
            binary_lines(d0, d1, a, b, n, f, s);
        } else {
            binary_loop(d0, d1, a, b, n, f);
        }
    }
}

/// Bytes a kernel computes before storing them: one cache line.
const LINE: usize = 64;

#[repr(C, align(64))]
struct Line([u8; LINE]);

/// The element loop for streamed destinations: runs [`binary_loop`] up to the first
/// line-aligned element, then per 64-byte line loads both operands, combines them in
/// registers and writes the line to each destination, streaming where `s` says (lines are
/// aligned to the first streamed destination; another whose lines then fall off 16-byte
/// alignment takes ordinary stores), then finishes the
/// tail with [`binary_loop`]. Each line is read before it is written, so a destination equal
/// to an input stays correct.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of `T`; a destination equal to an input or
/// disjoint from it; `d0` and `d1` disjoint.
#[inline(always)]
unsafe fn binary_lines<T: Copy>(
    d0: *mut T,
    d1: Option<*mut T>,
    a: *const T,
    b: *const T,
    n: usize,
    f: impl Fn(T, T) -> T + Copy,
    s: Streams,
) {
    let size = std::mem::size_of::<T>();
    let per = LINE / size;
    // Lines are aligned to the first streamed destination.
    let lead = match d1 {
        Some(d) if !s.d0 => d,
        _ => d0,
    };
    let head = ((lead as usize).wrapping_neg() % LINE / size).min(n);
    // SAFETY: for the whole body, every pointer is valid for n elements (caller contract); lines stay
    // below n; `Line` is 64-byte aligned, so reading T from it is aligned.
    unsafe {
        binary_loop(d0, d1, a, b, head, f);
        let nt = |d: *mut T, want: bool| want && (d.add(head) as usize).is_multiple_of(16);
        let d0_nt = nt(d0, s.d0);
        let d1_nt = d1.is_some_and(|d| nt(d, s.d1));
        let mut i = head;
        let (mut la, mut lb, mut lo) = (Line([0; LINE]), Line([0; LINE]), Line([0; LINE]));
        while i + per <= n {
            std::ptr::copy_nonoverlapping(a.add(i).cast::<u8>(), la.0.as_mut_ptr(), LINE);
            std::ptr::copy_nonoverlapping(b.add(i).cast::<u8>(), lb.0.as_mut_ptr(), LINE);
            let (pa, pb, po) = (
                la.0.as_ptr().cast::<T>(),
                lb.0.as_ptr().cast::<T>(),
                lo.0.as_mut_ptr().cast::<T>(),
            );
            for k in 0..per {
                *po.add(k) = f(*pa.add(k), *pb.add(k));
            }
            for (d, nt) in std::iter::once((d0, d0_nt)).chain(d1.map(|d| (d, d1_nt))) {
                let d = d.add(i).cast::<u8>();
                if nt {
                    stream_line(d, lo.0.as_ptr());
                } else {
                    std::ptr::copy_nonoverlapping(lo.0.as_ptr(), d, LINE);
                }
            }
            i += per;
        }
        binary_loop(
            d0.add(i),
            d1.map(|d| d.add(i)),
            a.add(i),
            b.add(i),
            n - i,
            f,
        );
    }
}

/// The element loop. Plans only ever make a destination *equal* to an input (in place) or
/// disjoint from it, so when the pointers are aligned the loop runs over slices whose `&mut`
/// tells the compiler there is no other aliasing, and it vectorises even in place (with raw
/// pointers LLVM's run-time overlap check sends in-place calls to a scalar loop, halving
/// in-place bandwidth). Unaligned buffers take a plain unaligned loop.
///
/// # Safety
/// `a`, `b`, `d0` (and `d1`) valid for `n` elements of `T`; a destination equal to an input or
/// disjoint from it; `d0` and `d1` disjoint.
#[inline(always)]
unsafe fn binary_loop<T: Copy>(
    d0: *mut T,
    d1: Option<*mut T>,
    a: *const T,
    b: *const T,
    n: usize,
    f: impl Fn(T, T) -> T + Copy,
) {
    let aligned = |p: *const T| (p as usize).is_multiple_of(std::mem::align_of::<T>());
    let all_aligned = aligned(d0) && aligned(a) && aligned(b) && d1.is_none_or(|d| aligned(d));
    // SAFETY: for the whole body, the caller guarantees every pointer is valid for n elements, that
    // destinations equal an input or do not overlap it, and that `d1` overlaps nothing; the
    // slices built below therefore never alias a live `&mut` except by the equality handled.
    unsafe {
        if !all_aligned {
            for i in 0..n {
                let v = f(a.add(i).read_unaligned(), b.add(i).read_unaligned());
                d0.add(i).write_unaligned(v);
                if let Some(d1) = d1 {
                    d1.add(i).write_unaligned(v);
                }
            }
            return;
        }
        let d = std::slice::from_raw_parts_mut(d0, n);
        let extra = d1.map(|p| std::slice::from_raw_parts_mut(p, n));
        let (in_a, in_b) = (d0.cast_const() == a, d0.cast_const() == b);
        match (in_a, in_b, extra) {
            (true, true, None) => d.iter_mut().for_each(|x| *x = f(*x, *x)),
            (true, true, Some(e)) => d.iter_mut().zip(e).for_each(|(x, e)| {
                *x = f(*x, *x);
                *e = *x;
            }),
            (true, false, None) => {
                let b = std::slice::from_raw_parts(b, n);
                d.iter_mut().zip(b).for_each(|(x, &y)| *x = f(*x, y));
            }
            (true, false, Some(e)) => {
                let b = std::slice::from_raw_parts(b, n);
                d.iter_mut().zip(b).zip(e).for_each(|((x, &y), e)| {
                    *x = f(*x, y);
                    *e = *x;
                });
            }
            (false, true, None) => {
                let a = std::slice::from_raw_parts(a, n);
                d.iter_mut().zip(a).for_each(|(x, &y)| *x = f(y, *x));
            }
            (false, true, Some(e)) => {
                let a = std::slice::from_raw_parts(a, n);
                d.iter_mut().zip(a).zip(e).for_each(|((x, &y), e)| {
                    *x = f(y, *x);
                    *e = *x;
                });
            }
            (false, false, None) => {
                let (a, b) = (
                    std::slice::from_raw_parts(a, n),
                    std::slice::from_raw_parts(b, n),
                );
                d.iter_mut()
                    .zip(a.iter().zip(b))
                    .for_each(|(x, (&p, &q))| *x = f(p, q));
            }
            (false, false, Some(e)) => {
                let (a, b) = (
                    std::slice::from_raw_parts(a, n),
                    std::slice::from_raw_parts(b, n),
                );
                d.iter_mut()
                    .zip(e)
                    .zip(a.iter().zip(b))
                    .for_each(|((x, e), (&p, &q))| {
                        let v = f(p, q);
                        *x = v;
                        *e = v;
                    });
            }
        }
    }
}

/// Applies `f` element-wise to `src` into `d0` (and `d1`).
///
/// # Safety
/// `src`, `d0` (and `d1`) valid for `n` elements of `T`; a destination equal to `src` or
/// disjoint from it; `d0` and `d1` disjoint.
#[inline(always)]
pub(super) unsafe fn map_unary<T: Copy>(
    d0: *mut u8,
    d1: Option<*mut u8>,
    s: *const u8,
    n: usize,
    f: impl Fn(T) -> T + Copy,
) {
    let (d0, d1, s) = (d0.cast::<T>(), d1.map(|p| p.cast::<T>()), s.cast::<T>());
    // SAFETY: as `map_binary`, with the source passed twice and the second operand ignored.
    unsafe { map_binary(d0, d1, s, s, n, move |x, _| f(x), Streams::default()) }
}
