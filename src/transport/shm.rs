//! FIFOs between processes of one host in POSIX shared-memory segments (NCCL's SHM transport,
//! internals §7.2).
//!
//! The receiving end creates the segment ([`ShmSegment::create`]) and maps it; the sending end
//! opens and maps it by name and says so over the bootstrap; the creator then unlinks the name.
//! Once both ends are mapped nothing is left in `/dev/shm`, even if a process is killed later; a
//! creator dropped before the handshake finishes unlinks on drop.

use super::fifo::{CONTROL_BYTES, FifoMemory};
use crate::os::shm::{Mapping, ShmSegment};

/// A shared-memory segment holding a FIFO: its first [`CONTROL_BYTES`] are the control block,
/// the rest the slots.
pub(crate) struct ShmFifo(ShmSegment);

impl ShmFifo {
    /// Wraps `seg`.
    ///
    /// Errors: a message when the segment is too short to hold a control block.
    pub(crate) fn new(seg: ShmSegment) -> std::result::Result<ShmFifo, String> {
        if seg.len() < CONTROL_BYTES {
            return Err(format!(
                "shared-memory segment {} holds {} bytes, less than a FIFO's control block",
                seg.name(),
                seg.len()
            ));
        }
        Ok(ShmFifo(seg))
    }

    /// The segment's name.
    pub(crate) fn name(&self) -> &str {
        self.0.name()
    }

    /// The segment.
    pub(crate) fn segment(&mut self) -> &mut ShmSegment {
        &mut self.0
    }
}

// SAFETY: the mapping is page aligned, at least CONTROL_BYTES long (checked in `new`) and lives
// as long as the value; the control block is its first CONTROL_BYTES and the slots the rest,
// which do not overlap.
unsafe impl FifoMemory for ShmFifo {
    fn control(&self) -> *mut u8 {
        self.0.base()
    }
    fn slots(&self) -> *mut u8 {
        // SAFETY: CONTROL_BYTES <= len, so this is in bounds or one past the end.
        unsafe { self.0.base().add(CONTROL_BYTES) }
    }
    fn slots_len(&self) -> usize {
        self.0.len() - CONTROL_BYTES
    }
}
