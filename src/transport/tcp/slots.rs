//! The state one end of a TCP connection shares with whoever drives its sockets (the caller's
//! progress loop or helper threads): the end's [`NSLOTS`] slots — its own memory, or the
//! caller's ([`Slots::borrowed`]: a GPU FIFO's slots in pinned host memory, framed onto the
//! sockets in place) — the per-slot hand-over counters, and what the far end said.

use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};

use crate::conn::NSLOTS;
use crate::transport::TransportError;

/// Where an end's slots live.
#[derive(Debug)]
pub(crate) struct Slots(Option<NonNull<u8>>);

// SAFETY: the address is handed over with the end it is made for (`Slots::borrowed`'s contract
// covers the memory, whichever thread the end runs on).
unsafe impl Send for Slots {}

impl Slots {
    /// Slots the end allocates and owns.
    pub(crate) fn owned() -> Slots {
        Slots(None)
    }

    /// The caller's `NSLOTS × slot_bytes` bytes at `at`: the end frames them onto its sockets
    /// (sending) or reads frames into them (receiving) in place, with no copy.
    ///
    /// # Safety
    /// `at` is valid for reads and writes of `NSLOTS × slot_bytes` bytes (the slot size the end
    /// is made with) for the end's whole life, and whoever else touches them follows the end's
    /// hand-over: a sending end's slot is not rewritten until the end completed it, a receiving
    /// end's slot is not read before it arrived nor rewritten before it is released.
    pub(crate) unsafe fn borrowed(at: *mut u8) -> Slots {
        Slots(NonNull::new(at))
    }
}

/// An end's slot memory, with accesses ordered by the per-slot atomics of [`Shared`].
pub(super) struct SlotMemory {
    base: *mut u8,
    /// Bytes allocated here (0: the caller's slots).
    owned: usize,
    pub(super) slot_bytes: usize,
}

// SAFETY: a slot is written by exactly one side at a time; hand-over goes through the atomics.
unsafe impl Sync for SlotMemory {}
// SAFETY: plain memory (owned, or the caller's under `Slots::borrowed`'s contract).
unsafe impl Send for SlotMemory {}

impl SlotMemory {
    fn new(slot_bytes: usize, slots: Slots) -> SlotMemory {
        match slots.0 {
            Some(at) => SlotMemory {
                base: at.as_ptr(),
                owned: 0,
                slot_bytes,
            },
            None => {
                let len = NSLOTS * slot_bytes;
                let mem = Box::into_raw(vec![0u8; len].into_boxed_slice());
                SlotMemory {
                    base: mem.cast::<u8>(),
                    owned: len,
                    slot_bytes,
                }
            }
        }
    }

    /// The slot that carries sequence number `seq` (`slot_bytes` bytes).
    pub(super) fn slot(&self, seq: u64) -> *mut u8 {
        let idx = (seq % NSLOTS as u64) as usize;
        // SAFETY: idx < NSLOTS, so the offset stays inside the NSLOTS × slot_bytes bytes.
        unsafe { self.base.add(idx * self.slot_bytes) }
    }
}

impl Drop for SlotMemory {
    fn drop(&mut self) {
        if self.owned > 0 {
            let mem = std::ptr::slice_from_raw_parts_mut(self.base, self.owned);
            // SAFETY: allocated in `new` by `Box::into_raw` of a boxed slice of this length,
            // freed once here.
            drop(unsafe { Box::from_raw(mem) });
        }
    }
}

/// What this end was asked to tell its far end before it goes (helper threads send it).
pub(super) const GOODBYE_NONE: u8 = 0;
/// A clean goodbye.
pub(super) const GOODBYE_CLEAN: u8 = 1;
/// A goodbye after an abort.
pub(super) const GOODBYE_ABORTED: u8 = 2;

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
    /// Sender: where a posted slot's bytes are (0: in the slot; else the caller's memory,
    /// [`crate::transport::SendEnd::post_from`]).
    pub(super) sources: [AtomicUsize; NSLOTS],
    /// Receiver: where the consumer asked the frame of the slot at this index to land (0: in
    /// the slot; [`crate::transport::RecvEnd::receive_into`]), and at most how many bytes it
    /// takes there.
    pub(super) dests: [AtomicUsize; NSLOTS],
    pub(super) dest_lens: [AtomicUsize; NSLOTS],
    /// Receiver: where the arrived frame of the slot at this index lies (0: in the slot).
    pub(super) landed: [AtomicUsize; NSLOTS],
    /// First error a stream hit.
    error: Mutex<Option<TransportError>>,
    failed: AtomicBool,
    pub(super) shutdown: AtomicBool,
    /// The goodbye helper threads send as they stop ([`GOODBYE_NONE`] …).
    pub(super) goodbye: AtomicU8,
    /// Receiver: sockets that reached a clean end of stream (a goodbye, or an end of stream
    /// between frames).
    closed_socks: AtomicUsize,
    /// Receiver: per socket, whether it reached a clean end of stream. With several sockets,
    /// one may close while another still carries the last frames: what counts is the socket
    /// that carries the next slot the consumer needs ([`Shared::carrier_ended`]).
    ended: Box<[AtomicBool]>,
    /// Receiver: a socket ended between frames without a goodbye (the peer's process exited or
    /// was killed).
    unannounced: AtomicBool,
}

impl Shared {
    pub(super) fn new(slot_bytes: usize, nsocks: usize, slots: Slots) -> Shared {
        Shared {
            mem: SlotMemory::new(slot_bytes, slots),
            nsocks,
            counter: AtomicU64::new(0),
            state: std::array::from_fn(|_| AtomicU64::new(0)),
            sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            sources: std::array::from_fn(|_| AtomicUsize::new(0)),
            dests: std::array::from_fn(|_| AtomicUsize::new(0)),
            dest_lens: std::array::from_fn(|_| AtomicUsize::new(0)),
            landed: std::array::from_fn(|_| AtomicUsize::new(0)),
            error: Mutex::new(None),
            failed: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            goodbye: AtomicU8::new(GOODBYE_NONE),
            closed_socks: AtomicUsize::new(0),
            ended: (0..nsocks).map(|_| AtomicBool::new(false)).collect(),
            unannounced: AtomicBool::new(false),
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

    /// Receiver: socket `index` reached a clean end of stream after placing every frame it
    /// carried; `announced` when the peer said goodbye on it first.
    pub(super) fn socket_closed(&self, index: usize, announced: bool) {
        if !announced {
            self.unannounced.store(true, Ordering::Release);
        }
        if let Some(e) = self.ended.get(index) {
            e.store(true, Ordering::Release);
        }
        self.closed_socks.fetch_add(1, Ordering::AcqRel);
    }

    /// Receiver: every socket reached a clean end of stream.
    pub(super) fn closed(&self) -> bool {
        self.closed_socks.load(Ordering::Acquire) >= self.nsocks
    }

    /// Receiver: the socket that carries slot `seq` (socket `seq % nsocks`) reached its end, so
    /// if that slot has not arrived it never will. Only the socket of the next slot the
    /// consumer needs is sure to be reading: with more sockets than slots, the others wait for
    /// room and would see their end only then.
    pub(super) fn carrier_ended(&self, seq: u64) -> bool {
        let index = (seq % self.nsocks.max(1) as u64) as usize;
        self.ended
            .get(index)
            .is_some_and(|e| e.load(Ordering::Acquire))
    }

    /// Receiver: a socket ended between frames without a goodbye.
    pub(super) fn unannounced(&self) -> bool {
        self.unannounced.load(Ordering::Acquire)
    }
}
