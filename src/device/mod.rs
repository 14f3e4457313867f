//! Backends: where an operation's data is moved and reduced, chosen by the kind of memory its
//! buffers live in ([`MemKind`]). The CPU backend (`cpu`) is what the host executor calls slot
//! by slot, behind one trait ([`Backend`]). The CUDA backend (`cuda`) is not driven that way:
//! its kernels run whole plans on the caller's stream (see `exec::gpu`), so it provides the
//! driver, memory and compiled kernels instead.

pub(crate) mod cpu;
pub(crate) mod cuda;
mod spec;

pub(crate) use spec::{ReduceSpec, Streams, Transforms};

use crate::error::{Error, Result};

/// Where a buffer lives. Every buffer an operation touches carries its kind from the moment it
/// is queued, so the executor can pick a backend that reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum MemKind {
    /// Host memory the CPU reads and writes directly (heap, `mem_alloc` windows, FIFO slots in
    /// the heap or in shared memory).
    Host,
    /// Memory of CUDA device `ordinal`, reached only by its kernels (the GPU path of
    /// [`crate::comm`]); the CPU backend refuses it.
    Device {
        /// CUDA device ordinal.
        ordinal: u16,
    },
}

/// What the executor asks of a backend: element-wise kernels and a fence, over memory of the
/// kinds it [`accepts`](Backend::accepts).
///
/// Kernels take raw pointers because their operands are the caller's buffers, FIFO slots and
/// peers' mapped windows, none of which Rust borrows can describe at once.
pub(crate) trait Backend: Sync {
    /// Whether the kernels can read and write memory of `kind`.
    fn accepts(&self, kind: MemKind) -> bool;

    /// `d0[i] = post(pre(src[i]))` for `n` elements of `spec.dtype` (and the same into `d1`), a
    /// plain move when neither transform applies; destinations equal to `src` are left alone
    /// when nothing changes. `s` names destinations that will not be read back soon.
    ///
    /// # Safety
    /// `src`, `d0` and `d1` must be valid for `n` elements in memory this backend accepts; a
    /// destination is either equal to `src` or does not overlap it; `d0` and `d1` do not overlap.
    /// Pointers need no alignment.
    #[allow(clippy::too_many_arguments)]
    unsafe fn copy(
        &self,
        spec: &ReduceSpec,
        t: Transforms,
        d0: *mut u8,
        d1: Option<*mut u8>,
        src: *const u8,
        n: usize,
        s: Streams,
    );

    /// `d0[i] = post(a[i] ⊕ pre(b[i]))` for `n` elements of `spec.dtype` (and the same into
    /// `d1`). `s` names destinations that will not be read back soon.
    ///
    /// # Safety
    /// `a`, `b`, `d0` and `d1` must be valid for `n` elements in memory this backend accepts; a
    /// destination may equal `a` or `b` (in place) but must not partially overlap either; `d0`
    /// and `d1` do not overlap. Pointers need no alignment.
    #[allow(clippy::too_many_arguments)]
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
    );

    /// Makes every store issued so far visible to other processes before anything that follows
    /// (posting a slot, publishing a progress counter).
    fn fence(&self);
}

/// The backend whose kernels reach memory of `kind`.
///
/// Errors: [`Error::InvalidArgument`] when no backend in this build reaches that memory.
pub(crate) fn backend_for(kind: MemKind) -> Result<&'static dyn Backend> {
    let cpu: &'static dyn Backend = &cpu::CpuBackend;
    if cpu.accepts(kind) {
        return Ok(cpu);
    }
    Err(Error::invalid_arg(format!(
        "no backend of this build can run on {kind:?} memory"
    )))
}

/// A byte range of memory of one kind that an operation reads or writes. Carries no lifetime:
/// whoever builds one guarantees the memory outlives its use (see the `unsafe` constructors
/// of the executor's buffers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    /// Where the memory lives.
    pub kind: MemKind,
    /// First byte.
    pub ptr: *mut u8,
    /// Length in bytes.
    pub len: usize,
}

impl Region {
    /// A region of GPU `ordinal`'s memory at device address `ptr`.
    pub(crate) fn device(ptr: u64, len: usize, ordinal: usize) -> Region {
        Region {
            kind: MemKind::Device {
                ordinal: ordinal as u16,
            },
            ptr: ptr as *mut u8,
            len,
        }
    }

    /// A region of host memory.
    pub(crate) fn host(ptr: *mut u8, len: usize) -> Region {
        Region {
            kind: MemKind::Host,
            ptr,
            len,
        }
    }
}
