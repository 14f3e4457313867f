//! The sysfs attributes of network interfaces (`/sys/class/net`: speed, MTU, PCI path; the
//! interface list itself comes from [`super::iface`]) and InfiniBand/RoCE adapters
//! (`/sys/class/infiniband`), and the devices NCCL's network plugin would list from them: active
//! IB ports when there are any (NCCL's IB plugin), else the socket interfaces NCCL would pick (its
//! Socket plugin).

use serde::Serialize;

use super::iface::NetInterface;
use super::sysfs::{Root, basename};
use crate::config::Config;
use crate::config::syntax::DeviceFilter;
use crate::topo::TopoError;
use crate::topo::busid::is_bdf;
use crate::topo::ifaces::{self, IfaceError};

/// One network interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetIf {
    /// Interface name.
    pub name: String,
    /// Host sysfs path of the interface.
    pub path: String,
    /// `operstate` (`up`, `down`, `unknown`).
    pub operstate: Option<String>,
    /// `speed` in Mb/s (absent or <= 0 when the driver does not say, e.g. virtio).
    pub speed_mbps: Option<i64>,
    /// `mtu`.
    pub mtu: Option<u32>,
    /// ARPHRD type (`1` Ethernet, `32` InfiniBand, `772` loopback).
    pub arp_type: Option<u32>,
    /// Host path of its device (the PCI function, or e.g. a virtio device), `None` for purely
    /// virtual interfaces (lo, bridges, veth).
    pub device_path: Option<String>,
    /// The device's bus (`pci`, `virtio`, ...).
    pub device_bus: Option<String>,
    /// The PCI bus id when the device is (or sits on) a PCI function.
    pub pci_busid: Option<String>,
}

/// One port of an RDMA adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HcaPort {
    /// Port number.
    pub port: u32,
    /// `state` (`4: ACTIVE`).
    pub state: Option<String>,
    /// `rate` (`400 Gb/sec (4X NDR)`).
    pub rate: Option<String>,
    /// `link_layer` (`InfiniBand`, `Ethernet`).
    pub link_layer: Option<String>,
}

impl HcaPort {
    /// Whether the port is ACTIVE (NCCL uses active ports only).
    pub fn active(&self) -> bool {
        self.state_word() == "ACTIVE"
    }

    /// The state without its number (`ACTIVE` for `4: ACTIVE`), empty when unknown.
    pub fn state_word(&self) -> &str {
        let s = self.state.as_deref().unwrap_or("");
        s.split_once(": ").map_or(s, |(_, w)| w).trim()
    }

    /// Rate in Mb/s (`400 Gb/sec` → 400000).
    pub fn speed_mbps(&self) -> Option<i64> {
        let r = self.rate.as_deref()?;
        let g: f64 = r.split_whitespace().next()?.parse().ok()?;
        Some((g * 1000.0) as i64)
    }
}

/// One RDMA adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hca {
    /// Device name (`mlx5_0`).
    pub name: String,
    /// `node_guid` as 64-bit number.
    pub guid: Option<u64>,
    /// Host path of the PCI function.
    pub device_path: Option<String>,
    /// Its PCI bus id.
    pub pci_busid: Option<String>,
    /// Ports.
    pub ports: Vec<HcaPort>,
}

/// A device as NCCL's network plugin reports it (`ncclNetProperties_t`), in plugin order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetDev {
    /// `name`.
    pub name: String,
    /// Host path NCCL calls `pciPath` (may be a non-PCI device such as virtio).
    pub pci_path: Option<String>,
    /// Whether that path is a PCI function (NCCL attaches others to the first CPU).
    pub is_pci: bool,
    /// `speed`, Mb/s.
    pub speed_mbps: i64,
    /// `port`.
    pub port: u32,
    /// `guid`.
    pub guid: u64,
    /// `maxComms`.
    pub max_comms: i64,
    /// GPUDirect RDMA capable (CUDA or DMA-BUF pointers).
    pub gdr: bool,
    /// Which plugin: `IB` or `Socket`.
    pub plugin: &'static str,
}

fn pci_of(dev: &str) -> Option<String> {
    let mut p = dev.to_string();
    loop {
        let b = basename(&p);
        if is_bdf(b) {
            return Some(b.to_string());
        }
        let parent = p.rsplit_once('/')?.0.to_string();
        if parent.is_empty() || !parent.starts_with("/sys/devices/") {
            return None;
        }
        p = parent;
    }
}

/// Every interface under `/sys/class/net`.
pub fn read_ifs(root: &Root) -> Vec<NetIf> {
    root.list("/sys/class/net")
        .into_iter()
        .filter_map(|name| {
            let path = root.resolve(&format!("/sys/class/net/{name}"))?;
            let a = |f: &str| root.read(&format!("{path}/{f}"));
            let device_path = root.resolve(&format!("{path}/device"));
            let device_bus = device_path
                .as_ref()
                .and_then(|d| root.link_name(&format!("{d}/subsystem")));
            let pci_busid = device_path.as_deref().and_then(pci_of);
            Some(NetIf {
                speed_mbps: a("speed").and_then(|s| s.trim().parse().ok()),
                operstate: a("operstate"),
                mtu: a("mtu").and_then(|s| s.trim().parse().ok()),
                arp_type: a("type").and_then(|s| s.trim().parse().ok()),
                device_path,
                device_bus,
                pci_busid,
                name,
                path,
            })
        })
        .collect()
}

/// Every adapter under `/sys/class/infiniband`.
pub fn read_hcas(root: &Root) -> Vec<Hca> {
    root.list("/sys/class/infiniband")
        .into_iter()
        .filter_map(|name| {
            let path = root.resolve(&format!("/sys/class/infiniband/{name}"))?;
            let device_path = root.resolve(&format!("{path}/device"));
            let ports = root
                .list(&format!("{path}/ports"))
                .into_iter()
                .filter_map(|p| {
                    let port: u32 = p.parse().ok()?;
                    let a = |f: &str| root.read(&format!("{path}/ports/{p}/{f}"));
                    Some(HcaPort {
                        port,
                        state: a("state"),
                        rate: a("rate"),
                        link_layer: a("link_layer"),
                    })
                })
                .collect();
            Some(Hca {
                guid: root
                    .read(&format!("{path}/node_guid"))
                    .and_then(|g| u64::from_str_radix(&g.replace(':', ""), 16).ok()),
                pci_busid: device_path.as_deref().and_then(pci_of),
                device_path,
                ports,
                name,
            })
        })
        .collect()
}

/// The devices NCCL's network plugin would list. IB: every ACTIVE port of every adapter (name
/// order), filtered by `NCCL_IB_HCA`; speed from the port rate; `maxComms` 131072 (mlx5's
/// `max_qp`, which sysfs does not show); GPUDirect assumed available (DMA-BUF or
/// nvidia-peermem). Otherwise sockets: the interfaces NCCL's Socket plugin lists, by the rule the
/// bootstrap follows ([`crate::topo::ifaces::select`] over `interfaces`, without an
/// `NCCL_COMM_ID` subnet), with speed and PCI path from the sysfs attributes in `ifs`.
///
/// Errors: [`TopoError::Config`] for a malformed `NCCL_SOCKET_IFNAME` or `NCCL_SOCKET_FAMILY`
/// (checked even when IB devices are found, as they are wrong either way).
pub fn nccl_net_devices(
    ifs: &[NetIf],
    interfaces: &[NetInterface],
    hcas: &[Hca],
    ib_hca: Option<&DeviceFilter>,
    cfg: &Config,
) -> Result<Vec<NetDev>, TopoError> {
    let order = match ifaces::select(interfaces, cfg, None) {
        Ok(order) => order,
        Err(IfaceError::Config(e)) => return Err(e.into()),
        Err(IfaceError::NoMatch { .. } | IfaceError::NoneUsable { .. }) => Vec::new(),
    };
    let mut ib = Vec::new();
    for h in hcas {
        for p in h.ports.iter().filter(|p| p.active()) {
            if ib_hca.is_some_and(|f| !f.matches(&h.name, Some(p.port))) {
                continue;
            }
            ib.push(NetDev {
                name: h.name.clone(),
                pci_path: h.device_path.clone(),
                is_pci: h.pci_busid.is_some(),
                speed_mbps: p.speed_mbps().unwrap_or(0),
                port: p.port,
                guid: h.guid.unwrap_or(0),
                max_comms: 131_072,
                gdr: true,
                plugin: "IB",
            });
        }
    }
    if !ib.is_empty() {
        return Ok(ib);
    }
    Ok(ifaces::nccl_devices(&order)
        .into_iter()
        .enumerate()
        .map(|(dev, c)| {
            let attrs = ifs.iter().find(|i| i.name == c.name);
            let device_path = attrs.and_then(|i| i.device_path.clone());
            NetDev {
                name: c.name.clone(),
                is_pci: attrs.is_some_and(|i| i.device_bus.as_deref() == Some("pci"))
                    || device_path.as_deref().is_some_and(|d| is_bdf(basename(d))),
                pci_path: device_path,
                speed_mbps: attrs
                    .and_then(|i| i.speed_mbps)
                    .filter(|&s| s > 0)
                    .unwrap_or(10000),
                port: 0,
                guid: dev as u64,
                max_comms: 65536,
                gdr: false,
                plugin: "Socket",
            }
        })
        .collect())
}
