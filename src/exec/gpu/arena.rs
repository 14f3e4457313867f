//! Space for device programs, allocated in large chunks ahead of use: CUDA serialises streams
//! around every page-locked allocation ("implicit synchronization", CUDA C Programming Guide
//! §3.2.8.5.4), so allocating per launch would make a kernel wait for its peer's kernel — on
//! one GPU, a deadlock until the timeout. Regions are handed out first fit, 256-byte aligned,
//! and returned when their program is dropped.
//!
//! Each chunk is twice there: in pinned host memory, where the host writes a program, and in
//! device memory at the same offsets, where [`Arena::upload`] copies it and kernels read it. A
//! kernel reads its program in dependent rounds (the header with its lane, then connections and
//! steps; kernels/interp.cu `load`), each a PCIe round trip of about a microsecond from host
//! memory, against a few hundred nanoseconds from the GPU's own: on one H200, 8 B sendrecv
//! between two ranks went from 11.1-11.4 µs to 7.0-7.3 when the programs moved (2026-11-29).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys};

use crate::device::cuda::{DeviceAlloc, PinnedHost, check, cuda_error, relaxed_capture};
use crate::error::Result;

/// Bytes of one chunk (more for a larger program): room for thousands of typical programs.
pub(crate) const CHUNK_BYTES: usize = 4 << 20;
/// Alignment of every region.
const ALIGN: usize = 256;

/// A region of the arena: chunk index, offset and length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    chunk: usize,
    off: usize,
    len: usize,
}

/// Free ranges (offset, length) of one chunk, sorted by offset and coalesced.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FreeList(Vec<(usize, usize)>);

impl FreeList {
    fn new(len: usize) -> FreeList {
        FreeList(vec![(0, len)])
    }

    /// The offset of `need` bytes taken first fit.
    fn take(&mut self, need: usize) -> Option<usize> {
        let i = self.0.iter().position(|&(_, l)| l >= need)?;
        let (off, l) = self.0[i];
        if l == need {
            self.0.remove(i);
        } else {
            self.0[i] = (off + need, l - need);
        }
        Some(off)
    }

    /// Returns `len` bytes at `off`, merging them with free neighbours.
    fn give(&mut self, off: usize, len: usize) {
        let f = &mut self.0;
        let at = f.partition_point(|&(o, _)| o < off);
        f.insert(at, (off, len));
        if at + 1 < f.len() && f[at].0 + f[at].1 == f[at + 1].0 {
            f[at].1 += f[at + 1].1;
            f.remove(at + 1);
        }
        if at > 0 && f[at - 1].0 + f[at - 1].1 == f[at].0 {
            f[at - 1].1 += f[at].1;
            f.remove(at);
        }
    }
}

struct Chunk {
    /// Where the host writes programs.
    mem: PinnedHost,
    /// Where kernels read them (same length and offsets).
    dev: DeviceAlloc,
    free: FreeList,
}

/// Chunks (pinned and device) and their free ranges.
pub(crate) struct Arena {
    ctx: Arc<CudaContext>,
    chunks: Vec<Chunk>,
    /// The stream uploads run on: its own, so an upload waits for no kernel of the caller's
    /// streams (a kernel that may itself wait for a peer's next kernel).
    copies: Arc<CudaStream>,
}

impl Arena {
    /// An arena with one chunk and its upload stream, allocated now (before any kernel of the
    /// communicator runs).
    ///
    /// Errors: [`crate::error::Error::Cuda`] when the memory cannot be pinned or allocated on
    /// the device, or the stream cannot be created.
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Arena> {
        let copies = ctx
            .new_stream()
            .map_err(|e| cuda_error(e, format!("creating a stream on GPU {}", ctx.ordinal())))?;
        let mut a = Arena {
            ctx: ctx.clone(),
            chunks: Vec::new(),
            copies,
        };
        a.grow(CHUNK_BYTES)?;
        Ok(a)
    }

    fn grow(&mut self, bytes: usize) -> Result<()> {
        let len = bytes.max(CHUNK_BYTES).next_multiple_of(ALIGN);
        // Pinning may happen while the caller captures its stream into a graph.
        let (mem, dev) = relaxed_capture(|| {
            Ok::<_, crate::error::Error>((
                PinnedHost::zeroed(&self.ctx, len)?,
                DeviceAlloc::zeroed(&self.ctx, len)?,
            ))
        })?;
        self.chunks.push(Chunk {
            mem,
            dev,
            free: FreeList::new(len),
        });
        Ok(())
    }

    /// Copies the first `len` bytes of `r` from host to device memory and waits for the copy,
    /// so any stream's kernel may read them from [`Arena::device`] next.
    ///
    /// Errors: [`crate::error::Error::Cuda`] when the copy fails.
    pub(crate) fn upload(&self, r: Region, len: usize) -> Result<()> {
        let len = len.min(r.len);
        let stream = self.copies.cu_stream();
        let what = || format!("copying a device program to GPU {}", self.ctx.ordinal());
        // A stream of the caller's thread may be capturing; this copy is not part of it.
        relaxed_capture(|| {
            let (src, dst) = (self.ptr(r), self.device(r));
            // SAFETY: both ranges are `len` bytes inside chunk `r.chunk` (the region's), the
            // host side pinned; the copy is waited for before the host range is written again.
            let r = unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, stream) };
            check(r, what)?;
            self.copies.synchronize().map_err(|e| cuda_error(e, what()))
        })
    }

    /// A free region of `len` bytes, if one exists without growing.
    pub(crate) fn take(&mut self, len: usize) -> Option<Region> {
        let need = len.max(1).next_multiple_of(ALIGN);
        self.chunks.iter_mut().enumerate().find_map(|(chunk, c)| {
            c.free.take(need).map(|off| Region {
                chunk,
                off,
                len: need,
            })
        })
    }

    /// A region of `len` bytes, adding a chunk when none is free (rare: a program larger than
    /// the free space, or thousands of programs in flight).
    ///
    /// Errors: [`crate::error::Error::Cuda`] when a new chunk cannot be pinned or allocated on
    /// the device.
    pub(crate) fn take_or_grow(&mut self, len: usize) -> Result<Region> {
        if let Some(r) = self.take(len) {
            return Ok(r);
        }
        self.grow(len)?;
        self.take(len).ok_or_else(|| {
            crate::error::Error::Internal(format!(
                "a fresh arena chunk has no room for {len} bytes"
            ))
        })
    }

    /// Returns `r` to the free ranges.
    pub(crate) fn give(&mut self, r: Region) {
        if let Some(c) = self.chunks.get_mut(r.chunk) {
            c.free.give(r.off, r.len);
        }
    }

    /// The first byte of `r` in host memory, where the host writes a program.
    pub(crate) fn ptr(&self, r: Region) -> *mut u8 {
        self.chunks[r.chunk].mem.ptr().wrapping_add(r.off)
    }

    /// The device address of `r`'s copy in device memory, which kernels read once
    /// [`Arena::upload`]ed.
    pub(crate) fn device(&self, r: Region) -> u64 {
        self.chunks[r.chunk].dev.ptr() + r.off as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_and_exact_fit() {
        let mut f = FreeList::new(1024);
        assert_eq!(f.take(256), Some(0));
        assert_eq!(f.take(512), Some(256));
        assert_eq!(f.take(512), None);
        assert_eq!(f.take(256), Some(768));
        assert_eq!(f, FreeList(vec![]));
    }

    #[test]
    fn returned_ranges_merge_with_both_neighbours() {
        let mut f = FreeList::new(1024);
        let (a, b, c) = (
            f.take(256).unwrap(),
            f.take(256).unwrap(),
            f.take(256).unwrap(),
        );
        f.give(a, 256);
        f.give(c, 256);
        assert_eq!(f, FreeList(vec![(0, 256), (512, 512)]));
        f.give(b, 256);
        assert_eq!(f, FreeList::new(1024));
        assert_eq!(f.take(1024), Some(0));
    }
}
