//! The CPU backend: vectorised reductions and copies on host buffers.

mod elementwise;
mod fp8;
pub(crate) mod reduce;
pub(crate) mod stream;

use super::{Backend, MemKind, ReduceSpec, Streams, Transforms};

/// The CPU backend ([`Backend`] over [`MemKind::Host`]): AVX2 or baseline x86-64 element loops
/// ([`reduce`]), streaming stores for destinations that will not be read soon ([`stream`]),
/// `sfence` as the fence.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuBackend;

impl Backend for CpuBackend {
    fn accepts(&self, kind: MemKind) -> bool {
        matches!(kind, MemKind::Host)
    }

    unsafe fn copy(
        &self,
        spec: &ReduceSpec,
        t: Transforms,
        d0: *mut u8,
        d1: Option<*mut u8>,
        src: *const u8,
        n: usize,
        s: Streams,
    ) {
        // SAFETY: the trait's contract is `copy_streaming`'s.
        unsafe { stream::copy_streaming(spec, t, d0, d1, src, n, s) }
    }

    unsafe fn reduce(
        &self,
        spec: &ReduceSpec,
        t: Transforms,
        d0: *mut u8,
        d1: Option<*mut u8>,
        a: *const u8,
        b: *const u8,
        n: usize,
        s: Streams,
    ) {
        // SAFETY: the trait's contract is `reduce_with`'s.
        unsafe { reduce::reduce_with(spec, t, d0, d1, a, b, n, s) }
    }

    fn fence(&self) {
        stream::fence();
    }
}
