//! The two ends of an IB connection (the protocol of this module's parent): [`IbSender`] writes
//! posted slots into the receiver's slots named by its clear-to-send entries; [`IbReceiver`]
//! sends those entries for free slots and shows slots whose every piece arrived.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::buf::RegBuf;
use super::{CHUNK_ALIGN, CTS_BYTES, completion_failed, verbs_failed};
use crate::conn::NSLOTS;
use crate::device::MemKind;
use crate::ib::endpoint::{PortHandle, QpAddr};
use crate::ib::params::IbParams;
use crate::ib::verbs::{
    Completion, Cq, PORT_ACTIVE, Qp, QpCaps, SendOp, SendWr, WcOpcode, WcStatus,
};
use crate::transport::{PeerState, PollInterest, RecvEnd, SendEnd, TransportError};

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
struct Link {
    // Drop order: queue pairs before the completion queue they use.
    qps: Vec<Box<dyn Qp>>,
    cq: Arc<dyn Cq>,
    port: Arc<PortHandle>,
    peer: String,
    done: Vec<Completion>,
    /// When the port's state was last read or the link last moved (see [`Link::watch_port`]).
    watched: Instant,
}

/// How long an end waits with nothing moving before it reads its port's state again.
const PORT_WATCH: Duration = Duration::from_millis(100);

impl Link {
    fn new(port: Arc<PortHandle>, nqps: usize, peer: &str) -> Result<Link, TransportError> {
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

    fn addrs(&self) -> Vec<QpAddr> {
        self.qps.iter().map(|q| self.port.addr(q.qpn())).collect()
    }

    fn fail(&self, e: &crate::ib::verbs::VerbsError) -> TransportError {
        verbs_failed(&self.peer, &self.port.label(), e)
    }

    /// Connects queue pair `i` to the peer's queue pair `i` and preposts `recvs` receives on
    /// each.
    fn connect(
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
    fn watch_port(&mut self, moved: bool) -> Result<(), TransportError> {
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

    fn qp_index(&self, qpn: u32) -> Option<usize> {
        self.qps.iter().position(|q| q.qpn() == qpn)
    }

    /// Polls the completion queue into `self.done`.
    fn poll(&mut self) -> Result<(), TransportError> {
        self.done.clear();
        let mut v = std::mem::take(&mut self.done);
        let r = self.cq.poll(&mut v, 64).map_err(|e| self.fail(&e));
        self.done = v;
        r.map(drop)
    }

    /// Queue pairs a slot's pieces use: all of them in order when split, else one, round-robin
    /// by index (NCCL `ncclIbCommBaseGetQpForRequest`).
    fn qps_for(&self, index: u64, split: bool) -> std::ops::Range<usize> {
        if split {
            0..self.qps.len()
        } else {
            let q = (index % self.qps.len() as u64) as usize;
            q..q + 1
        }
    }
}

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
        let slots = match slots {
            // SAFETY: the caller's contract.
            Some(p) => unsafe { RegBuf::external(pd, p, NSLOTS * slot_bytes) },
            None => RegBuf::new(pd, NSLOTS * slot_bytes, &name),
        }
        .map_err(err)?;
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

    /// Slots whose writes have all completed, counted from the first: the caller may reuse
    /// slot `i % NSLOTS` once this passes `i`.
    pub(crate) fn completed(&self) -> u64 {
        self.completed
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
        let slots = match slots {
            // SAFETY: the caller's contract.
            Some(p) => unsafe { RegBuf::external(pd, p, NSLOTS * slot_bytes) },
            None => RegBuf::new(pd, NSLOTS * slot_bytes, &name),
        }
        .map_err(err)?;
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

    /// Slots wholly arrived, in order, counted from the first (at least the slots released):
    /// slot `i` is in place once this passes `i`, with [`IbReceiver::arrived_bytes`] bytes,
    /// even while earlier slots are not yet released.
    pub(crate) fn arrived(&self) -> u64 {
        let mut i = self.released;
        while i < self.offered && self.left[(i % NSLOTS as u64) as usize] == 0 {
            i += 1;
        }
        i
    }

    /// Bytes that arrived in slot index `i` (valid while `released <= i < arrived()`).
    pub(crate) fn arrived_bytes(&self, i: u64) -> usize {
        self.size[(i % NSLOTS as u64) as usize].min(self.slot_bytes)
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
