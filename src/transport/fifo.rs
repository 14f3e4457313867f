//! The slot FIFO that carries one connection's data through memory both ends can address: a
//! heap block for ranks in one process, a POSIX shared-memory segment for processes of one host.
//!
//! Protocol (NCCL's Simple protocol, internals §5.3): a control block holds the sender's `tail`
//! (slots posted) and per-slot byte counts on one cache line and the receiver's `head` (slots
//! consumed) on another; the data lives in [`NSLOTS`] slots of `slot_bytes` each, which may be in
//! other memory than the control block ([`FifoMemory`] hands out both separately, so slots can
//! live where the data is — device memory for a GPU backend — while the control words stay where
//! both ends can poll them). The sender fills slot `tail % NSLOTS` when `tail - head < NSLOTS`,
//! stores its size, then publishes `tail + 1` with release ordering; the receiver polls `tail`
//! with acquire ordering, reads the slot, then publishes `head + 1`. Either end sets its `gone`
//! flag when it aborts or is dropped mid-stream, so the other end fails fast instead of waiting
//! out its timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::{PeerState, PollInterest, RecvEnd, SendEnd, TransportError};
use crate::conn::NSLOTS;
use crate::device::MemKind;

const MAGIC: u64 = 0x726e_6363_6c66_6966; // "rncclfif"
/// Bytes of a FIFO's control block. In a single mapping (shared memory), the slots start this
/// far in, which keeps them page aligned.
pub(crate) const CONTROL_BYTES: usize = 4096;

#[repr(C, align(128))]
struct SenderLine {
    tail: AtomicU64,
    sizes: [AtomicU64; NSLOTS],
    gone: AtomicU32,
    pid: AtomicU32,
}

#[repr(C, align(128))]
struct ReceiverLine {
    head: AtomicU64,
    gone: AtomicU32,
    pid: AtomicU32,
}

#[repr(C)]
struct Header {
    magic: AtomicU64,
    slot_bytes: AtomicU64,
    sender: SenderLine,
    receiver: ReceiverLine,
}

const _: () = assert!(std::mem::size_of::<Header>() <= CONTROL_BYTES);

/// Memory that holds a FIFO: a control block and the data slots, possibly in different places.
///
/// # Safety
/// Implementors guarantee, for as long as the value lives: [`control`](FifoMemory::control)
/// points to [`CONTROL_BYTES`] bytes aligned to 128 that are accessed only through this module's
/// atomics (every bit pattern is a valid header, so fresh or foreign memory is fine);
/// [`slots`](FifoMemory::slots) points to [`slots_len`](FifoMemory::slots_len) bytes of host
/// memory the FIFO's two ends may read and write; the two ranges do not overlap.
pub(crate) unsafe trait FifoMemory: Send + Sync {
    /// The control block.
    fn control(&self) -> *mut u8;
    /// The first data slot.
    fn slots(&self) -> *mut u8;
    /// Bytes available for data slots.
    fn slots_len(&self) -> usize;
}

/// Bytes of one shared mapping holding a FIFO with `slot_bytes` slots: the control block, then
/// the slots. `None` when the size overflows.
pub(crate) fn region_bytes(slot_bytes: usize) -> Option<usize> {
    NSLOTS.checked_mul(slot_bytes)?.checked_add(CONTROL_BYTES)
}

/// A FIFO in this process's heap, for ranks that are threads of one process: the control block
/// and the slots are separate allocations.
pub(crate) struct HeapMemory {
    control: *mut u8,
    slots: *mut u8,
    control_layout: std::alloc::Layout,
    slots_layout: std::alloc::Layout,
}

// SAFETY: the memory is plain heap accessed only through the FIFO protocol's atomics and slot
// hand-over.
unsafe impl Send for HeapMemory {}
// SAFETY: as above.
unsafe impl Sync for HeapMemory {}

impl HeapMemory {
    /// Allocates a zeroed control block and [`NSLOTS`] slots of `slot_bytes`.
    ///
    /// Errors: a message when `slot_bytes` is zero, the size overflows, or the allocator
    /// refuses it.
    pub(crate) fn new(slot_bytes: usize) -> Result<HeapMemory, String> {
        let len = NSLOTS
            .checked_mul(slot_bytes)
            .filter(|&l| l > 0)
            .ok_or_else(|| format!("a FIFO of {NSLOTS} slots of {slot_bytes} bytes"))?;
        let control_layout =
            std::alloc::Layout::from_size_align(CONTROL_BYTES, 4096).map_err(|e| e.to_string())?;
        let slots_layout = std::alloc::Layout::from_size_align(len, 4096)
            .map_err(|e| format!("{len} bytes: {e}"))?;
        // SAFETY: both layouts have non-zero size.
        let control = unsafe { std::alloc::alloc_zeroed(control_layout) };
        // SAFETY: as above.
        let slots = unsafe { std::alloc::alloc_zeroed(slots_layout) };
        let mem = HeapMemory {
            control,
            slots,
            control_layout,
            slots_layout,
        };
        if control.is_null() || slots.is_null() {
            return Err(format!("allocating a {len}-byte FIFO: out of memory"));
        }
        Ok(mem)
    }
}

impl Drop for HeapMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts (null when that allocation failed).
        unsafe {
            if !self.control.is_null() {
                std::alloc::dealloc(self.control, self.control_layout);
            }
            if !self.slots.is_null() {
                std::alloc::dealloc(self.slots, self.slots_layout);
            }
        }
    }
}

// SAFETY: a 4096-aligned, CONTROL_BYTES-long control block and a separate slots allocation of
// `slots_layout.size()` bytes, both owned until drop.
unsafe impl FifoMemory for HeapMemory {
    fn control(&self) -> *mut u8 {
        self.control
    }
    fn slots(&self) -> *mut u8 {
        self.slots
    }
    fn slots_len(&self) -> usize {
        self.slots_layout.size()
    }
}

/// Writes a fresh header for slots of `slot_bytes` (done once, by the end that creates the
/// FIFO).
///
/// Errors: a message when the memory's slots cannot hold [`NSLOTS`] slots of `slot_bytes`.
pub(crate) fn init_fifo(mem: &dyn FifoMemory, slot_bytes: usize) -> Result<(), String> {
    if slot_bytes == 0 || NSLOTS.saturating_mul(slot_bytes) > mem.slots_len() {
        return Err(format!(
            "a FIFO of {NSLOTS} slots of {slot_bytes} bytes does not fit in {} bytes",
            mem.slots_len()
        ));
    }
    let h = header(mem);
    h.slot_bytes.store(slot_bytes as u64, Ordering::Relaxed);
    h.magic.store(MAGIC, Ordering::Release);
    Ok(())
}

/// Checks the header of a FIFO another end created and returns its slot size.
///
/// Errors: a message when the header is not an rnccl FIFO's or declares slots that do not fit
/// in the memory.
pub(crate) fn check_fifo(mem: &dyn FifoMemory) -> Result<usize, String> {
    let h = header(mem);
    if h.magic.load(Ordering::Acquire) != MAGIC {
        return Err(
            "shared FIFO has a bad magic number (not an rnccl FIFO or a different version)".into(),
        );
    }
    let slot = usize::try_from(h.slot_bytes.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
    if slot == 0 || NSLOTS.saturating_mul(slot) > mem.slots_len() {
        return Err(format!(
            "shared FIFO declares {slot}-byte slots but only {} bytes of slots are mapped",
            mem.slots_len()
        ));
    }
    Ok(slot)
}

fn header(mem: &dyn FifoMemory) -> &Header {
    // SAFETY: the trait guarantees CONTROL_BYTES of 128-aligned memory that only this module's
    // atomics touch; every bit pattern is a valid Header (atomics of plain integers).
    unsafe { &*(mem.control() as *const Header) }
}

/// The sending end of a memory FIFO.
pub(crate) struct MemSender {
    mem: Arc<dyn FifoMemory>,
    slot_bytes: usize,
    tail: u64,
    cached_head: u64,
    finished: bool,
}

impl MemSender {
    /// Attaches the sending end to a FIFO whose header was written ([`init_fifo`]).
    ///
    /// Errors: as [`check_fifo`].
    pub(crate) fn new(mem: Arc<dyn FifoMemory>) -> Result<MemSender, String> {
        let slot_bytes = check_fifo(&*mem)?;
        let (tail, head) = {
            let h = header(&*mem);
            h.sender.pid.store(std::process::id(), Ordering::Relaxed);
            (
                h.sender.tail.load(Ordering::Relaxed),
                h.receiver.head.load(Ordering::Acquire),
            )
        };
        Ok(MemSender {
            mem,
            slot_bytes,
            tail,
            cached_head: head,
            finished: false,
        })
    }
}

impl SendEnd for MemSender {
    fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    fn slot_kind(&self) -> MemKind {
        MemKind::Host
    }

    fn in_memory(&self) -> bool {
        true
    }

    fn progress(&mut self) -> Result<bool, TransportError> {
        Ok(false)
    }

    fn poll_interest(&self) -> Vec<PollInterest> {
        Vec::new()
    }

    fn pending(&self) -> bool {
        false
    }

    fn acquire(&mut self) -> Option<*mut u8> {
        if self.tail - self.cached_head >= NSLOTS as u64 {
            self.cached_head = header(&*self.mem).receiver.head.load(Ordering::Acquire);
            if self.tail - self.cached_head >= NSLOTS as u64 {
                return None;
            }
        }
        let idx = (self.tail % NSLOTS as u64) as usize;
        // SAFETY: NSLOTS slots of slot_bytes fit in the slots (checked in `new`).
        Some(unsafe { self.mem.slots().add(idx * self.slot_bytes) })
    }

    fn post(&mut self, nbytes: usize) {
        debug_assert!(nbytes <= self.slot_bytes);
        let h = header(&*self.mem);
        let idx = (self.tail % NSLOTS as u64) as usize;
        h.sender.sizes[idx].store(nbytes as u64, Ordering::Relaxed);
        self.tail += 1;
        h.sender.tail.store(self.tail, Ordering::Release);
    }

    /// How the receiving end is doing.
    fn peer_state(&self) -> PeerState {
        let r = &header(&*self.mem).receiver;
        if r.gone.load(Ordering::Acquire) != 0 {
            PeerState::Gone
        } else if !crate::os::host::process_alive(r.pid.load(Ordering::Relaxed)) {
            PeerState::Dead
        } else {
            PeerState::Alive
        }
    }

    /// Marks this end as finished cleanly (no `gone` flag on drop).
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for MemSender {
    fn drop(&mut self) {
        if !self.finished {
            header(&*self.mem).sender.gone.store(1, Ordering::Release);
        }
    }
}

/// The receiving end of a memory FIFO.
pub(crate) struct MemReceiver {
    mem: Arc<dyn FifoMemory>,
    slot_bytes: usize,
    head: u64,
    cached_tail: u64,
    finished: bool,
}

impl MemReceiver {
    /// Attaches the receiving end to a FIFO whose header was written ([`init_fifo`]).
    ///
    /// Errors: as [`check_fifo`].
    pub(crate) fn new(mem: Arc<dyn FifoMemory>) -> Result<MemReceiver, String> {
        let slot_bytes = check_fifo(&*mem)?;
        let head = {
            let h = header(&*mem);
            h.receiver.pid.store(std::process::id(), Ordering::Relaxed);
            h.receiver.head.load(Ordering::Relaxed)
        };
        Ok(MemReceiver {
            mem,
            slot_bytes,
            head,
            cached_tail: head,
            finished: false,
        })
    }
}

impl RecvEnd for MemReceiver {
    fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    fn slot_kind(&self) -> MemKind {
        MemKind::Host
    }

    fn in_memory(&self) -> bool {
        true
    }

    fn progress(&mut self) -> Result<bool, TransportError> {
        Ok(false)
    }

    fn poll_interest(&self) -> Vec<PollInterest> {
        Vec::new()
    }

    fn peek(&mut self) -> Option<(*const u8, usize)> {
        let h = header(&*self.mem);
        if self.cached_tail == self.head {
            self.cached_tail = h.sender.tail.load(Ordering::Acquire);
            if self.cached_tail == self.head {
                return None;
            }
        }
        let idx = (self.head % NSLOTS as u64) as usize;
        // A size beyond the slot (a corrupted or malicious peer) is clamped: the executor then
        // reports the size mismatch instead of reading past the slot.
        let n = (h.sender.sizes[idx].load(Ordering::Relaxed) as usize).min(self.slot_bytes);
        // SAFETY: NSLOTS slots of slot_bytes fit in the slots (checked in `new`).
        Some((unsafe { self.mem.slots().add(idx * self.slot_bytes) }, n))
    }

    fn release(&mut self) {
        self.head += 1;
        header(&*self.mem)
            .receiver
            .head
            .store(self.head, Ordering::Release);
    }

    /// How the sending end is doing: `Alive` while a filled slot is still waiting here, even if
    /// the sender has since left (what it posted before leaving is still delivered).
    fn peer_state(&self) -> PeerState {
        let s = &header(&*self.mem).sender;
        if s.tail.load(Ordering::Acquire) != self.head {
            PeerState::Alive
        } else if s.gone.load(Ordering::Acquire) != 0 {
            PeerState::Gone
        } else if !crate::os::host::process_alive(s.pid.load(Ordering::Relaxed)) {
            PeerState::Dead
        } else {
            PeerState::Alive
        }
    }

    /// Marks this end as finished cleanly (no `gone` flag on drop).
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for MemReceiver {
    fn drop(&mut self) {
        if !self.finished {
            header(&*self.mem).receiver.gone.store(1, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{RecvEnd, SendEnd};

    fn pair(slot: usize) -> (MemSender, MemReceiver) {
        let mem: Arc<dyn FifoMemory> = Arc::new(HeapMemory::new(slot).unwrap());
        init_fifo(&*mem, slot).unwrap();
        (
            MemSender::new(mem.clone()).unwrap(),
            MemReceiver::new(mem).unwrap(),
        )
    }

    #[test]
    fn ends_refuse_memory_that_is_not_a_fitting_fifo() {
        let mem: Arc<dyn FifoMemory> = Arc::new(HeapMemory::new(64).unwrap());
        let e = MemSender::new(mem.clone()).err().unwrap();
        assert!(e.contains("magic"), "{e}");
        assert!(init_fifo(&*mem, 65).unwrap_err().contains("does not fit"));
        init_fifo(&*mem, 64).unwrap();
        // A header that claims larger slots than the memory holds is refused.
        header(&*mem).slot_bytes.store(1 << 20, Ordering::Relaxed);
        assert!(
            MemReceiver::new(mem)
                .err()
                .unwrap()
                .contains("bytes of slots")
        );
        assert!(HeapMemory::new(0).is_err());
        assert!(HeapMemory::new(usize::MAX / 4).is_err());
    }

    /// A memory FIFO's reader reads the slot in place, so `post_from` copies the caller's bytes
    /// into it (and the caller's memory is free again at once).
    #[test]
    fn post_from_copies_into_the_slot() {
        let (mut s, mut r) = pair(64);
        assert!(!s.sends_from_caller());
        let mut buf = [7u8; 40];
        assert!(s.acquire().is_some());
        // SAFETY: `buf` holds 40 readable bytes.
        unsafe { s.post_from(buf.as_ptr(), 40) };
        buf.fill(0);
        let (p, n) = r.peek().expect("the slot arrived");
        // SAFETY: the slot from peek() holds the bytes it reports until release().
        let got = unsafe { std::slice::from_raw_parts(p, n) };
        assert_eq!(got, &[7u8; 40]);
    }

    #[test]
    fn fills_up_then_drains_in_order() {
        let (mut s, mut r) = pair(64);
        for i in 0..NSLOTS {
            let p = s.acquire().expect("free slot");
            // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
            unsafe { *p = i as u8 };
            s.post(i + 1);
        }
        assert!(s.acquire().is_none(), "full after NSLOTS posts");
        for i in 0..NSLOTS {
            let (p, n) = r.peek().expect("filled slot");
            // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
            assert_eq!((unsafe { *p }, n), (i as u8, i + 1));
            r.release();
        }
        assert!(r.peek().is_none());
        assert!(s.acquire().is_some());
    }

    #[test]
    fn threads_stream_through() {
        let (mut s, mut r) = pair(128);
        let t = std::thread::spawn(move || {
            for i in 0..10_000u32 {
                let p = loop {
                    if let Some(p) = s.acquire() {
                        break p;
                    }
                    std::hint::spin_loop();
                };
                // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
                unsafe { p.cast::<u32>().write_unaligned(i) };
                s.post(4);
            }
            s.finish();
        });
        for i in 0..10_000u32 {
            let (p, n) = loop {
                if let Some(x) = r.peek() {
                    break x;
                }
                std::hint::spin_loop();
            };
            assert_eq!(n, 4);
            // SAFETY: the slot from peek() holds the bytes it reports, and the FIFO keeps it until release().
            assert_eq!(unsafe { p.cast::<u32>().read_unaligned() }, i);
            r.release();
        }
        t.join().unwrap();
        r.finish();
    }

    #[test]
    fn dropped_end_is_seen_as_gone() {
        let (s, r) = pair(64);
        assert_eq!(r.peer_state(), PeerState::Alive);
        drop(s);
        assert_eq!(r.peer_state(), PeerState::Gone);
    }

    #[test]
    fn what_was_posted_before_leaving_is_still_delivered() {
        let (mut s, mut r) = pair(64);
        let p = s.acquire().unwrap();
        // SAFETY: the slot from acquire() is slot_bytes long and ours until post().
        unsafe { *p = 5 };
        s.post(1);
        drop(s); // aborted: sets `gone`
        assert_eq!(r.peer_state(), PeerState::Alive, "a filled slot waits");
        // SAFETY: the slot from peek() holds the bytes it reports, and the FIFO keeps it until release().
        assert_eq!(r.peek().map(|(p, n)| (unsafe { *p }, n)), Some((5, 1)));
        r.release();
        assert_eq!(r.peer_state(), PeerState::Gone);
    }
}
