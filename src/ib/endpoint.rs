//! A port opened for traffic, and connecting queue pairs between two of them: what the IB
//! transport and the active tests share. The exchange follows NCCL (src/transport/net_ib/
//! connect.cc): each side sends its queue pair numbers, LID, the GID it picked
//! ([`super::gid::nccl_gid_index`]), link layer and active MTU; each side moves its queue pairs
//! to RTS against the other's (path MTU the smaller of the two, GRH on RoCE).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::gid::{Gid, GidPrefs, GidTable, GidType, LinkLayer, nccl_gid_index};
use super::params::IbParams;
use super::verbs::{Device, PORT_ACTIVE, Pd, PortAttr, Qp, QpConnect, Verbs, VerbsError};

/// A port's GID table as the verbs see it (NCCL reads GIDs with `ibv_query_gid` and their
/// RoCE version from sysfs, which [`Device::gid_type`] does).
struct VerbsGids<'a> {
    dev: &'a dyn Device,
    port: u8,
    len: usize,
}

impl GidTable for VerbsGids<'_> {
    fn len(&self) -> usize {
        self.len
    }
    fn gid(&self, i: usize) -> Gid {
        self.dev.query_gid(self.port, i).unwrap_or_default()
    }
    fn gid_type(&self, i: usize) -> Option<GidType> {
        self.dev.gid_type(self.port, i)
    }
}

/// An opened, ACTIVE port with a protection domain.
pub(crate) struct PortHandle {
    /// The device.
    pub(crate) dev: Arc<dyn Device>,
    /// Its protection domain.
    pub(crate) pd: Arc<dyn Pd>,
    /// Port number.
    pub(crate) port: u8,
    /// `ibv_query_port`.
    pub(crate) attr: PortAttr,
    /// The GID index NCCL would use.
    pub(crate) gid_index: usize,
    /// That GID.
    pub(crate) gid: Gid,
}

impl PortHandle {
    /// Opens `port` of device `name`.
    ///
    /// Errors: [`VerbsError`] from the verbs, or [`VerbsError::Call`] with `ENETDOWN` when the
    /// port is not ACTIVE or its link layer is neither InfiniBand nor Ethernet.
    pub(crate) fn open(
        verbs: &dyn Verbs,
        name: &str,
        port: u8,
        prefs: &GidPrefs,
    ) -> Result<PortHandle, VerbsError> {
        let dev = verbs.open(name)?;
        let attr = dev.query_port(port)?;
        let Some(link) = attr.link() else {
            return Err(VerbsError::call("ibv_query_port", name, libc::ENETDOWN));
        };
        if attr.state != PORT_ACTIVE {
            return Err(VerbsError::call("ibv_query_port", name, libc::ENETDOWN));
        }
        let table = VerbsGids {
            dev: &*dev,
            port,
            len: attr.gid_tbl_len.max(0) as usize,
        };
        let gid_index = nccl_gid_index(link, &table, prefs);
        let gid = dev.query_gid(port, gid_index)?;
        let pd = dev.clone().alloc_pd()?;
        Ok(PortHandle {
            dev,
            pd,
            port,
            attr,
            gid_index,
            gid,
        })
    }

    /// `mlx5_0:1`.
    pub(crate) fn label(&self) -> String {
        format!("{}:{}", self.dev.name(), self.port)
    }

    /// The address a peer connects a queue pair `qpn` of this port to.
    pub(crate) fn addr(&self, qpn: u32) -> QpAddr {
        QpAddr {
            qpn,
            lid: self.attr.lid,
            gid: self.gid.0,
            link_layer: self.attr.link_layer,
            mtu: self.attr.active_mtu,
        }
    }

    /// Brings `qp` (of this port) to RTS against `remote`, with the queue-pair knobs in
    /// `params` (NCCL `ncclIbQpInit`/`ncclIbQpRtr`/`ncclIbQpRts`).
    ///
    /// Errors: [`VerbsError::Call`] from `ibv_modify_qp`; `EPROTO` when the two ports' link
    /// layers differ.
    pub(crate) fn connect(
        &self,
        qp: &dyn Qp,
        remote: &QpAddr,
        params: &IbParams,
    ) -> Result<(), VerbsError> {
        if remote.link_layer != self.attr.link_layer {
            return Err(VerbsError::call(
                "ibv_modify_qp",
                self.dev.name(),
                libc::EPROTO,
            ));
        }
        let roce = self.attr.link() == Some(LinkLayer::Ethernet);
        let remote_gid = Gid(remote.gid);
        qp.connect(&QpConnect {
            port: self.port,
            pkey_index: params.pkey_index,
            mtu: self.attr.active_mtu.min(remote.mtu),
            remote_qpn: remote.qpn,
            remote_lid: remote.lid,
            remote_gid: remote.gid,
            // RoCE always routes by GID; InfiniBand only to a routable (FLID) GID.
            global: roce || (self.gid.flid() != 0 && remote_gid.flid() != 0),
            gid_index: self.gid_index as u8,
            sl: params.sl,
            tc: params.tc,
            timeout: params.timeout,
            retry_cnt: params.retry_cnt,
            rnr_retry: 7,
        })
    }
}

/// What a peer needs to connect a queue pair to one of this port's (NCCL's `ncclIbDevInfo`
/// plus the QP number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QpAddr {
    /// Queue pair number.
    pub(crate) qpn: u32,
    /// LID (InfiniBand).
    pub(crate) lid: u16,
    /// The GID NCCL picked on this port.
    pub(crate) gid: [u8; 16],
    /// `link_layer` (1 InfiniBand, 2 Ethernet).
    pub(crate) link_layer: u8,
    /// Active MTU (`enum ibv_mtu`).
    pub(crate) mtu: u8,
}

/// The ACTIVE InfiniBand/RoCE ports `verbs` lists that `params` (`NCCL_IB_HCA`) selects, in
/// the library's device order, as (device, port) — the devices NCCL's IB plugin would use
/// (src/transport/net_ib/init.cc `ncclIbInitDevices`). Devices that fail to open are skipped.
///
/// Errors: [`VerbsError`] when the device list cannot be read.
pub(crate) fn usable_ports(
    verbs: &dyn Verbs,
    params: &IbParams,
) -> Result<Vec<(String, u8)>, VerbsError> {
    let mut out = Vec::new();
    for name in verbs.device_names()? {
        let Ok(dev) = verbs.open(&name) else {
            continue;
        };
        let Ok(attr) = dev.query_device() else {
            continue;
        };
        for p in 1..=attr.phys_port_cnt {
            let ok = dev
                .query_port(p)
                .is_ok_and(|a| a.state == PORT_ACTIVE && a.link().is_some());
            if ok && params.selects(&name, u32::from(p)) {
                out.push((name.clone(), p));
            }
        }
    }
    Ok(out)
}
