//! The slot FIFO that carries one connection's data through memory both ends can address: a
//! heap block for ranks in one process, a POSIX shared-memory segment for processes of one host.
//!
//! Layout (NCCL's Simple protocol, internals §5.3): a header with the sender's `tail` (slots
//! posted) and per-slot byte counts on one cache line, the receiver's `head` (slots consumed) on
//! another, then [`NSLOTS`] data slots of `slot_bytes` each. The sender fills slot `tail % NSLOTS`
//! when `tail - head < NSLOTS`, stores its size, then publishes `tail + 1` with release ordering;
//! the receiver polls `tail` with acquire ordering, reads the slot, then publishes `head + 1`.
//! Either end sets its `gone` flag when it aborts or is dropped mid-stream, so the other end
//! fails fast instead of waiting out its timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Slots per FIFO (`NCCL_STEPS`).
pub const NSLOTS: usize = 8;
const MAGIC: u64 = 0x726e_6363_6c66_6966; // "rncclfif"
/// Bytes reserved for the header before the first slot (keeps slots page aligned).
pub const HEADER_BYTES: usize = 4096;

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

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_BYTES);

/// Memory that holds a FIFO and stays mapped while either end lives.
pub trait FifoMemory: Send + Sync {
    /// Start of the region (page aligned, at least [`region_bytes`] long).
    fn base(&self) -> *mut u8;
}

/// Total bytes a FIFO with `slot_bytes` slots occupies.
pub fn region_bytes(slot_bytes: usize) -> usize {
    HEADER_BYTES + NSLOTS * slot_bytes
}

/// A heap region for a FIFO between ranks of one process.
pub struct HeapMemory {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: the region is plain memory accessed only through the FIFO protocol's atomics.
unsafe impl Send for HeapMemory {}
// SAFETY: as above.
unsafe impl Sync for HeapMemory {}

impl HeapMemory {
    /// Allocates a zeroed region for slots of `slot_bytes`.
    pub fn new(slot_bytes: usize) -> HeapMemory {
        let layout = std::alloc::Layout::from_size_align(region_bytes(slot_bytes), 4096)
            .expect("FIFO layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        HeapMemory { ptr, layout }
    }
}

impl Drop for HeapMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

impl FifoMemory for HeapMemory {
    fn base(&self) -> *mut u8 {
        self.ptr
    }
}

/// Writes a fresh header into zeroed memory (done once, by the end that creates the region).
///
/// # Safety
/// `mem` must hold at least `region_bytes(slot_bytes)` zeroed bytes.
pub unsafe fn init_region(mem: &dyn FifoMemory, slot_bytes: usize) {
    // SAFETY: the region is large enough and zeroed (atomics at zero are valid).
    let h = unsafe { &*(mem.base() as *const Header) };
    h.slot_bytes.store(slot_bytes as u64, Ordering::Relaxed);
    h.magic.store(MAGIC, Ordering::Release);
}

/// Checks a mapped region's header (done by the end that attaches). Returns the slot size.
///
/// # Safety
/// `mem` must hold at least [`HEADER_BYTES`] bytes.
pub unsafe fn check_region(mem: &dyn FifoMemory, len: usize) -> Result<usize, String> {
    // SAFETY: at least the header is mapped.
    let h = unsafe { &*(mem.base() as *const Header) };
    if h.magic.load(Ordering::Acquire) != MAGIC {
        return Err(
            "shared FIFO has a bad magic number (not an rnccl FIFO or a different version)".into(),
        );
    }
    let slot = h.slot_bytes.load(Ordering::Relaxed) as usize;
    if slot == 0 || region_bytes(slot) > len {
        return Err(format!(
            "shared FIFO declares {slot}-byte slots but only {len} bytes are mapped"
        ));
    }
    Ok(slot)
}

fn header(mem: &dyn FifoMemory) -> &Header {
    // SAFETY: every region handed to a FIFO end was initialised or checked first.
    unsafe { &*(mem.base() as *const Header) }
}

/// The state of the far end of a FIFO, as seen by a waiting end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// The far end is attached and has not given up.
    Alive,
    /// The far end aborted or was dropped mid-stream.
    Gone,
    /// The far end's process no longer exists.
    Dead,
}

pub(crate) fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return true;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The sending end of a memory FIFO.
pub struct MemSender {
    mem: Arc<dyn FifoMemory>,
    slot_bytes: usize,
    tail: u64,
    cached_head: u64,
    finished: bool,
}

impl MemSender {
    /// Attaches the sending end to an initialised region.
    pub fn new(mem: Arc<dyn FifoMemory>, slot_bytes: usize) -> MemSender {
        let (tail, head) = {
            let h = header(&*mem);
            h.sender.pid.store(std::process::id(), Ordering::Relaxed);
            (
                h.sender.tail.load(Ordering::Relaxed),
                h.receiver.head.load(Ordering::Acquire),
            )
        };
        MemSender {
            mem,
            slot_bytes,
            tail,
            cached_head: head,
            finished: false,
        }
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The next free slot, or `None` while the FIFO is full.
    pub fn acquire(&mut self) -> Option<*mut u8> {
        if self.tail - self.cached_head >= NSLOTS as u64 {
            self.cached_head = header(&*self.mem).receiver.head.load(Ordering::Acquire);
            if self.tail - self.cached_head >= NSLOTS as u64 {
                return None;
            }
        }
        let idx = (self.tail % NSLOTS as u64) as usize;
        // SAFETY: slot idx lies inside the region.
        Some(unsafe { self.mem.base().add(HEADER_BYTES + idx * self.slot_bytes) })
    }

    /// Publishes the slot returned by the last [`MemSender::acquire`] with `nbytes` of data.
    pub fn post(&mut self, nbytes: usize) {
        debug_assert!(nbytes <= self.slot_bytes);
        let h = header(&*self.mem);
        let idx = (self.tail % NSLOTS as u64) as usize;
        h.sender.sizes[idx].store(nbytes as u64, Ordering::Relaxed);
        self.tail += 1;
        h.sender.tail.store(self.tail, Ordering::Release);
    }

    /// How the receiving end is doing.
    pub fn peer_state(&self) -> PeerState {
        let r = &header(&*self.mem).receiver;
        if r.gone.load(Ordering::Acquire) != 0 {
            PeerState::Gone
        } else if !process_alive(r.pid.load(Ordering::Relaxed)) {
            PeerState::Dead
        } else {
            PeerState::Alive
        }
    }

    /// Marks this end as finished cleanly (no `gone` flag on drop).
    pub fn finish(&mut self) {
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
pub struct MemReceiver {
    mem: Arc<dyn FifoMemory>,
    slot_bytes: usize,
    head: u64,
    cached_tail: u64,
    finished: bool,
}

impl MemReceiver {
    /// Attaches the receiving end to an initialised region.
    pub fn new(mem: Arc<dyn FifoMemory>, slot_bytes: usize) -> MemReceiver {
        let head = {
            let h = header(&*mem);
            h.receiver.pid.store(std::process::id(), Ordering::Relaxed);
            h.receiver.head.load(Ordering::Relaxed)
        };
        MemReceiver {
            mem,
            slot_bytes,
            head,
            cached_tail: head,
            finished: false,
        }
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The oldest filled slot and its byte count, or `None` while the FIFO is empty.
    pub fn peek(&mut self) -> Option<(*const u8, usize)> {
        let h = header(&*self.mem);
        if self.cached_tail == self.head {
            self.cached_tail = h.sender.tail.load(Ordering::Acquire);
            if self.cached_tail == self.head {
                return None;
            }
        }
        let idx = (self.head % NSLOTS as u64) as usize;
        let n = h.sender.sizes[idx].load(Ordering::Relaxed) as usize;
        // SAFETY: slot idx lies inside the region.
        Some((
            unsafe { self.mem.base().add(HEADER_BYTES + idx * self.slot_bytes) },
            n,
        ))
    }

    /// Frees the slot returned by the last [`MemReceiver::peek`].
    pub fn release(&mut self) {
        self.head += 1;
        header(&*self.mem)
            .receiver
            .head
            .store(self.head, Ordering::Release);
    }

    /// How the sending end is doing: `Alive` while a filled slot is still waiting here, even if
    /// the sender has since left (what it posted before leaving is still delivered).
    pub fn peer_state(&self) -> PeerState {
        let s = &header(&*self.mem).sender;
        if s.tail.load(Ordering::Acquire) != self.head {
            PeerState::Alive
        } else if s.gone.load(Ordering::Acquire) != 0 {
            PeerState::Gone
        } else if !process_alive(s.pid.load(Ordering::Relaxed)) {
            PeerState::Dead
        } else {
            PeerState::Alive
        }
    }

    /// Marks this end as finished cleanly (no `gone` flag on drop).
    pub fn finish(&mut self) {
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

    fn pair(slot: usize) -> (MemSender, MemReceiver) {
        let mem: Arc<dyn FifoMemory> = Arc::new(HeapMemory::new(slot));
        unsafe { init_region(&*mem, slot) };
        (
            MemSender::new(mem.clone(), slot),
            MemReceiver::new(mem, slot),
        )
    }

    #[test]
    fn fills_up_then_drains_in_order() {
        let (mut s, mut r) = pair(64);
        for i in 0..NSLOTS {
            let p = s.acquire().expect("free slot");
            unsafe { *p = i as u8 };
            s.post(i + 1);
        }
        assert!(s.acquire().is_none(), "full after NSLOTS posts");
        for i in 0..NSLOTS {
            let (p, n) = r.peek().expect("filled slot");
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
        unsafe { *p = 5 };
        s.post(1);
        drop(s); // aborted: sets `gone`
        assert_eq!(r.peer_state(), PeerState::Alive, "a filled slot waits");
        assert_eq!(r.peek().map(|(p, n)| (unsafe { *p }, n)), Some((5, 1)));
        r.release();
        assert_eq!(r.peer_state(), PeerState::Gone);
    }
}
