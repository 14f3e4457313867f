//! Host memory the HCA reads and writes, registered for as long as it lives: page-aligned
//! memory of its own, or memory its caller owns (a GPU FIFO's pinned slots).

use std::alloc::Layout;
use std::mem::ManuallyDrop;

use crate::ib::verbs::{Mr, Pd, VerbsError};

/// A registered buffer: zeroed and 4096-byte aligned when it owns its memory, else the
/// caller's. The region is deregistered before owned memory is freed.
pub(super) struct RegBuf {
    mr: ManuallyDrop<Box<dyn Mr>>,
    ptr: *mut u8,
    /// The allocation's layout; `None` for the caller's memory.
    layout: Option<Layout>,
}

// SAFETY: the buffer is plain memory; which side touches which bytes when is governed by the
// transport's protocol (a slot belongs to the executor or to the HCA, never both).
unsafe impl Send for RegBuf {}

impl RegBuf {
    /// `len` bytes registered with `pd`.
    ///
    /// Errors: [`VerbsError::Call`] from registration (`ENOMEM`: the memory lock limit), or
    /// `ENOMEM` when the allocation fails.
    pub(super) fn new(pd: &dyn Pd, len: usize, device: &str) -> Result<RegBuf, VerbsError> {
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|_| {
            VerbsError::call("allocating a registered buffer", device, libc::ENOMEM)
        })?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(VerbsError::call(
                "allocating a registered buffer",
                device,
                libc::ENOMEM,
            ));
        }
        // SAFETY: ptr is a fresh allocation of `layout` (at least len.max(1) bytes) that the
        // RegBuf returned owns; its Drop drops the region before it frees the memory.
        match unsafe { pd.reg_mr(ptr, len.max(1)) } {
            Ok(mr) => Ok(RegBuf {
                mr: ManuallyDrop::new(mr),
                ptr,
                layout: Some(layout),
            }),
            Err(e) => {
                // SAFETY: ptr came from alloc_zeroed with this layout and was never shared.
                unsafe { std::alloc::dealloc(ptr, layout) };
                Err(e)
            }
        }
    }

    /// Registers `len` bytes of the caller's memory at `ptr` with `pd`.
    ///
    /// # Safety
    /// `ptr..ptr + len` is host memory that stays allocated until this value is dropped; who
    /// touches which bytes when is the transport's protocol.
    ///
    /// Errors: [`VerbsError::Call`] from registration (`ENOMEM`: the memory lock limit).
    pub(super) unsafe fn external(
        pd: &dyn Pd,
        ptr: *mut u8,
        len: usize,
    ) -> Result<RegBuf, VerbsError> {
        // SAFETY: the caller keeps ptr..ptr + len allocated until the RegBuf returned is
        // dropped, and its Drop drops the region first.
        let mr = unsafe { pd.reg_mr(ptr, len.max(1)) }?;
        Ok(RegBuf {
            mr: ManuallyDrop::new(mr),
            ptr,
            layout: None,
        })
    }

    /// An end's slots: the caller's `len` bytes at `slots` when given, else a buffer of its
    /// own.
    ///
    /// # Safety
    /// As [`RegBuf::external`] when `slots` is given.
    ///
    /// Errors: as [`RegBuf::new`] and [`RegBuf::external`].
    pub(super) unsafe fn slots(
        pd: &dyn Pd,
        slots: Option<*mut u8>,
        len: usize,
        device: &str,
    ) -> Result<RegBuf, VerbsError> {
        match slots {
            // SAFETY: the caller's contract.
            Some(p) => unsafe { RegBuf::external(pd, p, len) },
            None => RegBuf::new(pd, len, device),
        }
    }

    /// Start of the buffer.
    pub(super) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its registration.
    pub(super) fn mr(&self) -> &dyn Mr {
        &**self.mr
    }
}

impl Drop for RegBuf {
    fn drop(&mut self) {
        // SAFETY: the region is dropped once, here, before the memory it covers is freed.
        unsafe { ManuallyDrop::drop(&mut self.mr) };
        if let Some(layout) = self.layout {
            // SAFETY: ptr came from alloc_zeroed with this layout, and its registration is
            // gone.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}
