//! The control blocks of direct operations: one page per rank in memory every rank maps, with
//! the words ranks post and poll, and where each rank's buffers lie in its windows.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::os::shm::Mapping;

/// Bytes of one rank's control block (one page, so each rank maps whole pages).
pub(crate) const CONTROL_BYTES: usize = 4096;

/// One cache line of atomics.
#[repr(C, align(64))]
struct Line<const N: usize>([AtomicU64; N]);

/// One rank's control block, at the start of a [`CONTROL_BYTES`] shared mapping.
///
/// - `enter` = `seq << 1 | direct`: posted when a rank starts collective `seq` of a
///   communicator with windows, with the operation's arguments beside it.
/// - `progress` = `seq << 32 | chunks reduced`.
/// - `leave` = `seq`, posted when a rank has finished reading its peers.
#[repr(C)]
pub(super) struct Control {
    /// `[enter, signature, count, send window, send offset, send bytes, recv window, recv
    /// offset]`.
    post: Line<8>,
    /// Receive bytes.
    post2: Line<1>,
    progress: Line<1>,
    leave: Line<1>,
}

const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_BYTES);

/// Where one buffer of a rank lies: window id (0: none, for an empty buffer), byte offset into
/// the window, and length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Place {
    /// Window id, 1-based; 0 for an empty buffer.
    pub win: u64,
    /// Byte offset of the buffer in the window.
    pub off: u64,
    /// Length in bytes.
    pub len: u64,
}

/// What a rank posts when it enters a direct operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Posted {
    /// Operation signature (function, type, operation, root).
    pub signature: u64,
    /// NCCL count.
    pub count: u64,
    /// The input.
    pub send: Place,
    /// The output.
    pub recv: Place,
}

impl Control {
    /// Posts that this rank runs collective `seq` directly, with its arguments.
    pub(super) fn enter_direct(&self, seq: u64, p: &Posted) {
        let w = &self.post.0;
        let (s, r) = (p.send, p.recv);
        for (i, v) in [p.signature, p.count, s.win, s.off, s.len, r.win, r.off]
            .into_iter()
            .enumerate()
        {
            w[i + 1].store(v, Ordering::Relaxed);
        }
        self.post2.0[0].store(r.len, Ordering::Relaxed);
        w[0].store(seq << 1 | 1, Ordering::Release);
    }

    /// Posts that this rank runs collective `seq` through its FIFO plan (its buffers are not
    /// all in windows, or the collective has no direct form).
    pub(super) fn enter_fifo(&self, seq: u64) {
        self.post.0[0].store(seq << 1, Ordering::Release);
    }

    /// The last `enter` word (`seq << 1 | direct`).
    pub(super) fn entered(&self) -> u64 {
        self.post.0[0].load(Ordering::Acquire)
    }

    /// What the rank posted with its last `enter` (read after [`Control::entered`] showed it).
    pub(super) fn posted(&self) -> Posted {
        let w = &self.post.0;
        let r = |i: usize| w[i].load(Ordering::Relaxed);
        Posted {
            signature: r(1),
            count: r(2),
            send: Place {
                win: r(3),
                off: r(4),
                len: r(5),
            },
            recv: Place {
                win: r(6),
                off: r(7),
                len: self.post2.0[0].load(Ordering::Relaxed),
            },
        }
    }

    /// Publishes that `chunks` chunks of collective `seq` are reduced.
    pub(super) fn set_progress(&self, seq: u64, chunks: u64) {
        self.progress.0[0].store((seq << 32) | chunks, Ordering::Release);
    }

    /// Whether at least `chunks` chunks of collective `seq` are reduced.
    pub(super) fn reduced(&self, seq: u64, chunks: u64) -> bool {
        self.progress.0[0].load(Ordering::Acquire) >= (seq << 32) | chunks
    }

    /// Publishes that this rank has finished reading its peers for collective `seq`.
    pub(super) fn set_left(&self, seq: u64) {
        self.leave.0[0].store(seq, Ordering::Release);
    }

    /// Whether the rank has left collective `seq`.
    pub(super) fn left(&self, seq: u64) -> bool {
        self.leave.0[0].load(Ordering::Acquire) >= seq
    }
}

/// Every rank's control block, mapped in this process (index: rank).
pub(crate) struct ControlBlocks {
    pages: Vec<Arc<dyn Mapping>>,
}

impl ControlBlocks {
    /// The blocks in `pages`, one per rank.
    ///
    /// Errors: [`Error::Remote`] when a page is shorter than [`CONTROL_BYTES`].
    pub(crate) fn new(pages: Vec<Arc<dyn Mapping>>) -> Result<ControlBlocks> {
        if let Some((r, p)) = pages
            .iter()
            .enumerate()
            .find(|(_, p)| p.len() < CONTROL_BYTES)
        {
            return Err(Error::Remote(format!(
                "rank {r}'s control block maps {} bytes, less than the {CONTROL_BYTES} a \
                 direct collective needs",
                p.len()
            )));
        }
        Ok(ControlBlocks { pages })
    }

    /// Number of ranks.
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// Rank `rank`'s block.
    pub(super) fn get(&self, rank: usize) -> &Control {
        // SAFETY: the page is at least CONTROL_BYTES long (checked in `new`), page aligned, and
        // mapped while `self` lives; every bit pattern is a valid Control (atomics only).
        unsafe { &*self.pages[rank].base().cast_const().cast::<Control>() }
    }

    /// Posts that `rank` runs collective `seq` through its FIFO plan.
    pub(crate) fn announce_fifo(&self, rank: usize, seq: u64) {
        self.get(rank).enter_fifo(seq);
    }
}
