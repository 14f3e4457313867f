//! The GPU network proxy without a GPU: FIFOs in ordinary host memory, threads playing the
//! kernels with the FIFO protocol of `kernels/program.cuh`, and the TCP transport's ends over
//! the FIFOs' slots between two proxies: over loopback, and between two network namespaces
//! joined by a veth pair (as root; a child process in one namespace is killed mid-transfer to
//! check the other side's report); and RDMA over the in-process fake IB fabric ([`ib`]). The
//! socket protocol itself (frames, goodbyes, broken peers) is tested with the TCP transport
//! (`crate::transport::tcp`); here, what the proxy makes of it.

#[allow(dead_code)]
#[path = "../../../../tests/common/netns.rs"]
mod netns;
#[allow(dead_code)]
#[path = "../../../../tests/common/procs.rs"]
mod procs;

use std::alloc::Layout;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::net::{segment_addrs, segment_bytes};
use super::proxy::{FifoAddrs, Link, NetConn, Proxy, ProxyControl};
use crate::conn::NSLOTS;
use crate::transport::tcp::{Slots, testing};

const SLOTS: u64 = NSLOTS as u64;

/// Zeroed, page-aligned host memory standing in for a pinned segment.
struct HostMem {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: plain memory owned by this value; the tests touch it only as the FIFO protocol
// allows (flags atomically).
unsafe impl Send for HostMem {}
// SAFETY: as above.
unsafe impl Sync for HostMem {}

impl HostMem {
    fn new(bytes: usize) -> HostMem {
        let layout = Layout::from_size_align(bytes.max(64), 4096).unwrap();
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        HostMem { ptr, layout }
    }

    fn addr(&self) -> u64 {
        self.ptr.expose_provenance() as u64
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// The `u64` at `addr`.
///
/// # Safety
/// `addr` is an 8-byte aligned word of a live [`HostMem`].
unsafe fn word<'a>(addr: u64) -> &'a AtomicU64 {
    // SAFETY: the caller's contract.
    unsafe { AtomicU64::from_ptr(std::ptr::with_exposed_provenance_mut(addr as usize)) }
}

/// One rank of a test: its kernels' abort flag and its communicator's.
struct Rank {
    flag: HostMem,
    abort: Arc<AtomicBool>,
}

impl Rank {
    fn new() -> Rank {
        Rank {
            flag: HostMem::new(64),
            abort: Arc::new(AtomicBool::new(false)),
        }
    }

    fn ctl(&self, stall: Duration) -> ProxyControl {
        ProxyControl {
            comm_abort: self.abort.clone(),
            kernel_abort: self.flag.addr(),
            stall_timeout: stall,
            rank: 0,
        }
    }

    fn kernel_aborted(&self) -> bool {
        // SAFETY: the flag's memory lives with `self`; the proxy stores it atomically.
        unsafe { AtomicU32::from_ptr(self.flag.ptr.cast()) }.load(Ordering::Acquire) != 0
    }
}

/// One FIFO segment.
struct End {
    _mem: HostMem,
    fifo: FifoAddrs,
}

impl End {
    fn new(slot_bytes: usize) -> End {
        let mem = HostMem::new(segment_bytes(slot_bytes));
        let fifo = segment_addrs(mem.addr(), slot_bytes);
        End { _mem: mem, fifo }
    }

    /// The FIFO's slots, for a network end to use in place.
    fn slots(&self) -> Slots {
        let at = std::ptr::with_exposed_provenance_mut::<u8>(self.fifo.slots as usize);
        // SAFETY: the segment holds NSLOTS slots at `slots` and outlives the proxy that owns
        // the end (the tests declare every End before its proxy); the kernel threads touch the
        // slots only as the FIFO protocol allows.
        unsafe { Slots::borrowed(at) }
    }

    fn load(&self, addr: u64) -> u64 {
        // SAFETY: `addr` is one of this segment's flags.
        unsafe { word(addr) }.load(Ordering::Acquire)
    }
}

/// The byte at offset `i` of slot `s`.
fn pattern(s: u64, i: usize) -> u8 {
    (s.wrapping_mul(131) as usize + i * 7 + 1) as u8
}

/// Slot `s`'s byte count: from 1 to a whole slot, mostly not a multiple of 16.
fn size_of(s: u64, slot_bytes: usize) -> usize {
    if s % 11 == 5 {
        slot_bytes
    } else {
        1 + (s as usize * 389 + 13) % slot_bytes
    }
}

/// A thread playing one end's kernel (`wait_slot`, `post_send`, `free_recv` of interp.cu).
#[derive(Clone, Copy)]
struct Kernel {
    fifo: FifoAddrs,
    /// The rank's kernel abort flag.
    abort: u64,
    deadline: Instant,
    /// Pause after every slot (a slow kernel).
    pause: Duration,
}

impl Kernel {
    fn new(end: &End, rank: &Rank, limit: Duration) -> Kernel {
        Kernel {
            fifo: end.fifo,
            abort: rank.flag.addr(),
            deadline: Instant::now() + limit,
            pause: Duration::ZERO,
        }
    }

    fn wait(&self, addr: u64, want: u64, what: &str) -> Result<(), String> {
        // SAFETY: FIFO flags and the abort flag live as long as the test's memory.
        let (w, abort) = unsafe {
            (
                word(addr),
                AtomicU32::from_ptr(std::ptr::with_exposed_provenance_mut(self.abort as usize)),
            )
        };
        while w.load(Ordering::Acquire) < want {
            if abort.load(Ordering::Relaxed) != 0 {
                return Err(format!("aborted waiting for {what} {want}"));
            }
            if Instant::now() > self.deadline {
                return Err(format!("timed out waiting for {what} {want}"));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    fn slot(&self, s: u64) -> *mut u8 {
        let at = self.fifo.slots + (s % SLOTS) * self.fifo.slot_bytes as u64;
        std::ptr::with_exposed_provenance_mut(at as usize)
    }

    /// Posts `slots`, each of [`size_of`] bytes of [`pattern`].
    fn send(&self, slots: Range<u64>) -> Result<(), String> {
        for s in slots {
            if s + 1 > SLOTS {
                self.wait(self.fifo.head, s + 1 - SLOTS, "a free slot")?;
            }
            let n = size_of(s, self.fifo.slot_bytes);
            let data: Vec<u8> = (0..n).map(|i| pattern(s, i)).collect();
            // SAFETY: the slot is free (head says so) and holds slot_bytes >= n bytes; the
            // flags are live words.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), self.slot(s), n);
                word(self.fifo.sizes + 8 * (s % SLOTS)).store(n as u64, Ordering::Relaxed);
                word(self.fifo.tail).store(s + 1, Ordering::Release);
            }
            if !self.pause.is_zero() {
                std::thread::sleep(self.pause);
            }
        }
        Ok(())
    }

    /// Consumes `slots`, checking each one's size and bytes.
    fn recv(&self, slots: Range<u64>) -> Result<(), String> {
        for s in slots {
            self.wait(self.fifo.tail, s + 1, "slot")?;
            let n = size_of(s, self.fifo.slot_bytes) as u64;
            // SAFETY: the slot was published (tail > s) and is ours until head passes it.
            unsafe {
                let got = word(self.fifo.sizes + 8 * (s % SLOTS)).load(Ordering::Relaxed);
                if got != n {
                    return Err(format!("slot {s}: {got} bytes where {n} were sent"));
                }
                let data = std::slice::from_raw_parts(self.slot(s), n as usize);
                if let Some(i) = (0..n as usize).find(|&i| data[i] != pattern(s, i)) {
                    return Err(format!("slot {s}: byte {i} is wrong"));
                }
                word(self.fifo.head).store(s + 1, Ordering::Release);
            }
            if !self.pause.is_zero() {
                std::thread::sleep(self.pause);
            }
        }
        Ok(())
    }
}

/// How the tests name rank `peer` in messages.
fn name(peer: usize) -> String {
    format!("rank {peer} (host host{peer}, pid {})", 1000 + peer)
}

/// A TCP connection over `nsocks` sockets from `ea`'s slots (its peer: rank `to`) into `eb`'s
/// (its peer: rank `from`).
fn tcp_links(nsocks: usize, ea: &End, to: usize, eb: &End, from: usize) -> (Link, Link) {
    let slot = ea.fifo.slot_bytes;
    let (s, r) = testing::ends(nsocks, slot, ea.slots(), eb.slots(), &name(to), &name(from));
    (Link::Send(Box::new(s)), Link::Recv(Box::new(r)))
}

fn conn(link: Link, end: &End, peer: usize, channel: u16) -> NetConn {
    NetConn {
        fifo: end.fifo,
        link,
        peer,
        peer_name: name(peer),
        channel,
    }
}

fn start(conns: Vec<NetConn>, rank: &Rank, stall: Duration) -> Proxy {
    // SAFETY: the tests keep every End and Rank alive until the proxy is dropped (they are
    // declared before it).
    unsafe { Proxy::start(conns, rank.ctl(stall)) }.unwrap()
}

/// Waits up to `limit` for `cond`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

const LONG: Duration = Duration::from_secs(20);

/// `count` slots from a sending proxy to a receiving one over `nsocks` sockets.
fn stream(nsocks: usize, slot_bytes: usize, count: u64) {
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot_bytes), End::new(slot_bytes));
    let (la, lb) = tcp_links(nsocks, &ea, 1, &eb, 0);
    let _pa = start(vec![conn(la, &ea, 1, 2)], &ra, LONG);
    let _pb = start(vec![conn(lb, &eb, 0, 2)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..count));
        kb.recv(0..count).unwrap();
        t.join().unwrap().unwrap();
    });
    assert_eq!(ea.load(ea.fifo.head), count, "every slot was handed over");
}

#[test]
fn slots_cross_one_socket_in_order() {
    stream(1, 1000, 300);
}

#[test]
fn slots_cross_several_sockets_in_order() {
    stream(3, 4099, 300);
}

/// With the receiving kernel stopped, the sending proxy still takes every slot its kernel posts
/// as soon as the socket does (none waits for another's transfer), and the receiving proxy
/// fills no more than the receiver's 8 slots.
#[test]
fn slots_stay_in_flight_while_the_receiver_is_busy() {
    let slot = 512;
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let (la, lb) = tcp_links(1, &ea, 1, &eb, 0);
    let _pa = start(vec![conn(la, &ea, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(lb, &eb, 0, 0)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    // Three FIFOs' worth: 8 in the receiver's slots, the rest in the sockets.
    ka.send(0..3 * SLOTS).unwrap();
    assert!(eventually(Duration::from_secs(5), || ea.load(ea.fifo.head)
        == 3 * SLOTS));
    assert!(eventually(Duration::from_secs(5), || eb.load(eb.fifo.tail) == SLOTS));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        eb.load(eb.fifo.tail),
        SLOTS,
        "a slot the kernel had not freed was filled"
    );
    kb.recv(0..3 * SLOTS).unwrap();
}

/// One proxy serves every connection of its rank, sends and receives, round robin.
#[test]
fn one_proxy_serves_many_connections() {
    let slot = 777;
    let (ra, rb) = (Rank::new(), Rank::new());
    let ends: Vec<(End, End)> = (0..6).map(|_| (End::new(slot), End::new(slot))).collect();
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    for (i, (ea, eb)) in ends.iter().enumerate() {
        // Connections 0, 2, 4 go a → b; 1, 3, 5 go b → a.
        let (la, lb) = if i % 2 == 0 {
            tcp_links(1 + i % 2, ea, 1, eb, 0)
        } else {
            let (lb, la) = tcp_links(1 + i % 2, eb, 0, ea, 1);
            (la, lb)
        };
        ca.push(conn(la, ea, 1, i as u16));
        cb.push(conn(lb, eb, 0, i as u16));
    }
    let _pa = start(ca, &ra, LONG);
    let _pb = start(cb, &rb, LONG);
    std::thread::scope(|sc| {
        let mut ts = Vec::new();
        for (i, (ea, eb)) in ends.iter().enumerate() {
            let (ka, kb) = (Kernel::new(ea, &ra, LONG), Kernel::new(eb, &rb, LONG));
            let n = 40 + 17 * i as u64;
            let (tx, rx) = if i % 2 == 0 { (ka, kb) } else { (kb, ka) };
            ts.push(sc.spawn(move || tx.send(0..n)));
            ts.push(sc.spawn(move || rx.recv(0..n)));
        }
        for t in ts {
            t.join().unwrap().unwrap();
        }
    });
}

/// Back-to-back "kernels" continue the persistent counts, as launches on a GPU do.
#[test]
fn counts_continue_across_kernels() {
    let slot = 256;
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let (la, lb) = tcp_links(2, &ea, 1, &eb, 0);
    let _pa = start(vec![conn(la, &ea, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(lb, &eb, 0, 0)], &rb, LONG);
    let mut first = 0;
    for n in [3, 13, 1, 8, 30] {
        let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
        std::thread::scope(|sc| {
            let t = sc.spawn(move || ka.send(first..first + n));
            kb.recv(first..first + n).unwrap();
            t.join().unwrap().unwrap();
        });
        first += n;
        // An idle gap long enough for the proxies to sleep.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Two ranks exchange in lock step, as a two-rank all-reduce's exchange does: each posts one
/// slot to the other, then waits for the other's, slot after slot, both ways at once through
/// one proxy per rank.
#[test]
fn lock_step_exchanges_cross_both_ways() {
    for (nsocks, slot, count) in [(1, 4096, 3000), (2, 4099, 3000)] {
        let (ra, rb) = (Rank::new(), Rank::new());
        let (a_out, b_in, b_out, a_in) = (
            End::new(slot),
            End::new(slot),
            End::new(slot),
            End::new(slot),
        );
        let (la, lb) = tcp_links(nsocks, &a_out, 1, &b_in, 0);
        let (lb2, la2) = tcp_links(nsocks, &b_out, 0, &a_in, 1);
        let _pa = start(
            vec![conn(la, &a_out, 1, 0), conn(la2, &a_in, 1, 0)],
            &ra,
            LONG,
        );
        let _pb = start(
            vec![conn(lb, &b_in, 0, 0), conn(lb2, &b_out, 0, 0)],
            &rb,
            LONG,
        );
        let ka = (
            Kernel::new(&a_out, &ra, LONG),
            Kernel::new(&a_in, &ra, LONG),
        );
        let kb = (
            Kernel::new(&b_out, &rb, LONG),
            Kernel::new(&b_in, &rb, LONG),
        );
        let exchange = |(tx, rx): (Kernel, Kernel)| -> Result<(), String> {
            for s in 0..count {
                tx.send(s..s + 1)?;
                rx.recv(s..s + 1)?;
            }
            Ok(())
        };
        std::thread::scope(|sc| {
            let t = sc.spawn(move || exchange(ka));
            exchange(kb).unwrap();
            t.join().unwrap().unwrap();
        });
    }
}

mod failures;
mod ib;
mod namespaces;
