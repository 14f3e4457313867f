//! Detecting this host's topology from a root directory (`/`, or a captured tree in tests):
//! CPUs and NUMA nodes, the PCI tree, GPUs (NVML), network interfaces and RDMA adapters, and the
//! network devices NCCL's plugin would list. Every reader takes the root; what cannot be read
//! (no NVML, no GPU, no IB) is reported in the [`Inventory`] and detection runs on.

pub mod cpu;
pub mod fill;
pub mod fusion;
pub mod iface;
pub mod net;
pub mod nvml;
pub mod pci;
pub mod report;
pub mod sysfs;

use std::path::Path;

use serde::Serialize;

use crate::config::Config;
use crate::config::syntax::DeviceFilter;
use crate::topo::TopoError;
use cpu::{CpuInfo, HostInfo, NumaNode};
use iface::NetInterface;
use net::{Hca, NetDev, NetIf};
use nvml::{GpuInfo, GpuSource};
use pci::PciDevice;
use sysfs::Root;

/// Everything detection read.
#[derive(Debug, Clone, Serialize)]
pub struct Inventory {
    /// The root the tree was read from.
    pub root: String,
    /// Host summary and virtualization hints.
    pub host: HostInfo,
    /// The CPU (first processor).
    pub cpu: CpuInfo,
    /// NUMA nodes.
    pub numa: Vec<NumaNode>,
    /// Every PCI function.
    pub pci: Vec<PciDevice>,
    /// GPUs.
    pub gpus: Vec<GpuInfo>,
    /// Where the GPUs came from.
    pub gpu_source: GpuSource,
    /// Network interfaces (from `getifaddrs` on this host, from sysfs in a captured tree).
    pub interfaces: Vec<NetInterface>,
    /// The sysfs attributes of network interfaces.
    pub ifs: Vec<NetIf>,
    /// RDMA adapters.
    pub hcas: Vec<Hca>,
    /// The devices NCCL's network plugin would use, in its order (`dev` = index).
    pub nets: Vec<NetDev>,
    /// Host identity for `host_hash` (`NCCL_HOSTID`, else hostname + boot id).
    pub host_id: String,
}

impl Inventory {
    /// The `host_hash` attribute NCCL writes on `<cpu>` (`0x...`): NCCL's `getHash` of the host
    /// identity, as `getHostHash` computes it (`src/misc/utils.cc`), so a dump of this host
    /// equals NCCL's.
    pub fn host_hash_attr(&self) -> String {
        format!("{:#x}", crate::hash::nccl_hash(self.host_id.as_bytes()))
    }

    /// The PCI function with this bus id.
    pub fn pci_device(&self, busid: &str) -> Option<&PciDevice> {
        let id = crate::topo::busid::busid_to_u64(busid);
        self.pci
            .iter()
            .find(|d| crate::topo::busid::busid_to_u64(&d.busid) == id)
    }
}

fn filter(cfg: &Config, name: &str) -> Result<Option<DeviceFilter>, TopoError> {
    let Some(v) = cfg.text(name)? else {
        return Ok(None);
    };
    DeviceFilter::parse(v)
        .map(Some)
        .map_err(|hint| TopoError::from(cfg.refuse(name, "not a device list".into(), hint)))
}

/// Reads the host under `root`. GPUs come from NVML when `root` is `/`, and from
/// `<root>/nvml.json` (captured facts) otherwise; a missing or unloadable NVML leaves the GPU
/// list empty with the reason in [`Inventory::gpu_source`].
///
/// Errors: [`TopoError::Config`] for a malformed `NCCL_SOCKET_IFNAME` or `NCCL_IB_HCA`;
/// [`TopoError::Unusable`] for an `nvml.json` that is not NVML facts.
pub fn detect(root: &Path, cfg: &Config) -> Result<Inventory, TopoError> {
    let r = Root::new(root);
    let (gpus, gpu_source) = if r.is_host() {
        nvml::read_live()
    } else {
        match r.read("/nvml.json") {
            Some(text) => (
                nvml::read_facts(&text).map_err(|e| {
                    TopoError::Unusable(format!("{}: {e}", r.at("/nvml.json").display()))
                })?,
                GpuSource::Facts(r.at("/nvml.json").display().to_string()),
            ),
            None => (
                Vec::new(),
                GpuSource::Unavailable(format!("no nvml.json in {}", root.display())),
            ),
        }
    };
    let ifs = net::read_ifs(&r);
    let interfaces = iface::read(&r);
    let hcas = net::read_hcas(&r);
    let nets = net::nccl_net_devices(
        &ifs,
        &interfaces,
        &hcas,
        filter(cfg, "NCCL_IB_HCA")?.as_ref(),
        cfg,
    )?;
    let host = cpu::read_host(&r);
    let host_id = match cfg.string("NCCL_HOSTID") {
        Some(h) => h.to_string(),
        None => format!(
            "{}{}",
            host.hostname.clone().unwrap_or_default(),
            // NCCL reads the first word of the file (`fscanf("%ms")`).
            r.read("/proc/sys/kernel/random/boot_id")
                .and_then(|b| b.split_whitespace().next().map(str::to_string))
                .unwrap_or_default()
        ),
    };
    Ok(Inventory {
        root: root.display().to_string(),
        cpu: cpu::read_cpu(&r),
        numa: cpu::read_numa(&r),
        pci: pci::read_pci(&r),
        host,
        gpus,
        gpu_source,
        interfaces,
        ifs,
        hcas,
        nets,
        host_id,
    })
}
