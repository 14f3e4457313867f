//! The two ends of a TCP connection: each keeps [`NSLOTS`] slots (its own, or the caller's in
//! place) and its driver moves them over the sockets.

use std::net::TcpStream;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::driver::Driver;
use super::framing::{Dir, Stream};
use super::slots::{Shared, Slots};
use crate::conn::NSLOTS;
use crate::device::MemKind;
use crate::error::Result;
use crate::transport::{
    InPlaceRecv, InPlaceSend, PeerState, PollInterest, RecvEnd, SendEnd, TransportError,
};

/// The shared slot state and the driver for one direction of a connection over `socks`
/// (stream `i` carries slots `i`, `i + nsocks`, …).
fn start(
    socks: Vec<TcpStream>,
    dir: Dir,
    slot_bytes: usize,
    nthreads: usize,
    peer: &str,
    slots: Slots,
) -> Result<(Arc<Shared>, Driver)> {
    let shared = Arc::new(Shared::new(slot_bytes, socks.len(), slots));
    let streams = socks
        .into_iter()
        .enumerate()
        .map(|(i, sock)| Stream::new(sock, dir, i, peer))
        .collect();
    let driver = Driver::new(streams, nthreads, &shared)?;
    Ok((shared, driver))
}

/// The sending end of a TCP connection.
pub(crate) struct TcpSender {
    shared: Arc<Shared>,
    driver: Driver,
    /// Slots fully handed to the kernel.
    completed: u64,
    posted: u64,
}

impl TcpSender {
    /// Wraps connected, prepared sockets (index order = stream order) to `peer` (for messages),
    /// driven by `nthreads` helper threads (0: by the caller's progress loop), framing `slots`.
    ///
    /// Errors: [`crate::error::Error::System`] when a helper thread cannot be started.
    pub(crate) fn new(
        socks: Vec<TcpStream>,
        slot_bytes: usize,
        nthreads: usize,
        peer: &str,
        slots: Slots,
    ) -> Result<TcpSender> {
        let (shared, driver) = start(socks, Dir::Send, slot_bytes, nthreads, peer, slots)?;
        Ok(TcpSender {
            shared,
            driver,
            completed: 0,
            posted: 0,
        })
    }

    /// Publishes the next slot with `nbytes`, taken from `src` (null: the slot itself).
    ///
    /// # Safety
    /// A non-null `src` is valid for reads of `nbytes` until the slot completed.
    unsafe fn publish(&mut self, src: *const u8, nbytes: usize) {
        let idx = (self.posted % NSLOTS as u64) as usize;
        self.shared.sizes[idx].store(nbytes as u64, Ordering::Relaxed);
        self.shared.sources[idx].store(src as usize, Ordering::Relaxed);
        self.posted += 1;
        self.shared.counter.store(self.posted, Ordering::SeqCst);
        self.driver.wake();
    }

    fn reap(&mut self) {
        while self.completed < self.posted {
            let idx = (self.completed % NSLOTS as u64) as usize;
            if self.shared.state[idx].load(Ordering::Acquire) == 0 {
                break;
            }
            self.shared.state[idx].store(0, Ordering::Relaxed);
            self.completed += 1;
        }
    }
}

impl SendEnd for TcpSender {
    fn slot_bytes(&self) -> usize {
        self.shared.mem.slot_bytes
    }

    fn slot_kind(&self) -> MemKind {
        MemKind::Host
    }

    fn in_memory(&self) -> bool {
        false
    }

    fn acquire(&mut self) -> Option<*mut u8> {
        if self.posted - self.completed >= NSLOTS as u64 {
            self.reap();
            if self.posted - self.completed >= NSLOTS as u64 {
                return None;
            }
        }
        Some(self.shared.mem.slot(self.posted))
    }

    fn post(&mut self, nbytes: usize) {
        // SAFETY: a null source sends the slot itself.
        unsafe { self.publish(std::ptr::null(), nbytes) };
    }

    fn sends_from_caller(&self) -> bool {
        true
    }

    unsafe fn post_from(&mut self, src: *const u8, nbytes: usize) {
        // SAFETY: the caller keeps `src` readable and unchanged until the slot completed.
        unsafe { self.publish(src, nbytes) };
    }

    fn progress(&mut self) -> Result<bool, TransportError> {
        let moved = self.driver.progress(&self.shared)?;
        self.reap();
        Ok(moved)
    }

    fn poll_interest(&self) -> Vec<PollInterest> {
        self.driver.interest(&self.shared)
    }

    fn pending(&self) -> bool {
        self.completed < self.posted
    }

    fn peer_state(&self) -> PeerState {
        PeerState::Alive
    }

    fn finish(&mut self) {}
}

impl InPlaceSend for TcpSender {
    fn completed(&mut self) -> u64 {
        self.reap();
        self.completed
    }

    fn via(&self) -> String {
        "TCP".into()
    }

    fn goodbye(&mut self, aborted: bool) {
        self.driver.goodbye(&self.shared, aborted);
    }
}

impl Drop for TcpSender {
    fn drop(&mut self) {
        self.driver.stop(&self.shared);
    }
}

/// The receiving end of a TCP connection.
pub(crate) struct TcpReceiver {
    shared: Arc<Shared>,
    driver: Driver,
    released: u64,
    /// Slots seen arrived whole ([`InPlaceRecv::arrived`]).
    arrived: u64,
}

impl TcpReceiver {
    /// Wraps accepted, prepared sockets (index order = stream order) from `peer`, filling
    /// `slots`.
    ///
    /// Errors: [`crate::error::Error::System`] when a helper thread cannot be started.
    pub(crate) fn new(
        socks: Vec<TcpStream>,
        slot_bytes: usize,
        nthreads: usize,
        peer: &str,
        slots: Slots,
    ) -> Result<TcpReceiver> {
        let (shared, driver) = start(socks, Dir::Recv, slot_bytes, nthreads, peer, slots)?;
        Ok(TcpReceiver {
            shared,
            driver,
            released: 0,
            arrived: 0,
        })
    }

    fn state_of(&self, seq: u64) -> u64 {
        self.shared.state[(seq % NSLOTS as u64) as usize].load(Ordering::Acquire)
    }
}

impl RecvEnd for TcpReceiver {
    fn slot_bytes(&self) -> usize {
        self.shared.mem.slot_bytes
    }

    fn slot_kind(&self) -> MemKind {
        MemKind::Host
    }

    fn in_memory(&self) -> bool {
        false
    }

    fn peek(&mut self) -> Option<(*const u8, usize)> {
        match self.state_of(self.released) {
            0 => None,
            s => {
                let idx = (self.released % NSLOTS as u64) as usize;
                let at = match self.shared.landed[idx].load(Ordering::Relaxed) {
                    0 => self.shared.mem.slot(self.released).cast_const(),
                    p => p as *const u8,
                };
                Some((at, s as usize - 1))
            }
        }
    }

    fn release(&mut self) {
        let idx = (self.released % NSLOTS as u64) as usize;
        self.shared.dests[idx].store(0, Ordering::Relaxed);
        self.shared.landed[idx].store(0, Ordering::Relaxed);
        self.shared.state[idx].store(0, Ordering::Relaxed);
        self.released += 1;
        self.arrived = self.arrived.max(self.released);
        self.shared.counter.store(self.released, Ordering::SeqCst);
        self.driver.wake();
    }

    /// Only with the caller's loop driving the sockets: a helper thread could be inside a
    /// `read(2)` into the caller's memory when the caller takes it back.
    fn receives_into_caller(&self) -> bool {
        self.driver.inline()
    }

    unsafe fn receive_into(&mut self, ahead: usize, dst: *mut u8, len: usize) {
        if ahead >= NSLOTS || !self.receives_into_caller() {
            return;
        }
        let idx = ((self.released + ahead as u64) % NSLOTS as u64) as usize;
        self.shared.dest_lens[idx].store(len, Ordering::Relaxed);
        self.shared.dests[idx].store(dst as usize, Ordering::Release);
    }

    fn withdraw(&mut self) {
        for d in &self.shared.dests {
            d.store(0, Ordering::Release);
        }
    }

    fn progress(&mut self) -> Result<bool, TransportError> {
        self.driver.progress(&self.shared)
    }

    /// Gone once the socket that carries the next slot reached its end and that slot has not
    /// arrived. The end is read first: a socket places every frame before it marks its end, so
    /// a slot that arrived is seen then, and nothing sent is lost.
    fn peer_state(&self) -> PeerState {
        if self.shared.carrier_ended(self.released) && self.state_of(self.released) == 0 {
            PeerState::Gone
        } else {
            PeerState::Alive
        }
    }

    fn poll_interest(&self) -> Vec<PollInterest> {
        if self.shared.closed() {
            return Vec::new();
        }
        self.driver.interest(&self.shared)
    }

    fn finish(&mut self) {}
}

impl InPlaceRecv for TcpReceiver {
    fn data_sockets(&self) -> Vec<RawFd> {
        self.driver.sockets()
    }

    fn arrived(&mut self) -> u64 {
        // A slot's state is set once its frame is whole and cleared when it is released, so
        // the slots from `released` on that are set arrived, in order.
        while self.arrived < self.released + NSLOTS as u64 && self.state_of(self.arrived) != 0 {
            self.arrived += 1;
        }
        self.arrived
    }

    fn arrived_bytes(&self, seq: u64) -> usize {
        self.state_of(seq).saturating_sub(1) as usize
    }

    fn receiving(&self) -> bool {
        self.driver.mid_frame()
    }

    fn closed_without_goodbye(&self) -> bool {
        self.shared.unannounced()
    }

    fn via(&self) -> String {
        "TCP".into()
    }

    fn goodbye(&mut self, aborted: bool) {
        self.driver.goodbye(&self.shared, aborted);
    }
}

impl Drop for TcpReceiver {
    fn drop(&mut self) {
        self.driver.stop(&self.shared);
    }
}
