//! A host engine's registered windows (`ncclCommWindowRegister` on host memory from
//! [`crate::mem::mem_alloc`]): every rank's memory of each window as mapped in this process,
//! and every rank's control block once one window has direct access; direct operations
//! ([`super::direct`]) read them. `crate::comm` registers and deregisters them.

use std::sync::Arc;

use super::direct::{ControlBlocks, Place, WindowView};
use crate::mem::MemFile;
use crate::os::shm::Mapping;

/// One registered window on one rank.
pub(crate) struct Entry {
    pub id: u64,
    /// This rank's memory (kept mapped while registered).
    pub file: Arc<MemFile>,
    /// Every rank's memory as mapped in this process (this rank's own file included); empty
    /// when the window has no direct access.
    pub ranks: Vec<Arc<dyn Mapping>>,
}

/// A communicator's windows and, once the first is registered with direct access, every
/// rank's control block.
#[derive(Default)]
pub(crate) struct Windows {
    pub entries: Vec<Entry>,
    /// Registrations so far (ids are 1-based and never reused).
    pub registered: u64,
    /// Every rank's control block, mapped here.
    pub controls: Option<Arc<ControlBlocks>>,
}

impl Windows {
    /// Every rank's control block, once a window was registered with direct access: from then
    /// on every collective announces which way it runs (even after deregistration, so ranks
    /// never disagree on it).
    pub(crate) fn controls(&self) -> Option<&Arc<ControlBlocks>> {
        self.controls.as_ref()
    }

    /// Where `len` bytes at `ptr` lie: a window and offset, an empty place for `len == 0`, or
    /// `None` when not inside one window.
    pub(crate) fn place(&self, ptr: *const u8, len: usize) -> Option<Place> {
        if len == 0 {
            return Some(Place::default());
        }
        let a = ptr as usize;
        self.entries.iter().find_map(|e| {
            let base = e.file.base() as usize;
            (a >= base && a + len <= base + e.file.len()).then(|| Place {
                win: e.id,
                off: (a - base) as u64,
                len: len as u64,
            })
        })
    }

    /// Every window with direct access, as all ranks' mappings in this process.
    pub(crate) fn views(&self) -> Vec<WindowView> {
        self.entries
            .iter()
            .filter(|e| !e.ranks.is_empty())
            .map(|e| WindowView {
                id: e.id,
                ranks: e.ranks.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_inside_windows_only() {
        let mem = crate::mem::mem_alloc::<u32>(1024).unwrap();
        let mut w = Windows::default();
        w.entries.push(Entry {
            id: 3,
            file: mem.file().clone(),
            ranks: Vec::new(),
        });
        let base = mem.as_ptr().cast::<u8>();
        // SAFETY: the allocation holds 1024 u32 (4096 bytes), so 16 bytes in is inside it.
        let p = w.place(unsafe { base.add(16) }, 64).unwrap();
        assert_eq!((p.win, p.off, p.len), (3, 16, 64));
        assert!(w.place(base, 4097).is_none(), "runs past the window");
        let heap = [0u8; 64];
        assert!(w.place(heap.as_ptr(), 64).is_none());
        assert_eq!(w.place(heap.as_ptr(), 0), Some(Place::default()));
        assert!(
            w.controls().is_none(),
            "no control blocks: nothing to announce"
        );
        assert!(w.views().is_empty(), "no direct access");
    }
}
