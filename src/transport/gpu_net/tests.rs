//! The GPU network proxy without a GPU: FIFOs in ordinary host memory, threads playing the
//! kernels with the FIFO protocol of `kernels/program.cuh`, and real TCP between two proxies:
//! over loopback, and between two network namespaces joined by a veth pair (as root; a child
//! process in one namespace is killed mid-transfer to check the other side's report).

#[allow(dead_code)]
#[path = "../../../tests/common/netns.rs"]
mod netns;
#[allow(dead_code)]
#[path = "../../../tests/common/procs.rs"]
mod procs;

use std::alloc::Layout;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::proxy::{FifoAddrs, NetConn, Proxy, ProxyControl, Side};
use super::{segment_addrs, segment_bytes};
use crate::conn::NSLOTS;
use crate::transport::tcp::prepare_socket;

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

/// `n` connected, prepared socket pairs over loopback: (connecting side, accepting side).
fn socket_pairs(n: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        prepare_socket(&c).unwrap();
        prepare_socket(&s).unwrap();
        a.push(c);
        b.push(s);
    }
    (a, b)
}

fn conn(side: Side, end: &End, socks: Vec<TcpStream>, peer: usize, channel: u16) -> NetConn {
    NetConn {
        side,
        fifo: end.fifo,
        socks,
        peer,
        peer_name: format!("rank {peer} (host host{peer}, pid {})", 1000 + peer),
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
    let (sa, sb) = socket_pairs(nsocks);
    let _pa = start(vec![conn(Side::Send, &ea, sa, 1, 2)], &ra, LONG);
    let _pb = start(vec![conn(Side::Recv, &eb, sb, 0, 2)], &rb, LONG);
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
    let (sa, sb) = socket_pairs(1);
    let _pa = start(vec![conn(Side::Send, &ea, sa, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(Side::Recv, &eb, sb, 0, 0)], &rb, LONG);
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
        let (sa, sb) = socket_pairs(1 + i % 2);
        // Connections 0, 2, 4 go a → b; 1, 3, 5 go b → a.
        let (side_a, side_b) = if i % 2 == 0 {
            (Side::Send, Side::Recv)
        } else {
            (Side::Recv, Side::Send)
        };
        ca.push(conn(side_a, ea, sa, 1, i as u16));
        cb.push(conn(side_b, eb, sb, 0, i as u16));
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
    let (sa, sb) = socket_pairs(2);
    let _pa = start(vec![conn(Side::Send, &ea, sa, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(Side::Recv, &eb, sb, 0, 0)], &rb, LONG);
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

/// A peer whose socket ends in the middle of a slot: the receiving side reports it, naming the
/// peer, its host and the channel, and stops its kernel.
#[test]
fn a_peer_closing_mid_slot_is_an_error_naming_it() {
    let slot = 1000;
    let rb = Rank::new();
    let eb = End::new(slot);
    let (mut sa, sb) = socket_pairs(1);
    let pb = start(vec![conn(Side::Recv, &eb, sb, 3, 5)], &rb, LONG);
    let kb = Kernel::new(&eb, &rb, LONG);
    let mut raw = sa.remove(0);
    raw.set_nonblocking(false).unwrap();
    let mut frame = Vec::new();
    frame.extend_from_slice(&500u32.to_le_bytes());
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.extend_from_slice(&[7u8; 100]);
    raw.write_all(&frame).unwrap();
    let t0 = Instant::now();
    drop(raw);
    let err = kb.recv(0..1).unwrap_err();
    assert!(err.contains("aborted"), "{err}");
    let e = pb
        .failure()
        .expect("the proxy reports the peer")
        .to_string();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    for want in [
        "rank 3",
        "host host3",
        "pid 1003",
        "channel 5",
        "middle of a slot",
    ] {
        assert!(e.contains(want), "{want:?} missing from: {e}");
    }
    assert!(rb.kernel_aborted());
}

/// A peer that closes between slots without a goodbye (a process that exited after its last
/// send without destroying its communicator) is no error by itself: what arrived is delivered,
/// and the proxy remembers the peer for the kernel's timeout report.
#[test]
fn a_close_between_slots_is_remembered_not_fatal() {
    let rb = Rank::new();
    let eb = End::new(100);
    let (mut sa, sb) = socket_pairs(1);
    let pb = start(vec![conn(Side::Recv, &eb, sb, 4, 0)], &rb, LONG);
    let mut frame = Vec::new();
    frame.extend_from_slice(&(size_of(0, 100) as u32).to_le_bytes());
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.extend((0..size_of(0, 100)).map(|i| pattern(0, i)));
    sa[0].set_nonblocking(false).unwrap();
    sa[0].write_all(&frame).unwrap();
    drop(sa);
    Kernel::new(&eb, &rb, LONG).recv(0..1).unwrap();
    assert!(eventually(Duration::from_secs(2), || pb.closed_without_goodbye(4)));
    assert!(pb.failure().is_none(), "{:?}", pb.failure());
    assert!(!rb.kernel_aborted());
}

/// A receiver whose socket goes away while the sender still posts: the sending side fails
/// within its deadline, names the peer, and stops its kernel.
#[test]
fn a_receiver_going_away_fails_the_sender() {
    let slot = 4096;
    let ra = Rank::new();
    let ea = End::new(slot);
    let (sa, mut sb) = socket_pairs(2);
    let pa = start(vec![conn(Side::Send, &ea, sa, 1, 7)], &ra, LONG);
    let ka = Kernel::new(&ea, &ra, LONG);
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..u64::MAX));
        // Let some slots through, then the receiving "process" dies.
        let mut buf = vec![0u8; 1 << 16];
        sb[0].set_nonblocking(false).unwrap();
        sb[0].read_exact(&mut buf[..1000]).unwrap();
        let t0 = Instant::now();
        sb.clear();
        let err = t.join().unwrap().unwrap_err();
        assert!(err.contains("aborted"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    });
    let e = pa
        .failure()
        .expect("the proxy reports the peer")
        .to_string();
    for want in ["rank 1", "host host1", "channel 7"] {
        assert!(e.contains(want), "{want:?} missing from: {e}");
    }
}

/// A proxy that stops says goodbye: its peer's proxy takes a clean one quietly, and one after an
/// abort as the peer's failure (so peers of an aborted rank fail fast).
#[test]
fn goodbyes_are_quiet_unless_the_peer_aborted() {
    for aborted in [false, true] {
        let slot = 300;
        let (ra, rb) = (Rank::new(), Rank::new());
        let (ea, eb) = (End::new(slot), End::new(slot));
        let (sa, sb) = socket_pairs(2);
        let mut pa = start(vec![conn(Side::Send, &ea, sa, 1, 1)], &ra, LONG);
        let pb = start(vec![conn(Side::Recv, &eb, sb, 0, 1)], &rb, LONG);
        let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
        std::thread::scope(|sc| {
            let t = sc.spawn(move || ka.send(0..20));
            kb.recv(0..20).unwrap();
            t.join().unwrap().unwrap();
        });
        if aborted {
            ra.abort.store(true, Ordering::SeqCst);
            assert!(eventually(Duration::from_secs(2), || !pa.running()));
        }
        pa.stop();
        if aborted {
            assert!(eventually(Duration::from_secs(2), || pb
                .failure()
                .is_some()));
            let e = pb.failure().unwrap().to_string();
            assert!(e.contains("rank 0") && e.contains("aborted"), "{e}");
            assert!(rb.kernel_aborted());
        } else {
            std::thread::sleep(Duration::from_millis(50));
            assert!(pb.failure().is_none(), "{:?}", pb.failure());
            assert!(!pb.closed_without_goodbye(0));
            assert!(pb.running());
        }
    }
}

/// Raising the communicator's abort flag stops a proxy that waits: a sender whose peer reads
/// nothing, and a receiver whose peer sends nothing.
#[test]
fn abort_unblocks_waiting_proxies() {
    let slot = 1 << 20;
    let r = Rank::new();
    let (es, er) = (End::new(slot), End::new(slot));
    let (sa, sb) = socket_pairs(1);
    let (ra, _rb) = socket_pairs(1);
    socket2::SockRef::from(&sa[0])
        .set_send_buffer_size(8192)
        .unwrap();
    socket2::SockRef::from(&sb[0])
        .set_recv_buffer_size(8192)
        .unwrap();
    let p = start(
        vec![
            conn(Side::Send, &es, sa, 1, 0),
            conn(Side::Recv, &er, ra, 1, 1),
        ],
        &r,
        LONG,
    );
    let k = Kernel::new(&es, &r, LONG);
    k.send(0..SLOTS).unwrap(); // 8 MiB that the peer never reads
    std::thread::sleep(Duration::from_millis(20));
    assert!(es.load(es.fifo.head) < SLOTS, "the peer read nothing");
    assert!(p.running());
    let t0 = Instant::now();
    r.abort.store(true, Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(1), || !p.running()));
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert!(p.failure().is_none(), "an abort is not the proxy's failure");
    drop(sb);
}

/// A frame that stops arriving half way fails the connection after the stall timeout.
#[test]
fn a_stalled_frame_times_out_naming_the_peer() {
    let rb = Rank::new();
    let eb = End::new(1000);
    let (mut sa, sb) = socket_pairs(1);
    let pb = start(
        vec![conn(Side::Recv, &eb, sb, 2, 4)],
        &rb,
        Duration::from_millis(300),
    );
    let mut frame = Vec::new();
    frame.extend_from_slice(&800u32.to_le_bytes());
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.extend_from_slice(&[1u8; 10]);
    sa[0].set_nonblocking(false).unwrap();
    sa[0].write_all(&frame).unwrap();
    assert!(eventually(Duration::from_secs(3), || pb
        .failure()
        .is_some()));
    let e = pb.failure().unwrap();
    assert!(matches!(e, crate::Error::Timeout { .. }), "{e}");
    let e = e.to_string();
    assert!(e.contains("rank 2") && e.contains("channel 4"), "{e}");
    assert!(rb.kernel_aborted());
    drop(sa);
}

/// A frame larger than a slot is a protocol error, not a buffer overrun.
#[test]
fn an_oversized_frame_is_refused() {
    let rb = Rank::new();
    let eb = End::new(64);
    let (mut sa, sb) = socket_pairs(1);
    let pb = start(vec![conn(Side::Recv, &eb, sb, 1, 0)], &rb, LONG);
    let mut frame = Vec::new();
    frame.extend_from_slice(&65u32.to_le_bytes());
    frame.extend_from_slice(&0u32.to_le_bytes());
    sa[0].set_nonblocking(false).unwrap();
    sa[0].write_all(&frame).unwrap();
    assert!(eventually(Duration::from_secs(3), || pb
        .failure()
        .is_some()));
    let e = pb.failure().unwrap().to_string();
    assert!(e.contains("malformed") && e.contains("rank 1"), "{e}");
    assert_eq!(eb.load(eb.fifo.tail), 0);
}

// ---- Across network namespaces (root) ----

/// Runs `f` on a thread that has joined network namespace `ns`: sockets it creates live there.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("joining {path}: {e}"));
        f()
    })
    .join()
    .unwrap()
}

fn test_hosts(tag: &str) -> Option<netns::TestHosts> {
    if !procs::require(
        procs::is_root(),
        "root, to create network namespaces (run the suite as root)",
    ) {
        return None;
    }
    Some(netns::TestHosts::new(tag, 2).expect("creating test hosts (is iproute2 installed?)"))
}

/// Listens in namespace `ns` on `ip`; returns the listener and its address.
fn listen_in(ns: &str, ip: &str) -> (TcpListener, SocketAddr) {
    let ip = ip.to_string();
    in_netns(ns, move || {
        let l = TcpListener::bind((ip.as_str(), 0)).unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    })
}

/// Accepts `n` prepared sockets (blocking, bounded by a timeout).
fn accept_n(l: &TcpListener, n: usize) -> Vec<TcpStream> {
    l.set_nonblocking(false).unwrap();
    (0..n)
        .map(|_| {
            let (s, _) = l.accept().unwrap();
            prepare_socket(&s).unwrap();
            s
        })
        .collect()
}

#[test]
fn slots_cross_two_network_namespaces() {
    let Some(h) = test_hosts("gn") else { return };
    let (slot, count, nsocks) = (4099, 600, 2);
    let (l, addr) = listen_in(&h.hosts[1], &h.addrs[1]);
    let sa: Vec<TcpStream> = in_netns(&h.hosts[0], move || {
        (0..nsocks)
            .map(|_| {
                let s = TcpStream::connect(addr).unwrap();
                prepare_socket(&s).unwrap();
                s
            })
            .collect()
    });
    let sb = accept_n(&l, nsocks);
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let _pa = start(vec![conn(Side::Send, &ea, sa, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(Side::Recv, &eb, sb, 0, 0)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..count));
        kb.recv(0..count).unwrap();
        t.join().unwrap().unwrap();
    });
}

/// The variable that makes [`netns_child`] act: `send|recv,<slot bytes>,<parent address>`.
const CHILD_ENV: &str = "GPU_NET_TEST_CHILD";

/// The other rank of the namespace tests, as a process of its own (this test binary, started
/// by [`spawn_child`] inside a namespace): connects to the parent and sends or receives slots
/// until it is killed (or 60 s pass).
#[test]
#[ignore = "the child process of the network-namespace tests; does nothing by itself"]
fn netns_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut it = spec.splitn(3, ',');
    let (role, slot, addr) = (
        it.next().unwrap(),
        it.next().unwrap().parse::<usize>().unwrap(),
        it.next().unwrap().parse::<SocketAddr>().unwrap(),
    );
    let socks: Vec<TcpStream> = (0..2)
        .map(|_| {
            let s = TcpStream::connect(addr).unwrap();
            prepare_socket(&s).unwrap();
            s
        })
        .collect();
    let r = Rank::new();
    let e = End::new(slot);
    let side = if role == "send" {
        Side::Send
    } else {
        Side::Recv
    };
    let _p = start(vec![conn(side, &e, socks, 0, 0)], &r, LONG);
    let mut k = Kernel::new(&e, &r, Duration::from_secs(60));
    let _ = if side == Side::Send {
        k.send(0..u64::MAX)
    } else {
        k.pause = Duration::from_micros(300);
        k.recv(0..u64::MAX)
    };
}

/// Starts [`netns_child`] in namespace `ns` and accepts its two sockets on a listener in
/// namespace `here`.
fn spawn_child(
    h: &netns::TestHosts,
    here: usize,
    role: &str,
    slot: usize,
) -> (std::process::Child, Vec<TcpStream>) {
    let (l, addr) = listen_in(&h.hosts[here], &h.addrs[here]);
    let child = std::process::Command::new("ip")
        .args(["netns", "exec", &h.hosts[1 - here]])
        .arg(std::env::current_exe().unwrap())
        .args([
            "transport::gpu_net::tests::netns_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, format!("{role},{slot},{addr}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("starting the child rank");
    let socks = accept_n(&l, 2);
    (child, socks)
}

/// The receiving rank's process is killed mid-transfer: the sender, in the other namespace,
/// reports an error naming it within the deadline and stops its kernel.
#[test]
fn killing_the_receiving_process_fails_the_sender_across_namespaces() {
    let Some(h) = test_hosts("gk") else { return };
    let slot = 65536;
    let (mut child, socks) = spawn_child(&h, 0, "recv", slot);
    let r = Rank::new();
    let e = End::new(slot);
    let p = start(vec![conn(Side::Send, &e, socks, 1, 3)], &r, LONG);
    let k = Kernel::new(&e, &r, LONG);
    std::thread::scope(|sc| {
        let t = sc.spawn(move || k.send(0..u64::MAX));
        assert!(
            eventually(Duration::from_secs(10), || e.load(e.fifo.head) >= 64),
            "the child received nothing"
        );
        let t0 = Instant::now();
        child.kill().unwrap();
        child.wait().unwrap();
        let err = t.join().unwrap().unwrap_err();
        assert!(err.contains("aborted"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    });
    let e = p.failure().expect("the proxy reports the peer").to_string();
    assert!(e.contains("rank 1") && e.contains("channel 3"), "{e}");
}

/// The sending rank's process is killed mid-transfer: the receiver, in the other namespace,
/// reports it naming the peer and stops its kernel. The receiving kernel pauses first, so the
/// child's slots (larger than its sockets hold) back up and the cut falls inside one.
#[test]
fn killing_the_sending_process_fails_the_receiver_across_namespaces() {
    let Some(h) = test_hosts("gs") else { return };
    let slot = 4 << 20;
    let (mut child, socks) = spawn_child(&h, 1, "send", slot);
    let r = Rank::new();
    let e = End::new(slot);
    let p = start(vec![conn(Side::Recv, &e, socks, 1, 6)], &r, LONG);
    let k = Kernel::new(&e, &r, LONG);
    k.recv(0..4).unwrap();
    // The receiving proxy fills its 8 free slots, then leaves the rest in the sockets.
    assert!(eventually(Duration::from_secs(10), || e.load(e.fifo.tail) == 4 + SLOTS));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    let err = k.recv(4..u64::MAX).unwrap_err();
    assert!(err.contains("aborted"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let e = p.failure().expect("the proxy reports the peer").to_string();
    assert!(
        e.contains("rank 1") && e.contains("channel 6") && e.contains("middle of a slot"),
        "{e}"
    );
}
