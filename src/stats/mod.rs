//! Traffic counters per connection, updated by the executor as slots move and readable while a
//! communicator runs (the TUI and `rnccl bench --format json` read them).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::transport::TransportKind;
use crate::transport::setup::ConnKey;

/// Counters of one direction of one connection.
#[derive(Debug, Default)]
pub struct LinkCounters {
    /// Payload bytes moved.
    pub bytes: AtomicU64,
    /// Slots (NCCL steps) moved.
    pub slots: AtomicU64,
}

impl LinkCounters {
    /// Counts one slot of `bytes`.
    #[inline]
    pub fn add(&self, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.slots.fetch_add(1, Ordering::Relaxed);
    }
}

/// Which way a link carries data, seen from this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Direction {
    /// This rank sends.
    Send,
    /// This rank receives.
    Recv,
}

/// A snapshot of one link's counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LinkSnapshot {
    /// Peer rank.
    pub peer: usize,
    /// Channel.
    pub channel: u16,
    /// 0 = collective connection, 1 = point-to-point connection.
    pub index: u8,
    /// Direction.
    pub direction: Direction,
    /// Transport.
    pub transport: TransportKind,
    /// Payload bytes so far.
    pub bytes: u64,
    /// Slots so far.
    pub slots: u64,
}

/// One link's identity and counters.
#[derive(Debug, Clone)]
pub struct Link {
    /// The connection.
    pub key: ConnKey,
    /// Direction.
    pub direction: Direction,
    /// Transport.
    pub transport: TransportKind,
    /// Live counters.
    pub counters: Arc<LinkCounters>,
}

impl Link {
    /// Reads the counters.
    pub fn snapshot(&self) -> LinkSnapshot {
        LinkSnapshot {
            peer: self.key.peer,
            channel: self.key.channel,
            index: self.key.index,
            direction: self.direction,
            transport: self.transport,
            bytes: self.counters.bytes.load(Ordering::Relaxed),
            slots: self.counters.slots.load(Ordering::Relaxed),
        }
    }
}
