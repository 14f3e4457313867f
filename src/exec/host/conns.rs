//! A communicator's open connections, indexed by key, each with the counters it registered in
//! the communicator's [`CommStats`].

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::conn::ConnKey;
use crate::stats::{CommStats, Direction, LinkCounters};
use crate::transport::{RecvConn, SendConn, TransportKind};

/// A sending connection and its counters.
pub(crate) struct SendLink {
    /// The connection.
    pub conn: SendConn,
    /// Its key.
    pub key: ConnKey,
    /// Live counters.
    pub counters: Arc<LinkCounters>,
}

/// A receiving connection and its counters.
pub(crate) struct RecvLink {
    /// The connection.
    pub conn: RecvConn,
    /// Its key.
    pub key: ConnKey,
    /// Live counters.
    pub counters: Arc<LinkCounters>,
}

/// Every connection a communicator has opened so far.
#[derive(Default)]
pub(crate) struct Connections {
    /// Sending ends.
    pub sends: Vec<SendLink>,
    /// Receiving ends.
    pub recvs: Vec<RecvLink>,
    send_index: FxHashMap<ConnKey, usize>,
    recv_index: FxHashMap<ConnKey, usize>,
}

impl Connections {
    /// Adds a sending end, registering its counters in `stats`.
    pub(crate) fn add_send(
        &mut self,
        key: ConnKey,
        conn: SendConn,
        transport: TransportKind,
        stats: &CommStats,
    ) {
        let counters = stats.add_link(key, Direction::Send, transport.into());
        self.send_index.insert(key, self.sends.len());
        self.sends.push(SendLink {
            conn,
            key,
            counters,
        });
    }

    /// Adds a receiving end, registering its counters in `stats`.
    pub(crate) fn add_recv(
        &mut self,
        key: ConnKey,
        conn: RecvConn,
        transport: TransportKind,
        stats: &CommStats,
    ) {
        let counters = stats.add_link(key, Direction::Recv, transport.into());
        self.recv_index.insert(key, self.recvs.len());
        self.recvs.push(RecvLink {
            conn,
            key,
            counters,
        });
    }

    /// Index of the sending end for `key`.
    pub(crate) fn send_idx(&self, key: &ConnKey) -> Option<usize> {
        self.send_index.get(key).copied()
    }

    /// Index of the receiving end for `key`.
    pub(crate) fn recv_idx(&self, key: &ConnKey) -> Option<usize> {
        self.recv_index.get(key).copied()
    }

    /// True when a sending end for `key` exists.
    pub(crate) fn has_send(&self, key: &ConnKey) -> bool {
        self.send_index.contains_key(key)
    }

    /// True when a receiving end for `key` exists.
    pub(crate) fn has_recv(&self, key: &ConnKey) -> bool {
        self.recv_index.contains_key(key)
    }

    /// Every peer this rank has a connection with, once each, ascending.
    pub(crate) fn peers(&self) -> Vec<usize> {
        let mut p: Vec<usize> = self
            .sends
            .iter()
            .map(|s| s.key.peer)
            .chain(self.recvs.iter().map(|r| r.key.peer))
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Marks every end as cleanly finished (peers see no `gone` flag when this rank exits).
    pub(crate) fn finish_all(&mut self) {
        for s in &mut self.sends {
            s.conn.finish();
        }
        for r in &mut self.recvs {
            r.conn.finish();
        }
    }
}
