//! [`IbSender`]: the sending end of an IB connection (the protocol of this module's parent). It
//! writes posted slots into the receiver's slots named by the receiver's clear-to-send entries.

use std::sync::Arc;

use super::buf::RegBuf;
use super::link::{IbAddr, Link};
use super::{CHUNK_ALIGN, CTS_BYTES, completion_failed, verbs_failed};
use crate::conn::NSLOTS;
use crate::device::MemKind;
use crate::ib::endpoint::PortHandle;
use crate::ib::params::IbParams;
use crate::ib::verbs::{SendOp, SendWr, WcOpcode, WcStatus};
use crate::transport::{InPlaceSend, PeerState, PollInterest, SendEnd, TransportError};

/// The sending end.
pub(crate) struct IbSender {
    link: Link,
    slots: RegBuf,
    cts: RegBuf,
    slot_bytes: usize,
    split: bool,
    sizes: [usize; NSLOTS],
    /// Per slot: the receiver's slot (address, rkey, size) once its entry arrived.
    ready: [Option<(u64, u32, u32)>; NSLOTS],
    /// Per slot: pieces whose writes have not completed.
    left: [u32; NSLOTS],
    posted: u64,
    sent: u64,
    completed: u64,
    failed: Option<TransportError>,
}

impl IbSender {
    /// Connects to the receiver that offered `remote` over `port`, with `params`' queue pairs
    /// and knobs; `peer` names the receiver in errors.
    ///
    /// Errors: [`TransportError::Fabric`] when a verb fails, [`TransportError::Malformed`]
    /// when the offer's queue pairs do not match this end's.
    pub(crate) fn new(
        port: Arc<PortHandle>,
        params: &IbParams,
        slot_bytes: usize,
        peer: &str,
        remote: &IbAddr,
    ) -> Result<IbSender, TransportError> {
        // SAFETY: no caller memory.
        unsafe { IbSender::with_slots(port, params, slot_bytes, peer, remote, None) }
    }

    /// As [`IbSender::new`], sending from the caller's `NSLOTS × slot_bytes` slots at `slots`
    /// (a GPU FIFO's pinned slots, which the proxy posts in place) instead of its own.
    ///
    /// # Safety
    /// `slots` (when given) is host memory of `NSLOTS × slot_bytes` bytes that outlives this
    /// end; a slot's bytes stay unchanged from [`SendEnd::post`] until [`IbSender::completed`]
    /// passes it.
    ///
    /// Errors: as [`IbSender::new`].
    pub(crate) unsafe fn with_slots(
        port: Arc<PortHandle>,
        params: &IbParams,
        slot_bytes: usize,
        peer: &str,
        remote: &IbAddr,
        slots: Option<*mut u8>,
    ) -> Result<IbSender, TransportError> {
        let link = Link::new(port, params.qps_per_connection, peer)?;
        let name = link.port.label();
        let err = |e| verbs_failed(peer, &name, &e);
        let pd = &*link.port.pd;
        // SAFETY: the caller's contract.
        let slots = unsafe { RegBuf::slots(pd, slots, NSLOTS * slot_bytes, &name) }.map_err(err)?;
        let cts = RegBuf::new(pd, NSLOTS * CTS_BYTES, &name).map_err(err)?;
        link.connect(remote, params, NSLOTS)?;
        Ok(IbSender {
            link,
            slots,
            cts,
            slot_bytes,
            split: params.split_data_on_qps,
            sizes: [0; NSLOTS],
            ready: [None; NSLOTS],
            left: [0; NSLOTS],
            posted: 0,
            sent: 0,
            completed: 0,
            failed: None,
        })
    }

    /// The local port (`mlx5_0:1`).
    pub(crate) fn port(&self) -> String {
        self.link.port.label()
    }

    /// What the receiver needs: this end's queue pairs and CTS FIFO.
    pub(crate) fn addr(&self) -> IbAddr {
        IbAddr {
            qps: self.link.addrs(),
            addr: self.cts.mr().addr(),
            rkey: self.cts.mr().rkey(),
            port: self.link.port.label(),
        }
    }

    fn malformed(&self, detail: String) -> TransportError {
        TransportError::Malformed {
            peer: self.link.peer.clone(),
            detail,
        }
    }

    /// A clear-to-send entry arrived for index `imm` (low 32 bits).
    fn on_cts(&mut self, qp: usize, imm: u32) -> Result<(), TransportError> {
        let s = imm as usize % NSLOTS;
        // SAFETY: the entry lies inside the CTS FIFO (s < NSLOTS); its receive completion
        // means the receiver's write of it has landed, and the receiver writes slot s again
        // only after this end has sent index imm (read below first).
        let (addr, rkey, size, idx) = unsafe {
            let e = self.cts.ptr().add(s * CTS_BYTES);
            (
                std::ptr::read_volatile(e.cast::<u64>()),
                std::ptr::read_volatile(e.add(8).cast::<u32>()),
                std::ptr::read_volatile(e.add(12).cast::<u32>()),
                std::ptr::read_volatile(e.add(16).cast::<u64>()),
            )
        };
        if idx as u32 != imm || addr == 0 || rkey == 0 || size == 0 {
            return Err(self.malformed(format!(
                "clear-to-send entry {imm} reads index {idx}, address {addr:#x}, rkey {rkey:#x}, size {size}"
            )));
        }
        self.ready[s] = Some((addr, rkey, size));
        self.link.qps[qp]
            .post_recv(qp as u64)
            .map_err(|e| self.link.fail(&e))
    }

    /// Writes every posted slot whose entry has arrived.
    fn send_ready(&mut self) -> Result<bool, TransportError> {
        let mut moved = false;
        while self.sent < self.posted {
            let s = (self.sent % NSLOTS as u64) as usize;
            let Some((addr, rkey, size)) = self.ready[s] else {
                break;
            };
            let n = self.sizes[s];
            if n > size as usize {
                return Err(
                    self.malformed(format!("its slot holds {size} bytes, this end sends {n}"))
                );
            }
            let qps = self.link.qps_for(self.sent, self.split);
            let pieces = qps.len();
            // NCCL ncclIbMultiSend: equal chunks, rounded up to 128 bytes.
            let chunk = n.div_ceil(pieces).div_ceil(CHUNK_ALIGN) * CHUNK_ALIGN;
            let local = self.slots.ptr() as u64 + (s * self.slot_bytes) as u64;
            for (k, q) in qps.enumerate() {
                let off = (k * chunk).min(n);
                let len = chunk.min(n - off);
                let wr = SendWr {
                    wr_id: self.sent,
                    op: SendOp::WriteImm(n as u32),
                    addr: local + off as u64,
                    len: len as u32,
                    lkey: self.slots.mr().lkey(),
                    remote_addr: addr + off as u64,
                    rkey,
                    signaled: true,
                };
                self.link.qps[q]
                    .post_send(&[wr])
                    .map_err(|e| self.link.fail(&e))?;
            }
            self.left[s] = pieces as u32;
            self.ready[s] = None;
            self.sent += 1;
            moved = true;
        }
        Ok(moved)
    }

    fn step(&mut self) -> Result<bool, TransportError> {
        self.link.poll()?;
        let mut moved = false;
        for i in 0..self.link.done.len() {
            let c = self.link.done[i];
            let what = match c.opcode {
                WcOpcode::RecvWithImm => "receiving a clear-to-send entry",
                _ => "RDMA write of a slot",
            };
            if c.status != WcStatus::Success {
                return Err(completion_failed(
                    &self.link.peer,
                    &self.link.port.label(),
                    what,
                    c.status,
                ));
            }
            match c.opcode {
                WcOpcode::RecvWithImm => {
                    let q = self.link.qp_index(c.qpn).unwrap_or(0);
                    self.on_cts(q, c.imm.unwrap_or(0))?;
                }
                _ => {
                    let s = (c.wr_id % NSLOTS as u64) as usize;
                    self.left[s] = self.left[s].saturating_sub(1);
                }
            }
            moved = true;
        }
        while self.completed < self.sent
            && self.left[(self.completed % NSLOTS as u64) as usize] == 0
        {
            self.completed += 1;
            moved = true;
        }
        Ok(self.send_ready()? || moved)
    }
}

impl SendEnd for IbSender {
    fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    fn slot_kind(&self) -> MemKind {
        MemKind::Host
    }

    fn in_memory(&self) -> bool {
        false
    }

    fn acquire(&mut self) -> Option<*mut u8> {
        if self.posted - self.completed >= NSLOTS as u64 {
            return None;
        }
        let s = (self.posted % NSLOTS as u64) as usize;
        // SAFETY: s < NSLOTS, so the slot lies inside the buffer.
        Some(unsafe { self.slots.ptr().add(s * self.slot_bytes) })
    }

    fn post(&mut self, nbytes: usize) {
        self.sizes[(self.posted % NSLOTS as u64) as usize] = nbytes.min(self.slot_bytes);
        self.posted += 1;
        if self.failed.is_none()
            && let Err(e) = self.send_ready()
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

    fn pending(&self) -> bool {
        self.completed < self.posted
    }

    fn peer_state(&self) -> PeerState {
        PeerState::Alive
    }

    fn finish(&mut self) {}
}

impl InPlaceSend for IbSender {
    /// Slots whose writes have all completed, counted from the first: the caller may reuse
    /// slot `i % NSLOTS` once this passes `i`.
    fn completed(&mut self) -> u64 {
        self.completed
    }

    fn via(&self) -> String {
        format!("IB ({})", self.port())
    }

    /// IB has no goodbye: the peer learns from its next write (retry counter exceeded) or its
    /// deadline.
    fn goodbye(&mut self, _aborted: bool) {}
}
