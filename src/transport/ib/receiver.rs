//! [`IbReceiver`]: the receiving end of an IB connection (the protocol of this module's parent).
//! It sends clear-to-send entries for its free slots and shows slots whose every piece arrived.

use std::sync::Arc;

use super::buf::RegBuf;
use super::link::{IbAddr, Link};
use super::{CTS_BYTES, completion_failed, verbs_failed};
use crate::conn::NSLOTS;
use crate::device::MemKind;
use crate::ib::endpoint::PortHandle;
use crate::ib::params::IbParams;
use crate::ib::verbs::{SendOp, SendWr, WcOpcode, WcStatus};
use crate::transport::{InPlaceRecv, PeerState, PollInterest, RecvEnd, TransportError};

/// The receiving end.
pub(crate) struct IbReceiver {
    link: Link,
    slots: RegBuf,
    entries: RegBuf,
    slot_bytes: usize,
    split: bool,
    /// The sender's CTS FIFO (address, rkey), once it answered.
    fifo: Option<(u64, u32)>,
    /// Per queue pair: pieces that arrived on it.
    got: Vec<u64>,
    left: [u32; NSLOTS],
    size: [usize; NSLOTS],
    released: u64,
    offered: u64,
    failed: Option<TransportError>,
}

impl IbReceiver {
    /// A receiving end on `port` for slots of `slot_bytes` bytes, waiting for its sender;
    /// `peer` names the sender in errors.
    ///
    /// Errors: [`TransportError::Fabric`] when a verb fails.
    pub(crate) fn new(
        port: Arc<PortHandle>,
        params: &IbParams,
        slot_bytes: usize,
        peer: &str,
    ) -> Result<IbReceiver, TransportError> {
        // SAFETY: no caller memory.
        unsafe { IbReceiver::with_slots(port, params, slot_bytes, peer, None) }
    }

    /// As [`IbReceiver::new`], receiving into the caller's `NSLOTS × slot_bytes` slots at
    /// `slots` (a GPU FIFO's pinned slots, which its kernel reads in place) instead of its own.
    ///
    /// # Safety
    /// `slots` (when given) is host memory of `NSLOTS × slot_bytes` bytes that outlives this
    /// end; nobody writes a slot between its [`RecvEnd::release`] and its arrival.
    ///
    /// Errors: as [`IbReceiver::new`].
    pub(crate) unsafe fn with_slots(
        port: Arc<PortHandle>,
        params: &IbParams,
        slot_bytes: usize,
        peer: &str,
        slots: Option<*mut u8>,
    ) -> Result<IbReceiver, TransportError> {
        let link = Link::new(port, params.qps_per_connection, peer)?;
        let name = link.port.label();
        let err = |e| verbs_failed(peer, &name, &e);
        let pd = &*link.port.pd;
        // SAFETY: the caller's contract.
        let slots = unsafe { RegBuf::slots(pd, slots, NSLOTS * slot_bytes, &name) }.map_err(err)?;
        let entries = RegBuf::new(pd, NSLOTS * CTS_BYTES, &name).map_err(err)?;
        let nqps = link.qps.len();
        Ok(IbReceiver {
            link,
            slots,
            entries,
            slot_bytes,
            split: params.split_data_on_qps,
            fifo: None,
            got: vec![0; nqps],
            left: [0; NSLOTS],
            size: [0; NSLOTS],
            released: 0,
            offered: 0,
            failed: None,
        })
    }

    /// The local port (`mlx5_0:1`).
    pub(crate) fn port(&self) -> String {
        self.link.port.label()
    }

    /// What the sender needs: this end's queue pairs and slots.
    pub(crate) fn addr(&self) -> IbAddr {
        IbAddr {
            qps: self.link.addrs(),
            addr: self.slots.mr().addr(),
            rkey: self.slots.mr().rkey(),
            port: self.link.port.label(),
        }
    }

    /// Connects to the sender's answer and offers every slot.
    ///
    /// Errors: as [`IbSender::new`].
    pub(crate) fn connect(
        &mut self,
        sender: &IbAddr,
        params: &IbParams,
    ) -> Result<(), TransportError> {
        self.link.connect(sender, params, NSLOTS)?;
        self.fifo = Some((sender.addr, sender.rkey));
        for _ in 0..NSLOTS {
            self.offer()?;
        }
        Ok(())
    }

    /// Sends the clear-to-send entry of the next index (NCCL `ncclIbPostFifo`).
    fn offer(&mut self) -> Result<(), TransportError> {
        let Some((fifo, fifo_rkey)) = self.fifo else {
            return Ok(());
        };
        let idx = self.offered;
        let s = (idx % NSLOTS as u64) as usize;
        let slot_addr = self.slots.mr().addr() + (s * self.slot_bytes) as u64;
        // SAFETY: entry s lies inside the staging buffer; the HCA read the previous entry of
        // slot s before the sender could use it, which the release of that slot implies.
        unsafe {
            let e = self.entries.ptr().add(s * CTS_BYTES);
            std::ptr::write_volatile(e.cast::<u64>(), slot_addr);
            std::ptr::write_volatile(e.add(8).cast::<u32>(), self.slots.mr().rkey());
            std::ptr::write_volatile(e.add(12).cast::<u32>(), self.slot_bytes as u32);
            std::ptr::write_volatile(e.add(16).cast::<u64>(), idx);
        }
        self.left[s] = self.link.qps_for(idx, self.split).len() as u32;
        self.size[s] = 0;
        let q = (idx % self.link.qps.len() as u64) as usize;
        let wr = SendWr {
            wr_id: idx,
            op: SendOp::WriteImm(idx as u32),
            addr: self.entries.ptr() as u64 + (s * CTS_BYTES) as u64,
            len: CTS_BYTES as u32,
            lkey: self.entries.mr().lkey(),
            remote_addr: fifo + (s * CTS_BYTES) as u64,
            rkey: fifo_rkey,
            signaled: true,
        };
        self.link.qps[q]
            .post_send(&[wr])
            .map_err(|e| self.link.fail(&e))?;
        self.offered += 1;
        Ok(())
    }

    fn step(&mut self) -> Result<bool, TransportError> {
        self.link.poll()?;
        let mut moved = false;
        for i in 0..self.link.done.len() {
            let c = self.link.done[i];
            if c.status != WcStatus::Success {
                let what = match c.opcode {
                    WcOpcode::RecvWithImm => "receiving data",
                    _ => "writing a clear-to-send entry",
                };
                return Err(completion_failed(
                    &self.link.peer,
                    &self.link.port.label(),
                    what,
                    c.status,
                ));
            }
            if c.opcode != WcOpcode::RecvWithImm {
                continue;
            }
            let q = self
                .link
                .qp_index(c.qpn)
                .ok_or_else(|| TransportError::Malformed {
                    peer: self.link.peer.clone(),
                    detail: format!("a completion on queue pair {} of another connection", c.qpn),
                })?;
            let nq = self.link.qps.len() as u64;
            let k = self.got[q];
            let idx = if self.split { k } else { q as u64 + k * nq };
            self.got[q] += 1;
            if idx < self.released || idx >= self.offered {
                return Err(TransportError::Malformed {
                    peer: self.link.peer.clone(),
                    detail: format!(
                        "data for slot index {idx} outside the offered {}..{}",
                        self.released, self.offered
                    ),
                });
            }
            let s = (idx % NSLOTS as u64) as usize;
            self.size[s] = c.imm.unwrap_or(0) as usize;
            self.left[s] = self.left[s].saturating_sub(1);
            self.link.qps[q]
                .post_recv(q as u64)
                .map_err(|e| self.link.fail(&e))?;
            moved = true;
        }
        Ok(moved)
    }
}

impl RecvEnd for IbReceiver {
    fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    fn slot_kind(&self) -> MemKind {
        MemKind::Host
    }

    fn in_memory(&self) -> bool {
        false
    }

    fn peek(&mut self) -> Option<(*const u8, usize)> {
        if self.released >= self.offered {
            return None;
        }
        let s = (self.released % NSLOTS as u64) as usize;
        (self.left[s] == 0).then(|| {
            // SAFETY: s < NSLOTS, so the slot lies inside the buffer.
            let p = unsafe { self.slots.ptr().add(s * self.slot_bytes) };
            (p.cast_const(), self.size[s].min(self.slot_bytes))
        })
    }

    fn release(&mut self) {
        self.released += 1;
        if self.failed.is_none()
            && let Err(e) = self.offer()
        {
            self.failed = Some(e);
        }
    }

    fn progress(&mut self) -> Result<bool, TransportError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.step().and_then(|moved| {
            self.link.watch_port(moved)?;
            Ok(moved)
        });
        r.inspect_err(|e| self.failed = Some(e.clone()))
    }

    fn poll_interest(&self) -> Vec<PollInterest> {
        Vec::new()
    }

    fn peer_state(&self) -> PeerState {
        PeerState::Alive
    }

    fn finish(&mut self) {}
}

impl InPlaceRecv for IbReceiver {
    /// Slots wholly arrived, in order, counted from the first (at least the slots released):
    /// slot `i` is in place once this passes `i`, with [`InPlaceRecv::arrived_bytes`] bytes,
    /// even while earlier slots are not yet released.
    fn arrived(&mut self) -> u64 {
        let mut i = self.released;
        while i < self.offered && self.left[(i % NSLOTS as u64) as usize] == 0 {
            i += 1;
        }
        i
    }

    /// Bytes that arrived in slot index `i` (valid while `released <= i < arrived()`).
    fn arrived_bytes(&self, i: u64) -> usize {
        self.size[(i % NSLOTS as u64) as usize].min(self.slot_bytes)
    }

    /// A slot arrives whole or not at all, as the proxy sees it.
    fn receiving(&self) -> bool {
        false
    }

    /// IB has no goodbye, so no close without one either.
    fn closed_without_goodbye(&self) -> bool {
        false
    }

    fn via(&self) -> String {
        format!("IB ({})", self.port())
    }

    /// IB has no goodbye (see [`InPlaceSend::goodbye`] for [`super::IbSender`]).
    fn goodbye(&mut self, _aborted: bool) {}
}
