//! The state one end of a TCP connection shares with whoever drives its sockets (the caller's
//! progress loop or helper threads): the end's [`NSLOTS`] slots in local memory and the
//! per-slot hand-over counters.

use std::cell::UnsafeCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::conn::NSLOTS;
use crate::transport::TransportError;

/// A slot buffer both the executor and socket threads touch, with accesses ordered by the
/// per-slot atomics of [`Shared`].
pub(super) struct SlotMemory {
    bytes: UnsafeCell<Box<[u8]>>,
    pub(super) slot_bytes: usize,
}

// SAFETY: a slot is written by exactly one side at a time; hand-over goes through the atomics.
unsafe impl Sync for SlotMemory {}
// SAFETY: plain memory.
unsafe impl Send for SlotMemory {}

impl SlotMemory {
    fn new(slot_bytes: usize) -> SlotMemory {
        SlotMemory {
            bytes: UnsafeCell::new(vec![0u8; NSLOTS * slot_bytes].into_boxed_slice()),
            slot_bytes,
        }
    }

    /// The slot that carries sequence number `seq` (`slot_bytes` bytes).
    pub(super) fn slot(&self, seq: u64) -> *mut u8 {
        let idx = (seq % NSLOTS as u64) as usize;
        // SAFETY: idx < NSLOTS, so the offset is in bounds.
        unsafe { (*self.bytes.get()).as_mut_ptr().add(idx * self.slot_bytes) }
    }
}

/// State shared between the executor and the socket streams of one connection end.
pub(super) struct Shared {
    pub(super) mem: SlotMemory,
    pub(super) nsocks: usize,
    /// Sender: slots posted. Receiver: slots released (consumed) by the executor.
    pub(super) counter: AtomicU64,
    /// Per slot: byte count + 1 once complete (sender: written to the socket; receiver: filled).
    pub(super) state: [AtomicU64; NSLOTS],
    /// Sender: byte counts of posted slots.
    pub(super) sizes: [AtomicU64; NSLOTS],
    /// First error a stream hit.
    error: Mutex<Option<TransportError>>,
    failed: AtomicBool,
    pub(super) shutdown: AtomicBool,
    /// Receiver: sockets that reached a clean end of stream. The peer is gone only once all
    /// have: with several sockets, one may close while another still carries the last frames.
    closed_socks: AtomicUsize,
}

impl Shared {
    pub(super) fn new(slot_bytes: usize, nsocks: usize) -> Shared {
        Shared {
            mem: SlotMemory::new(slot_bytes),
            nsocks,
            counter: AtomicU64::new(0),
            state: std::array::from_fn(|_| AtomicU64::new(0)),
            sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            error: Mutex::new(None),
            failed: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            closed_socks: AtomicUsize::new(0),
        }
    }

    /// Records the first failure a stream hit.
    pub(super) fn fail(&self, e: TransportError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    /// The failure recorded by a helper thread, if any.
    pub(super) fn take_error(&self) -> Option<TransportError> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Receiver: one more socket reached a clean end of stream.
    pub(super) fn socket_closed(&self) {
        self.closed_socks.fetch_add(1, Ordering::AcqRel);
    }

    /// Receiver: every socket reached a clean end of stream.
    pub(super) fn closed(&self) -> bool {
        self.closed_socks.load(Ordering::Acquire) >= self.nsocks
    }
}
