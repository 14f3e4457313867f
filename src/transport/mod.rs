//! Transports: how bytes move between two ranks on one channel.
//!
//! Every connection is a slot FIFO ([`fifo`]); the transports differ in where the slots live:
//! a heap block shared by ranks of one process, a POSIX shared-memory segment for processes of
//! one host ([`shm`]), or each end's own memory with TCP in between ([`tcp`]). [`setup`] picks the
//! transport per peer and connects through the bootstrap.

pub mod fifo;
pub mod setup;
pub mod shm;
pub mod tcp;

use fifo::{MemReceiver, MemSender, PeerState};
use tcp::{TcpReceiver, TcpSender};

/// The transport kinds, in NCCL's order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TransportKind {
    /// Ranks in one process: a FIFO in the heap ("P2P/direct" in NCCL's logs).
    SameProcess,
    /// Processes on one host: a FIFO in POSIX shared memory ("SHM/direct").
    Shm,
    /// Different hosts (or shared memory disabled): TCP sockets ("NET/Socket").
    Tcp,
}

impl TransportKind {
    /// The name NCCL's INFO lines use for this transport.
    pub fn nccl_name(self) -> &'static str {
        match self {
            TransportKind::SameProcess => "P2P/direct pointer",
            TransportKind::Shm => "SHM/direct/direct",
            TransportKind::Tcp => "NET/Socket",
        }
    }
}

/// The sending end of a connection.
pub enum SendConn {
    /// Memory FIFO (same process or shared memory).
    Mem(MemSender),
    /// TCP sockets.
    Tcp(TcpSender),
}

/// The receiving end of a connection.
pub enum RecvConn {
    /// Memory FIFO (same process or shared memory).
    Mem(MemReceiver),
    /// TCP sockets.
    Tcp(TcpReceiver),
}

impl SendConn {
    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        match self {
            SendConn::Mem(m) => m.slot_bytes(),
            SendConn::Tcp(t) => t.slot_bytes(),
        }
    }

    /// The next free slot, or `None` while the FIFO is full.
    #[inline]
    pub fn acquire(&mut self) -> Option<*mut u8> {
        match self {
            SendConn::Mem(m) => m.acquire(),
            SendConn::Tcp(t) => t.acquire(),
        }
    }

    /// Publishes the acquired slot with `nbytes` of data.
    #[inline]
    pub fn post(&mut self, nbytes: usize) {
        match self {
            SendConn::Mem(m) => m.post(nbytes),
            SendConn::Tcp(t) => t.post(nbytes),
        }
    }

    /// Drives socket I/O. Errors: a message naming the peer.
    #[inline]
    pub fn progress(&mut self) -> Result<bool, String> {
        match self {
            SendConn::Mem(_) => Ok(false),
            SendConn::Tcp(t) => t.progress(),
        }
    }

    /// Raw sockets this end waits on and for what (TCP driven inline only).
    pub fn poll_interest(&self) -> Vec<(std::os::fd::RawFd, nix::poll::PollFlags)> {
        match self {
            SendConn::Mem(_) => Vec::new(),
            SendConn::Tcp(t) => t.poll_interest(),
        }
    }

    /// True while posted data has not yet left this process.
    pub fn pending(&self) -> bool {
        match self {
            SendConn::Mem(_) => false,
            SendConn::Tcp(t) => t.pending(),
        }
    }

    /// The far end's state (memory FIFOs only; sockets report failures through `progress`).
    pub fn peer_state(&self) -> PeerState {
        match self {
            SendConn::Mem(m) => m.peer_state(),
            SendConn::Tcp(_) => PeerState::Alive,
        }
    }

    /// Marks a clean shutdown (the far end sees no `gone` flag).
    pub fn finish(&mut self) {
        if let SendConn::Mem(m) = self {
            m.finish()
        }
    }
}

impl RecvConn {
    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        match self {
            RecvConn::Mem(m) => m.slot_bytes(),
            RecvConn::Tcp(t) => t.slot_bytes(),
        }
    }

    /// The oldest filled slot and its byte count, or `None` while none has arrived.
    #[inline]
    pub fn peek(&mut self) -> Option<(*const u8, usize)> {
        match self {
            RecvConn::Mem(m) => m.peek(),
            RecvConn::Tcp(t) => t.peek(),
        }
    }

    /// Frees the slot returned by the last `peek`.
    #[inline]
    pub fn release(&mut self) {
        match self {
            RecvConn::Mem(m) => m.release(),
            RecvConn::Tcp(t) => t.release(),
        }
    }

    /// Drives socket I/O. Errors: a message naming the peer.
    #[inline]
    pub fn progress(&mut self) -> Result<bool, String> {
        match self {
            RecvConn::Mem(_) => Ok(false),
            RecvConn::Tcp(t) => t.progress(),
        }
    }

    /// Raw sockets this end waits on and for what (TCP driven inline only).
    pub fn poll_interest(&self) -> Vec<(std::os::fd::RawFd, nix::poll::PollFlags)> {
        match self {
            RecvConn::Mem(_) => Vec::new(),
            RecvConn::Tcp(t) => t.poll_interest(),
        }
    }

    /// The far end's state.
    pub fn peer_state(&self) -> PeerState {
        match self {
            RecvConn::Mem(m) => m.peer_state(),
            RecvConn::Tcp(t) => t.peer_state(),
        }
    }

    /// Marks a clean shutdown.
    pub fn finish(&mut self) {
        if let RecvConn::Mem(m) = self {
            m.finish()
        }
    }
}
