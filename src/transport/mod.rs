//! Transports: how bytes move between two ranks on one channel.
//!
//! Every connection is a slot FIFO seen through two traits, [`SendEnd`] and [`RecvEnd`]; the
//! transports differ in where the slots live: a heap block shared by ranks of one process or a
//! POSIX shared-memory segment for processes of one host ([`fifo`], [`shm`]), or each end's own
//! memory with TCP ([`tcp`]) or RDMA writes over InfiniBand/RoCE ([`ib`]) in between. [`setup`] picks the transport per peer and connects
//! through the bootstrap. Failures are [`TransportError`]s naming the peer.

pub(crate) mod error;
pub(crate) mod fifo;
pub(crate) mod gpu;
pub(crate) mod ib;
pub(crate) mod params;
pub(crate) mod setup;
pub(crate) mod shm;
pub(crate) mod slot_size;
pub(crate) mod tcp;

use std::os::fd::RawFd;

use nix::poll::PollFlags;

pub(crate) use error::TransportError;
pub(crate) use params::TransportParams;

use crate::device::MemKind;
use crate::stats::Path;

/// The transport kinds, in NCCL's order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TransportKind {
    /// Ranks in one process: a FIFO in the heap ("P2P/direct" in NCCL's logs).
    SameProcess,
    /// Processes on one host: a FIFO in POSIX shared memory ("SHM/direct").
    Shm,
    /// Different hosts (or shared memory disabled): TCP sockets ("NET/Socket").
    Tcp,
    /// Different hosts, both with a usable InfiniBand/RoCE port: RDMA writes ("NET/IB").
    Ib,
}

impl TransportKind {
    /// The name NCCL's INFO lines use for this transport.
    pub fn nccl_name(self) -> &'static str {
        Path::from(self).nccl_name()
    }
}

impl From<TransportKind> for Path {
    fn from(t: TransportKind) -> Path {
        match t {
            TransportKind::SameProcess => Path::SameProcess,
            TransportKind::Shm => Path::Shm,
            TransportKind::Tcp => Path::Tcp,
            TransportKind::Ib => Path::Ib,
        }
    }
}

/// The state of the far end of a connection, as seen by a waiting end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerState {
    /// The far end is attached and has not given up.
    Alive,
    /// The far end aborted or was dropped mid-stream.
    Gone,
    /// The far end's process no longer exists.
    Dead,
}

/// A socket an end waits on, and for what (see [`crate::exec::host`]).
pub(crate) type PollInterest = (RawFd, PollFlags);

/// The sending end of a connection: hands out free slots, publishes filled ones.
pub(crate) trait SendEnd: Send {
    /// Bytes per slot.
    fn slot_bytes(&self) -> usize;

    /// The kind of memory the slots live in (what a backend must reach to fill them).
    fn slot_kind(&self) -> MemKind;

    /// Whether the slots are memory the receiver reads in place (a memory FIFO), so waits can
    /// only poll and filling a slot may use streaming stores; false when bytes cross a wire.
    fn in_memory(&self) -> bool;

    /// The next free slot ([`SendEnd::slot_bytes`] writable bytes), or `None` while the FIFO is
    /// full. The same slot is returned until it is posted.
    fn acquire(&mut self) -> Option<*mut u8>;

    /// Publishes the acquired slot with `nbytes` (≤ [`SendEnd::slot_bytes`]) of data.
    fn post(&mut self, nbytes: usize);

    /// Whether [`SendEnd::post_from`] sends from the caller's memory as it lies (TCP: the
    /// socket reads it, so filling a slot first would only add a copy); false where it copies
    /// into the slot.
    fn sends_from_caller(&self) -> bool {
        false
    }

    /// Publishes the next slot with `nbytes` (≤ [`SendEnd::slot_bytes`]) taken from `src`: read
    /// where it lies until the slot left ([`SendEnd::sends_from_caller`]), else copied into
    /// the slot [`SendEnd::acquire`] returned (which must have returned one).
    ///
    /// # Safety
    /// `src` is valid for reads of `nbytes` (host memory), and where the end sends from the
    /// caller's memory nobody writes it until [`SendEnd::pending`] says every posted slot left.
    unsafe fn post_from(&mut self, src: *const u8, nbytes: usize) {
        if let Some(slot) = self.acquire() {
            // SAFETY: the slot holds slot_bytes >= nbytes and never overlaps the caller's
            // memory; `src` holds nbytes (the caller's contract).
            unsafe { std::ptr::copy_nonoverlapping(src, slot, nbytes) };
            self.post(nbytes);
        }
    }

    /// Drives I/O (sockets driven by the caller's loop). Returns whether anything moved.
    ///
    /// Errors: [`TransportError`] naming the peer when the connection failed.
    fn progress(&mut self) -> Result<bool, TransportError>;

    /// Sockets this end waits on (empty for memory FIFOs and helper-thread sockets).
    fn poll_interest(&self) -> Vec<PollInterest>;

    /// True while posted data has not yet left this process.
    fn pending(&self) -> bool;

    /// The far end's state (memory FIFOs; sockets report failures through `progress`).
    fn peer_state(&self) -> PeerState;

    /// Marks a clean shutdown (the far end sees no `gone` flag when this end is dropped).
    fn finish(&mut self);
}

/// The receiving end of a connection: shows filled slots in order, frees them.
pub(crate) trait RecvEnd: Send {
    /// Bytes per slot.
    fn slot_bytes(&self) -> usize;

    /// The kind of memory the slots live in.
    fn slot_kind(&self) -> MemKind;

    /// Whether the slots are memory the sender writes in place (a memory FIFO).
    fn in_memory(&self) -> bool;

    /// The oldest filled slot and its byte count (≤ [`RecvEnd::slot_bytes`]), or `None` while
    /// none has arrived. The same slot is returned until it is released.
    fn peek(&mut self) -> Option<(*const u8, usize)>;

    /// Frees the slot returned by the last `peek`.
    fn release(&mut self);

    /// Whether [`RecvEnd::receive_into`] can land slots straight in the caller's memory (TCP
    /// driven by the caller's loop: the socket reads into it, which saves the copy out of the
    /// slot); false where the sender fills the slots itself.
    fn receives_into_caller(&self) -> bool {
        false
    }

    /// Asks that the slot `ahead` places after the oldest unreleased one (`0..NSLOTS`) land at
    /// `dst`, which takes at most `len` bytes; [`RecvEnd::peek`] then shows it there. Only a
    /// hint: a slot whose bytes were already coming into the slot, or that is larger than
    /// `len`, lands in the slot as usual. A no-op where
    /// [`RecvEnd::receives_into_caller`] is false.
    ///
    /// # Safety
    /// `dst` is valid for writes of `len` bytes of host memory that nobody else touches until
    /// that slot is released or [`RecvEnd::withdraw`] is called.
    unsafe fn receive_into(&mut self, _ahead: usize, _dst: *mut u8, _len: usize) {}

    /// Takes back every [`RecvEnd::receive_into`] not yet released: what arrives from now on
    /// lands in the slots (an operation that failed midway gives its buffers back).
    fn withdraw(&mut self) {}

    /// Drives I/O. Returns whether anything moved.
    ///
    /// Errors: [`TransportError`] naming the peer when the connection failed.
    fn progress(&mut self) -> Result<bool, TransportError>;

    /// Sockets this end waits on.
    fn poll_interest(&self) -> Vec<PollInterest>;

    /// The far end's state.
    fn peer_state(&self) -> PeerState;

    /// Marks a clean shutdown.
    fn finish(&mut self);
}

/// A sending end whose slots are the caller's memory, written in place (a GPU FIFO's slots in
/// pinned host memory): the caller writes slot `s % NSLOTS` itself, then [`SendEnd::post`]s its
/// size without [`SendEnd::acquire`]; the end moves it to the far end's slot `s` (TCP frames it
/// onto a socket, IB writes it by RDMA). The GPU proxy drives every network end through this
/// trait and [`InPlaceRecv`].
pub(crate) trait InPlaceSend: SendEnd {
    /// Slots handed over so far: their memory may be written again (TCP: the whole frame is in
    /// the socket; IB: the RDMA write completed).
    fn completed(&mut self) -> u64;

    /// What carries the slots, for messages: "TCP", "IB (mlx5_0:1)".
    fn via(&self) -> String;

    /// Tells the far end this end is going, clean or `aborted`, best effort within about
    /// 100 ms (TCP says goodbye on every socket; IB has no goodbye: the peer learns from its
    /// next write or its deadline).
    fn goodbye(&mut self, aborted: bool);
}

/// A receiving end whose slots are the caller's memory, filled in place: slot `s` of the far
/// end arrives whole in slot `s % NSLOTS`, is read by the caller where it lies, and is handed
/// back with [`RecvEnd::release`] (oldest first). See [`InPlaceSend`].
pub(crate) trait InPlaceRecv: RecvEnd {
    /// Slots arrived whole so far (released ones included).
    fn arrived(&mut self) -> u64;

    /// The byte count of slot `seq`, arrived and not released.
    fn arrived_bytes(&self, seq: u64) -> usize;

    /// Whether part of a slot has arrived and the rest has not (an IB slot arrives whole).
    fn receiving(&self) -> bool;

    /// Whether the far end closed between slots without a goodbye (its process exited or was
    /// killed).
    fn closed_without_goodbye(&self) -> bool;

    /// What carries the slots, for messages.
    fn via(&self) -> String;

    /// As [`InPlaceSend::goodbye`].
    fn goodbye(&mut self, aborted: bool);

    /// Every socket whose readability announces data (or the far end's close) for this end,
    /// when the end can say: the GPU proxy then drives the end only while one of them is
    /// readable or a slot is part-way in ([`InPlaceRecv::receiving`]). Empty, the default,
    /// when it cannot (helper threads own the sockets; IB polls its completion queue): the end
    /// is then driven on every pass.
    fn data_sockets(&self) -> Vec<RawFd> {
        Vec::new()
    }
}

/// A sending end of any transport.
pub(crate) type SendConn = Box<dyn SendEnd>;
/// A receiving end of any transport.
pub(crate) type RecvConn = Box<dyn RecvEnd>;
