//! A communicator's open connections, indexed by key, with their counters.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::stats::{Direction, Link, LinkCounters, LinkSnapshot};
use crate::transport::setup::ConnKey;
use crate::transport::{RecvConn, SendConn, TransportKind};

/// A sending connection and its counters.
pub struct SendLink {
    /// The connection.
    pub conn: SendConn,
    /// Identity and counters.
    pub link: Link,
}

/// A receiving connection and its counters.
pub struct RecvLink {
    /// The connection.
    pub conn: RecvConn,
    /// Identity and counters.
    pub link: Link,
}

/// Every connection a communicator has opened so far.
#[derive(Default)]
pub struct Connections {
    /// Sending ends.
    pub sends: Vec<SendLink>,
    /// Receiving ends.
    pub recvs: Vec<RecvLink>,
    send_index: FxHashMap<ConnKey, usize>,
    recv_index: FxHashMap<ConnKey, usize>,
}

impl Connections {
    /// Adds a sending end.
    pub fn add_send(&mut self, key: ConnKey, conn: SendConn, transport: TransportKind) {
        let link = Link {
            key,
            direction: Direction::Send,
            transport,
            counters: Arc::new(LinkCounters::default()),
        };
        self.send_index.insert(key, self.sends.len());
        self.sends.push(SendLink { conn, link });
    }

    /// Adds a receiving end.
    pub fn add_recv(&mut self, key: ConnKey, conn: RecvConn, transport: TransportKind) {
        let link = Link {
            key,
            direction: Direction::Recv,
            transport,
            counters: Arc::new(LinkCounters::default()),
        };
        self.recv_index.insert(key, self.recvs.len());
        self.recvs.push(RecvLink { conn, link });
    }

    /// Index of the sending end for `key`.
    pub fn send_idx(&self, key: &ConnKey) -> Option<usize> {
        self.send_index.get(key).copied()
    }

    /// Index of the receiving end for `key`.
    pub fn recv_idx(&self, key: &ConnKey) -> Option<usize> {
        self.recv_index.get(key).copied()
    }

    /// True when a sending end for `key` exists.
    pub fn has_send(&self, key: &ConnKey) -> bool {
        self.send_index.contains_key(key)
    }

    /// True when a receiving end for `key` exists.
    pub fn has_recv(&self, key: &ConnKey) -> bool {
        self.recv_index.contains_key(key)
    }

    /// Every link's identity and counters (cheap to clone; counters stay live).
    pub fn links(&self) -> Vec<Link> {
        self.sends
            .iter()
            .map(|s| s.link.clone())
            .chain(self.recvs.iter().map(|r| r.link.clone()))
            .collect()
    }

    /// Current counters of every link.
    pub fn snapshot(&self) -> Vec<LinkSnapshot> {
        self.links().iter().map(Link::snapshot).collect()
    }

    /// Marks every end as cleanly finished (peers see no `gone` flag when this rank exits).
    pub fn finish_all(&mut self) {
        for s in &mut self.sends {
            s.conn.finish();
        }
        for r in &mut self.recvs {
            r.conn.finish();
        }
    }
}
