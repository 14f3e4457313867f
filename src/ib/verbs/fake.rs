//! An in-process RDMA fabric with verbs semantics, for tests: devices with ports and GID tables,
//! memory regions over real process memory, completion queues and RC queue pairs between any
//! two devices of one [`FakeFabric`].
//!
//! What it models (InfiniBand Architecture Specification vol. 1, ch. 9-11): a queue pair's send
//! queue runs in order; an RDMA write copies into the peer's registered memory after key and
//! bounds checks (a bad local key fails with `LOC_PROT_ERR`, a bad remote key with
//! `REM_ACCESS_ERR`); a write with immediate also consumes a receive the peer posted and
//! completes there with the immediate, and waits (receiver not ready) while none is posted,
//! failing with `RNR_RETRY_EXC_ERR` after `rnr_retry` tries unless `rnr_retry` is 7 (for ever);
//! a write to a peer that is gone, unreachable (link down, wrong GID or LID) or not connected back
//! gets no acknowledgement and fails with `RETRY_EXC_ERR` after the real timeout
//! ([`crate::ib::params::time_to_failure`] of the queue pair's `timeout` and `retry_cnt`). The
//! first error moves the queue pair to the error state: every later request completes
//! `WR_FLUSH_ERR`. Work happens when a queue is posted to or any completion queue is polled;
//! an optional latency delays each write. A queue pair's peer dies when the peer's objects are
//! dropped, as when its process exits.

use std::any::Any;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{
    Completion, Cq, Device, DeviceAttr, Mr, PORT_ACTIVE, Pd, PortAttr, Qp, QpCaps, QpConnect,
    SendOp, SendWr, Verbs, VerbsError, WcOpcode, WcStatus,
};
use crate::ib::gid::{Gid, GidType, LinkLayer};
use crate::ib::params::time_to_failure;

/// A port of a fake device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakePort {
    /// What `query_port` returns.
    pub attr: PortAttr,
    /// The GID table with each entry's RoCE version.
    pub gids: Vec<(Gid, GidType)>,
}

impl FakePort {
    /// An ACTIVE 4X NDR InfiniBand port with LID `lid` (subnet manager at LID 1) and one
    /// link-local GID.
    pub fn infiniband(lid: u16) -> FakePort {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..10].copy_from_slice(&lid.to_be_bytes());
        g[15] = 1;
        FakePort {
            attr: PortAttr {
                state: PORT_ACTIVE,
                max_mtu: 5,
                active_mtu: 5,
                gid_tbl_len: 1,
                lid,
                sm_lid: 1,
                active_width: 2,
                active_speed: 128,
                phys_state: 5,
                link_layer: 1,
            },
            gids: vec![(Gid(g), GidType::V1)],
        }
    }

    /// An ACTIVE RoCE port whose netdev has IPv4 address `ip`: GIDs 0/1 link-local v1/v2, 2/3
    /// the IPv4-mapped address v1/v2 (the table mlx5 builds).
    pub fn roce(ip: [u8; 4]) -> FakePort {
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[12..16].copy_from_slice(&ip);
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..16].copy_from_slice(&ip);
        FakePort {
            attr: PortAttr {
                state: PORT_ACTIVE,
                max_mtu: 5,
                active_mtu: 5,
                gid_tbl_len: 4,
                lid: 0,
                sm_lid: 0,
                active_width: 2,
                active_speed: 64,
                phys_state: 5,
                link_layer: 2,
            },
            gids: vec![
                (Gid(ll), GidType::V1),
                (Gid(ll), GidType::V2),
                (Gid(v4), GidType::V1),
                (Gid(v4), GidType::V2),
            ],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QpState {
    Reset,
    Rts,
    Error,
}

struct PendingWr {
    wr: SendWr,
    posted: Instant,
    rnr_since: Option<Instant>,
}

struct QpEntry {
    dev: String,
    cq: u64,
    state: QpState,
    to: Option<QpConnect>,
    recvs: VecDeque<u64>,
    sq: VecDeque<PendingWr>,
    caps: QpCaps,
}

struct MrEntry {
    dev: String,
    addr: u64,
    len: usize,
}

struct DevEntry {
    ports: Vec<FakePort>,
    link_up: bool,
    /// `false` once [`FakeFabric::pull_cable`] pulled it.
    cabled: bool,
}

#[derive(Default)]
struct State {
    devices: BTreeMap<String, DevEntry>,
    next_key: u32,
    next_qpn: u32,
    next_cq: u64,
    mrs: HashMap<u32, MrEntry>,
    cqs: HashMap<u64, VecDeque<Completion>>,
    qps: HashMap<u32, QpEntry>,
    latency: Duration,
}

/// Outcome of trying the head of a send queue.
enum Step {
    Done,
    Wait,
    Fail(WcStatus),
}

impl State {
    fn covers(&self, key: u32, dev: &str, addr: u64, len: u32) -> bool {
        len == 0
            || self.mrs.get(&key).is_some_and(|m| {
                m.dev == dev && addr >= m.addr && addr + u64::from(len) <= m.addr + m.len as u64
            })
    }

    /// Whether the peer at `to` answers a queue pair of `dev`: both links up, the peer queue
    /// pair exists, is connected back to `qpn` and sits on a port with the addressed GID
    /// (global route) or LID.
    fn reachable(&self, qpn: u32, dev: &str, to: &QpConnect) -> bool {
        let Some(peer) = self.qps.get(&to.remote_qpn) else {
            return false;
        };
        let (Some(d), Some(pd)) = (self.devices.get(dev), self.devices.get(&peer.dev)) else {
            return false;
        };
        if !d.link_up || !pd.link_up || peer.state == QpState::Reset {
            return false;
        }
        let Some(back) = &peer.to else {
            return false;
        };
        if back.remote_qpn != qpn {
            return false;
        }
        let Some(port) = pd.ports.get(usize::from(back.port).wrapping_sub(1)) else {
            return false;
        };
        if to.global {
            port.gids.iter().any(|(g, _)| g.0 == to.remote_gid)
        } else {
            port.attr.lid == to.remote_lid
        }
    }

    fn try_head(&mut self, qpn: u32) -> Option<Step> {
        let now = Instant::now();
        let latency = self.latency;
        let qp = self.qps.get(&qpn)?;
        let p = qp.sq.front()?;
        let (wr, dev, to) = (p.wr, qp.dev.clone(), qp.to?);
        if !self.covers(wr.lkey, &dev, wr.addr, wr.len) {
            return Some(Step::Fail(WcStatus::LocalProtection));
        }
        if now < p.posted + latency {
            return Some(Step::Wait);
        }
        if !self.reachable(qpn, &dev, &to) {
            let give_up = time_to_failure(to.timeout, to.retry_cnt);
            return Some(match give_up {
                Some(t) if now >= p.posted + t => Step::Fail(WcStatus::RetryExceeded),
                _ => Step::Wait,
            });
        }
        let peer_dev = self.qps[&to.remote_qpn].dev.clone();
        if !self.covers(wr.rkey, &peer_dev, wr.remote_addr, wr.len) {
            return Some(Step::Fail(WcStatus::RemoteAccess));
        }
        if let SendOp::WriteImm(_) = wr.op
            && self.qps[&to.remote_qpn].recvs.is_empty()
        {
            // Receiver not ready: min_rnr_timer 12 is 0.64 ms between tries.
            let since = *self
                .qps
                .get_mut(&qpn)?
                .sq
                .front_mut()?
                .rnr_since
                .get_or_insert(now);
            let tries = now.duration_since(since).as_micros() / 640;
            return Some(if to.rnr_retry < 7 && tries > u128::from(to.rnr_retry) {
                Step::Fail(WcStatus::RnrRetryExceeded)
            } else {
                Step::Wait
            });
        }
        if wr.len > 0 {
            // SAFETY: both ranges lie in live registered regions (checked above); the verbs
            // contract makes their owners keep the memory valid while registered and leave
            // the target alone until the completion says it arrived.
            unsafe {
                std::ptr::copy(
                    wr.addr as *const u8,
                    wr.remote_addr as *mut u8,
                    wr.len as usize,
                )
            };
        }
        if let SendOp::WriteImm(imm) = wr.op {
            let peer = self.qps.get_mut(&to.remote_qpn)?;
            let wr_id = peer.recvs.pop_front()?;
            let cq = peer.cq;
            self.cqs.entry(cq).or_default().push_back(Completion {
                wr_id,
                status: WcStatus::Success,
                opcode: WcOpcode::RecvWithImm,
                byte_len: wr.len,
                imm: Some(imm),
                qpn: to.remote_qpn,
            });
        }
        Some(Step::Done)
    }

    /// Runs every queue pair's send queue as far as it goes.
    fn pump(&mut self) {
        let busy: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| !q.sq.is_empty())
            .map(|(n, _)| *n)
            .collect();
        for qpn in busy {
            loop {
                let failed = match self.qps.get(&qpn) {
                    Some(q) if q.state == QpState::Error => Some(WcStatus::Flushed),
                    Some(q) if q.sq.is_empty() => break,
                    Some(_) => match self.try_head(qpn) {
                        Some(Step::Done) => None,
                        Some(Step::Fail(s)) => Some(s),
                        Some(Step::Wait) | None => break,
                    },
                    None => break,
                };
                let Some(q) = self.qps.get_mut(&qpn) else {
                    break;
                };
                let Some(p) = q.sq.pop_front() else {
                    break;
                };
                let cq = q.cq;
                if let Some(status) = failed {
                    q.state = QpState::Error;
                    self.cqs.entry(cq).or_default().push_back(Completion {
                        wr_id: p.wr.wr_id,
                        status,
                        opcode: WcOpcode::RdmaWrite,
                        byte_len: 0,
                        imm: None,
                        qpn,
                    });
                } else if p.wr.signaled {
                    self.cqs.entry(cq).or_default().push_back(Completion {
                        wr_id: p.wr.wr_id,
                        status: WcStatus::Success,
                        opcode: WcOpcode::RdmaWrite,
                        byte_len: p.wr.len,
                        imm: None,
                        qpn,
                    });
                }
            }
        }
    }
}

/// A fabric every fake device is attached to.
#[derive(Clone, Default)]
pub struct FakeFabric {
    state: Arc<Mutex<State>>,
}

impl FakeFabric {
    /// An empty fabric.
    pub fn new() -> FakeFabric {
        FakeFabric::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds device `name` with `ports` (port 1 first).
    pub fn add_device(&self, name: &str, ports: Vec<FakePort>) {
        self.lock().devices.insert(
            name.to_string(),
            DevEntry {
                ports,
                link_up: true,
                cabled: true,
            },
        );
    }

    /// A host's view of the fabric: a verbs provider listing `devices`.
    pub fn host(&self, devices: &[&str]) -> crate::ib::Provider {
        crate::ib::Provider(Arc::new(FakeVerbs {
            fabric: self.clone(),
            devices: devices.iter().map(|d| d.to_string()).collect(),
        }))
    }

    /// Takes every link of device `name` down (`false`) or up: writes from or to it go
    /// unacknowledged, as with a path broken somewhere in the fabric; its ports still read
    /// ACTIVE.
    pub fn set_link(&self, name: &str, up: bool) {
        if let Some(d) = self.lock().devices.get_mut(name) {
            d.link_up = up;
        }
    }

    /// Pulls device `name`'s cable: its link goes down as with [`FakeFabric::set_link`], and
    /// its ports read DOWN (physical state Polling).
    pub fn pull_cable(&self, name: &str) {
        if let Some(d) = self.lock().devices.get_mut(name) {
            d.link_up = false;
            d.cabled = false;
        }
    }

    /// Delays every write by `latency` after it is posted.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }
}

struct FakeVerbs {
    fabric: FakeFabric,
    devices: Vec<String>,
}

impl Verbs for FakeVerbs {
    fn describe(&self) -> String {
        "in-process fake fabric".into()
    }

    fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        Ok(self.devices.clone())
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Device>, VerbsError> {
        if !self.devices.iter().any(|d| d == name) || !self.fabric.lock().devices.contains_key(name)
        {
            return Err(VerbsError::NoDevice(name.to_string()));
        }
        Ok(Arc::new(FakeDevice {
            fabric: self.fabric.clone(),
            name: name.to_string(),
        }))
    }

    fn dmabuf(&self) -> bool {
        false
    }
}

struct FakeDevice {
    fabric: FakeFabric,
    name: String,
}

impl FakeDevice {
    fn port(&self, port: u8) -> Result<FakePort, VerbsError> {
        self.fabric
            .lock()
            .devices
            .get(&self.name)
            .and_then(|d| {
                let mut p = d.ports.get(usize::from(port).wrapping_sub(1)).cloned()?;
                if !d.cabled {
                    // DOWN, physical state Polling.
                    p.attr.state = 1;
                    p.attr.phys_state = 2;
                }
                Some(p)
            })
            .ok_or_else(|| VerbsError::call("ibv_query_port", &self.name, libc::EINVAL))
    }
}

impl Device for FakeDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn query_device(&self) -> Result<DeviceAttr, VerbsError> {
        let ports = self
            .fabric
            .lock()
            .devices
            .get(&self.name)
            .map_or(0, |d| d.ports.len());
        Ok(DeviceAttr {
            fw_ver: "28.39.1002".into(),
            vendor_id: 0x02c9,
            vendor_part_id: 4129,
            max_qp: 131_072,
            max_cqe: 4_194_303,
            max_mr_size: u64::MAX,
            phys_port_cnt: ports as u8,
            ..DeviceAttr::default()
        })
    }

    fn query_port(&self, port: u8) -> Result<PortAttr, VerbsError> {
        self.port(port).map(|p| p.attr)
    }

    fn query_gid(&self, port: u8, index: usize) -> Result<Gid, VerbsError> {
        let p = self.port(port)?;
        if index >= p.attr.gid_tbl_len.max(0) as usize {
            return Err(VerbsError::call("ibv_query_gid", &self.name, libc::EINVAL));
        }
        Ok(p.gids.get(index).map(|g| g.0).unwrap_or_default())
    }

    fn gid_type(&self, port: u8, index: usize) -> Option<GidType> {
        self.port(port).ok()?.gids.get(index).map(|g| g.1)
    }

    fn alloc_pd(self: Arc<Self>) -> Result<Arc<dyn Pd>, VerbsError> {
        Ok(Arc::new(FakePd { dev: self }))
    }
}

struct FakePd {
    dev: Arc<FakeDevice>,
}

impl Pd for FakePd {
    /// The fabric copies into and out of the region on RDMA writes: the trait's contract keeps
    /// those copies inside live memory.
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize) -> Result<Box<dyn Mr>, VerbsError> {
        let mut s = self.dev.fabric.lock();
        s.next_key += 1;
        let key = s.next_key;
        s.mrs.insert(
            key,
            MrEntry {
                dev: self.dev.name.clone(),
                addr: addr as u64,
                len,
            },
        );
        Ok(Box::new(FakeMr {
            fabric: self.dev.fabric.clone(),
            key,
            addr: addr as u64,
        }))
    }

    fn create_cq(&self, _depth: usize) -> Result<Arc<dyn Cq>, VerbsError> {
        let mut s = self.dev.fabric.lock();
        s.next_cq += 1;
        let id = s.next_cq;
        s.cqs.insert(id, VecDeque::new());
        Ok(Arc::new(FakeCq {
            fabric: self.dev.fabric.clone(),
            id,
        }))
    }

    fn create_qp(&self, cq: &Arc<dyn Cq>, caps: QpCaps) -> Result<Box<dyn Qp>, VerbsError> {
        let cq_id = cq
            .as_any()
            .downcast_ref::<FakeCq>()
            .map(|c| c.id)
            .ok_or_else(|| VerbsError::call("ibv_create_qp", &self.dev.name, libc::EINVAL))?;
        let mut s = self.dev.fabric.lock();
        s.next_qpn += 1;
        let qpn = 0x100 + s.next_qpn;
        s.qps.insert(
            qpn,
            QpEntry {
                dev: self.dev.name.clone(),
                cq: cq_id,
                state: QpState::Reset,
                to: None,
                recvs: VecDeque::new(),
                sq: VecDeque::new(),
                caps,
            },
        );
        Ok(Box::new(FakeQp {
            dev: self.dev.clone(),
            qpn,
            _cq: cq.clone(),
        }))
    }
}

struct FakeMr {
    fabric: FakeFabric,
    key: u32,
    addr: u64,
}

impl Drop for FakeMr {
    fn drop(&mut self) {
        self.fabric.lock().mrs.remove(&self.key);
    }
}

impl Mr for FakeMr {
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn addr(&self) -> u64 {
        self.addr
    }
}

struct FakeCq {
    fabric: FakeFabric,
    id: u64,
}

impl Drop for FakeCq {
    fn drop(&mut self) {
        self.fabric.lock().cqs.remove(&self.id);
    }
}

impl Cq for FakeCq {
    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, VerbsError> {
        let mut s = self.fabric.lock();
        s.pump();
        let q = s.cqs.entry(self.id).or_default();
        let n = max.min(q.len());
        out.extend(q.drain(..n));
        Ok(n)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct FakeQp {
    dev: Arc<FakeDevice>,
    qpn: u32,
    _cq: Arc<dyn Cq>,
}

impl Drop for FakeQp {
    fn drop(&mut self) {
        self.dev.fabric.lock().qps.remove(&self.qpn);
    }
}

impl Qp for FakeQp {
    fn qpn(&self) -> u32 {
        self.qpn
    }

    fn connect(&self, to: &QpConnect) -> Result<(), VerbsError> {
        let port = self.dev.port(to.port)?;
        let einval = || VerbsError::call("ibv_modify_qp", &self.dev.name, libc::EINVAL);
        if to.mtu == 0 || to.mtu > port.attr.active_mtu {
            return Err(einval());
        }
        if port.attr.link() == Some(LinkLayer::Ethernet)
            && (!to.global || usize::from(to.gid_index) >= port.gids.len())
        {
            return Err(einval());
        }
        let mut s = self.dev.fabric.lock();
        let qp = s.qps.get_mut(&self.qpn).ok_or_else(einval)?;
        qp.to = Some(*to);
        qp.state = QpState::Rts;
        Ok(())
    }

    fn post_send(&self, wrs: &[SendWr]) -> Result<(), VerbsError> {
        let mut s = self.dev.fabric.lock();
        let now = Instant::now();
        let qp = s
            .qps
            .get_mut(&self.qpn)
            .ok_or_else(|| VerbsError::call("ibv_post_send", &self.dev.name, libc::EINVAL))?;
        if qp.state == QpState::Reset {
            return Err(VerbsError::call(
                "ibv_post_send",
                &self.dev.name,
                libc::EINVAL,
            ));
        }
        if qp.sq.len() + wrs.len() > qp.caps.max_send_wr as usize {
            return Err(VerbsError::call(
                "ibv_post_send",
                &self.dev.name,
                libc::ENOMEM,
            ));
        }
        qp.sq.extend(wrs.iter().map(|&wr| PendingWr {
            wr,
            posted: now,
            rnr_since: None,
        }));
        s.pump();
        Ok(())
    }

    fn post_recv(&self, wr_id: u64) -> Result<(), VerbsError> {
        let mut s = self.dev.fabric.lock();
        let qp = s
            .qps
            .get_mut(&self.qpn)
            .ok_or_else(|| VerbsError::call("ibv_post_recv", &self.dev.name, libc::EINVAL))?;
        if qp.recvs.len() >= qp.caps.max_recv_wr as usize {
            return Err(VerbsError::call(
                "ibv_post_recv",
                &self.dev.name,
                libc::ENOMEM,
            ));
        }
        qp.recvs.push_back(wr_id);
        s.pump();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
