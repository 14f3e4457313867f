//! Page-aligned host memory the HCA reads and writes, registered for as long as it lives.

use std::alloc::Layout;
use std::mem::ManuallyDrop;

use crate::ib::verbs::{Mr, Pd, VerbsError};

/// A zeroed, 4096-byte-aligned buffer registered with a protection domain. The region is
/// deregistered before the memory is freed.
pub(super) struct RegBuf {
    mr: ManuallyDrop<Box<dyn Mr>>,
    ptr: *mut u8,
    layout: Layout,
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
        match pd.reg_mr(ptr, len.max(1)) {
            Ok(mr) => Ok(RegBuf {
                mr: ManuallyDrop::new(mr),
                ptr,
                layout,
            }),
            Err(e) => {
                // SAFETY: ptr came from alloc_zeroed with this layout and was never shared.
                unsafe { std::alloc::dealloc(ptr, layout) };
                Err(e)
            }
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
        // SAFETY: ptr came from alloc_zeroed with this layout, and its registration is gone.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}
