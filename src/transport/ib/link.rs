//! What both ends of an IB connection share (the protocol of this module's parent): the address
//! one end sends the other at setup, and [`Link`], an end's queue pairs and completion queue with
//! their connecting, polling and port watch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::verbs_failed;
use crate::conn::NSLOTS;
use crate::ib::endpoint::{PortHandle, QpAddr};
use crate::ib::params::IbParams;
use crate::ib::verbs::{Completion, Cq, PORT_ACTIVE, Qp, QpCaps};
use crate::transport::TransportError;

/// What one end tells the other at setup: its queue pairs (in order) and the memory the other
/// end writes into (the receiver's slots, or the sender's CTS FIFO).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IbAddr {
    /// Queue pairs, index-matched with the other end's.
    pub qps: Vec<QpAddr>,
    /// Address of the region.
    pub addr: u64,
    /// Its remote key.
    pub rkey: u32,
    /// The port (`mlx5_0:1`), for messages.
    pub port: String,
}

/// The queue pairs of one end and their completion queue.
pub(super) struct Link {
    // Drop order: queue pairs before the completion queue they use.
    pub(super) qps: Vec<Box<dyn Qp>>,
    pub(super) cq: Arc<dyn Cq>,
    pub(super) port: Arc<PortHandle>,
    pub(super) peer: String,
    pub(super) done: Vec<Completion>,
    /// When the port's state was last read or the link last moved (see [`Link::watch_port`]).
    pub(super) watched: Instant,
}

/// How long an end waits with nothing moving before it reads its port's state again.
const PORT_WATCH: Duration = Duration::from_millis(100);

impl Link {
    pub(super) fn new(
        port: Arc<PortHandle>,
        nqps: usize,
        peer: &str,
    ) -> Result<Link, TransportError> {
        let label = port.label();
        let err = |e| verbs_failed(peer, &label, &e);
        let cq = port
            .pd
            .create_cq(nqps * (3 * NSLOTS + 4) + 16)
            .map_err(err)?;
        let caps = QpCaps {
            max_send_wr: 2 * NSLOTS as u32 + 4,
            max_recv_wr: NSLOTS as u32 + 2,
        };
        let qps = (0..nqps)
            .map(|_| port.pd.create_qp(&cq, caps).map_err(err))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Link {
            qps,
            cq,
            port,
            peer: peer.to_string(),
            done: Vec::with_capacity(64),
            watched: Instant::now(),
        })
    }

    pub(super) fn addrs(&self) -> Vec<QpAddr> {
        self.qps.iter().map(|q| self.port.addr(q.qpn())).collect()
    }

    pub(super) fn fail(&self, e: &crate::ib::verbs::VerbsError) -> TransportError {
        verbs_failed(&self.peer, &self.port.label(), e)
    }

    /// Connects queue pair `i` to the peer's queue pair `i` and preposts `recvs` receives on
    /// each.
    pub(super) fn connect(
        &self,
        remote: &IbAddr,
        params: &IbParams,
        recvs: usize,
    ) -> Result<(), TransportError> {
        if remote.qps.len() != self.qps.len() {
            return Err(TransportError::Malformed {
                peer: self.peer.clone(),
                detail: format!(
                    "{} queue pairs offered where this end has {} (NCCL_IB_QPS_PER_CONNECTION must be the same on every rank)",
                    remote.qps.len(),
                    self.qps.len()
                ),
            });
        }
        for (i, (qp, r)) in self.qps.iter().zip(&remote.qps).enumerate() {
            self.port
                .connect(&**qp, r, params)
                .map_err(|e| self.fail(&e))?;
            for _ in 0..recvs {
                qp.post_recv(i as u64).map_err(|e| self.fail(&e))?;
            }
        }
        Ok(())
    }

    /// Called after each progress step (`moved`: whether it did anything). Once nothing has
    /// moved for [`PORT_WATCH`], reads the port's state: a port that left ACTIVE (cable pulled,
    /// switch port down, subnet manager gone) fails the connection now. Only writes this end
    /// posts time out on a dead link; a receive waiting for the peer would wait until the
    /// operation's deadline.
    ///
    /// Errors: [`TransportError::Fabric`] naming the port and its state.
    pub(super) fn watch_port(&mut self, moved: bool) -> Result<(), TransportError> {
        if moved || self.watched.elapsed() < PORT_WATCH {
            if moved {
                self.watched = Instant::now();
            }
            return Ok(());
        }
        self.watched = Instant::now();
        let a = self
            .port
            .dev
            .query_port(self.port.port)
            .map_err(|e| self.fail(&e))?;
        if a.state == PORT_ACTIVE {
            return Ok(());
        }
        let state = match a.state {
            1 => "DOWN",
            2 => "INIT",
            3 => "ARMED",
            _ => "not ACTIVE",
        };
        Err(TransportError::Fabric {
            peer: self.peer.clone(),
            port: self.port.label(),
            detail: format!(
                "the port went {state} (state {}, physical state {}) while the connection waited: \
                 check the cable and the switch port (ibstat, rnccl ibcheck)",
                a.state, a.phys_state
            ),
        })
    }

    pub(super) fn qp_index(&self, qpn: u32) -> Option<usize> {
        self.qps.iter().position(|q| q.qpn() == qpn)
    }

    /// Polls the completion queue into `self.done`.
    pub(super) fn poll(&mut self) -> Result<(), TransportError> {
        self.done.clear();
        let mut v = std::mem::take(&mut self.done);
        let r = self.cq.poll(&mut v, 64).map_err(|e| self.fail(&e));
        self.done = v;
        r.map(drop)
    }

    /// Queue pairs a slot's pieces use: all of them in order when split, else one, round-robin
    /// by index (NCCL `ncclIbCommBaseGetQpForRequest`).
    pub(super) fn qps_for(&self, index: u64, split: bool) -> std::ops::Range<usize> {
        if split {
            0..self.qps.len()
        } else {
            let q = (index % self.qps.len() as u64) as usize;
            q..q + 1
        }
    }
}
