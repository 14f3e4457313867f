//! Everything sysfs says about a host's RDMA adapters (`/sys/class/infiniband`, kernel
//! Documentation/ABI/stable/sysfs-class-infiniband): per adapter its identity, PCI function and
//! ports; per port state, physical state, rate, link layer, LIDs, the GID table with types and
//! netdevs, the netdev, and the counters. The adapter and port list, port state and rate come
//! from topology detection's reader ([`crate::topo::detect::net::read_hcas`]), so `topo`,
//! `env-explain` and `ibcheck` see the same ports.

use std::collections::BTreeMap;

use serde::Serialize;

use super::counters::PortCounters;
use super::gid::{Gid, GidTable, GidType, LinkLayer};
use super::rate::PortRate;
use crate::topo::detect::net::{self, HcaPort, NetIf};
use crate::topo::detect::sysfs::Root;

/// One GID table entry as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GidEntry {
    /// Index in the table.
    pub index: usize,
    /// `gids/<i>`.
    pub gid: Gid,
    /// `gid_attrs/types/<i>`; `None` when unreadable (containers, nccl#1573).
    pub gid_type: Option<GidType>,
    /// `gid_attrs/ndevs/<i>`: the netdev the GID belongs to (RoCE).
    pub ndev: Option<String>,
}

/// One port of an adapter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IbPort {
    /// State, rate and link layer (topology detection's reading).
    #[serde(flatten)]
    pub base: HcaPort,
    /// `phys_state` (`5: LinkUp`).
    pub phys_state: Option<String>,
    /// `rate` decoded.
    pub link_rate: Option<PortRate>,
    /// `lid` (IB; 0 until a subnet manager assigns one).
    pub lid: Option<u32>,
    /// `sm_lid`: the subnet manager's LID (0: no SM has configured the port).
    pub sm_lid: Option<u32>,
    /// `lid_mask_count` (LMC).
    pub lmc: Option<u32>,
    /// Entries in `gids/` (the table length, `gid_tbl_len`).
    pub gid_tbl_len: usize,
    /// The populated (non-zero) GID entries.
    pub gids: Vec<GidEntry>,
    /// The netdev of this port (RoCE interface or IPoIB), from `gid_attrs/ndevs` or the PCI
    /// function's `net/` directory.
    pub netdev: Option<String>,
    /// Counters read now.
    pub counters: PortCounters,
}

impl IbPort {
    /// The link layer, when sysfs names one NCCL knows.
    pub fn link_layer(&self) -> Option<LinkLayer> {
        self.base.link_layer.as_deref().and_then(LinkLayer::parse)
    }

    /// The physical state without its number (`LinkUp` for `5: LinkUp`), empty when unknown.
    pub fn phys_word(&self) -> &str {
        let s = self.phys_state.as_deref().unwrap_or("");
        s.split_once(": ").map_or(s, |(_, w)| w).trim()
    }

    /// The numeric state (`4` for `4: ACTIVE`).
    pub fn state_num(&self) -> Option<u32> {
        num_prefix(self.base.state.as_deref())
    }

    /// The numeric physical state (`5` for `5: LinkUp`).
    pub fn phys_num(&self) -> Option<u32> {
        num_prefix(self.phys_state.as_deref())
    }
}

fn num_prefix(s: Option<&str>) -> Option<u32> {
    s?.split(':').next()?.trim().parse().ok()
}

impl GidTable for IbPort {
    fn len(&self) -> usize {
        self.gid_tbl_len
    }
    fn gid(&self, i: usize) -> Gid {
        self.gids
            .iter()
            .find(|e| e.index == i)
            .map(|e| e.gid)
            .unwrap_or_default()
    }
    fn gid_type(&self, i: usize) -> Option<GidType> {
        self.gids
            .iter()
            .find(|e| e.index == i)
            .and_then(|e| e.gid_type)
    }
}

/// One RDMA adapter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IbHca {
    /// Device name (`mlx5_0`).
    pub name: String,
    /// `node_type` (`1: CA`).
    pub node_type: Option<String>,
    /// `fw_ver`.
    pub fw_ver: Option<String>,
    /// `hca_type` (`MT4129`).
    pub hca_type: Option<String>,
    /// `board_id`.
    pub board_id: Option<String>,
    /// `node_guid` (`xxxx:xxxx:xxxx:xxxx`).
    pub node_guid: Option<String>,
    /// PCI bus id of its function.
    pub pci_busid: Option<String>,
    /// PCI `vendor` and `device` of its function.
    pub pci_id: (Option<String>, Option<String>),
    /// Ports, by number.
    pub ports: Vec<IbPort>,
}

/// The RDMA side of a host as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IbHost {
    /// Adapters, by name.
    pub hcas: Vec<IbHca>,
    /// `/sys/class/infiniband_mad/abi_version` (the umad ABI diagnostic tools need).
    pub umad_abi: Option<String>,
    /// Adapters with a verbs device (`/sys/class/infiniband_verbs/uverbs*/ibdev`): only those
    /// can be opened by libibverbs.
    pub uverbs: Vec<String>,
    /// Network interfaces' attributes (for RoCE netdevs: MTU, operstate).
    pub ifs: Vec<NetIf>,
}

impl IbHost {
    /// Reads the tree under `root`.
    pub fn read(root: &Root) -> IbHost {
        let hcas = net::read_hcas(root)
            .into_iter()
            .map(|h| {
                let dir = format!("/sys/class/infiniband/{}", h.name);
                let a = |f: &str| root.read(&format!("{dir}/{f}"));
                let pci = h.device_path.clone();
                let pci_attr = |f: &str| pci.as_ref().and_then(|p| root.read(&format!("{p}/{f}")));
                let pf_netdevs = pci
                    .as_ref()
                    .map(|p| root.list(&format!("{p}/net")))
                    .unwrap_or_default();
                let ports = h
                    .ports
                    .iter()
                    .map(|p| read_port(root, &dir, p, &pf_netdevs, pci.as_deref()))
                    .collect();
                IbHca {
                    node_type: a("node_type"),
                    fw_ver: a("fw_ver"),
                    hca_type: a("hca_type"),
                    board_id: a("board_id"),
                    node_guid: a("node_guid"),
                    pci_busid: h.pci_busid.clone(),
                    pci_id: (pci_attr("vendor"), pci_attr("device")),
                    ports,
                    name: h.name,
                }
            })
            .collect();
        let uverbs = root
            .list("/sys/class/infiniband_verbs")
            .iter()
            .filter(|d| d.starts_with("uverbs"))
            .filter_map(|d| root.read(&format!("/sys/class/infiniband_verbs/{d}/ibdev")))
            .collect();
        IbHost {
            hcas,
            umad_abi: root.read("/sys/class/infiniband_mad/abi_version"),
            uverbs,
            ifs: net::read_ifs(root),
        }
    }

    /// Every port with its adapter.
    pub fn ports(&self) -> impl Iterator<Item = (&IbHca, &IbPort)> {
        self.hcas
            .iter()
            .flat_map(|h| h.ports.iter().map(move |p| (h, p)))
    }

    /// The attributes of network interface `name`.
    pub fn netif(&self, name: &str) -> Option<&NetIf> {
        self.ifs.iter().find(|i| i.name == name)
    }
}

fn read_port(
    root: &Root,
    dir: &str,
    base: &HcaPort,
    pf_netdevs: &[String],
    pci: Option<&str>,
) -> IbPort {
    let pdir = format!("{dir}/ports/{}", base.port);
    let a = |f: &str| root.read(&format!("{pdir}/{f}"));
    let hex = |f: &str| {
        a(f).and_then(|v| u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())
    };
    let indices: Vec<usize> = root
        .list(&format!("{pdir}/gids"))
        .iter()
        .filter_map(|i| i.parse().ok())
        .collect();
    let mut gids: Vec<GidEntry> = indices
        .iter()
        .filter_map(|&i| {
            let gid = a(&format!("gids/{i}")).and_then(|g| Gid::parse(&g))?;
            (!gid.is_zero()).then(|| GidEntry {
                index: i,
                gid,
                gid_type: a(&format!("gid_attrs/types/{i}")).and_then(|t| GidType::parse(&t)),
                ndev: a(&format!("gid_attrs/ndevs/{i}")),
            })
        })
        .collect();
    gids.sort_by_key(|e| e.index);
    // The port's netdev: the one its GIDs name, else the PCI function's interface whose
    // dev_port is this port's (0-based), else the function's only interface.
    let netdev = gids.iter().find_map(|e| e.ndev.clone()).or_else(|| {
        let by_port = pf_netdevs.iter().find(|n| {
            pci.and_then(|p| root.read(&format!("{p}/net/{n}/dev_port")))
                .and_then(|d| d.trim().parse::<u32>().ok())
                == Some(base.port - 1)
        });
        by_port
            .or_else(|| (pf_netdevs.len() == 1).then(|| &pf_netdevs[0]))
            .cloned()
    });
    IbPort {
        phys_state: a("phys_state"),
        link_rate: base.rate.as_deref().and_then(PortRate::parse),
        lid: hex("lid"),
        sm_lid: hex("sm_lid"),
        lmc: a("lid_mask_count").and_then(|v| v.trim().parse().ok()),
        gid_tbl_len: indices.len(),
        gids,
        netdev,
        counters: PortCounters::read(root, &pdir),
        base: base.clone(),
    }
}

/// The counter values of a directory of counter files (`counters/`, `hw_counters/`): each
/// readable decimal file; `N/A (no PMA)` and other non-numbers are left out.
pub fn read_counter_dir(root: &Root, dir: &str) -> BTreeMap<String, u64> {
    root.list(dir)
        .into_iter()
        .filter_map(|name| {
            let v = root.read(&format!("{dir}/{name}"))?;
            Some((name, v.trim().parse().ok()?))
        })
        .collect()
}
