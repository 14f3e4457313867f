//! Building NCCL's topology XML from what detection read, step for step as NCCL fills it
//! (NCCL 2.28 src/graph/xml.cc `ncclTopoFillGpu`, `ncclTopoGetXmlFromSys`,
//! `ncclTopoGetXmlFromCpu`, `ncclTopoGetXmlFromGpu`, `ncclTopoFillNet`; src/graph/topo.cc
//! `ncclTopoGetSystem`): each rank starts from the topology file (or an empty `<system>`), fills
//! its own GPU and the network devices, drops the branches it does not use, and the ranks' views
//! are fused. The result matches NCCL's `NCCL_TOPO_DUMP_FILE` attribute for attribute.

use super::Inventory;
use super::fusion::{Fusion, make_vnics};
use super::nvml::GpuInfo;
use super::pci::{PciDevice, gts};
use super::sysfs::{basename, dirname};
use crate::topo::TopoError;
use crate::topo::busid::{busid_to_u64, is_bdf, u64_to_busid};
use crate::topo::xml::XmlDoc;
use crate::topo::xml::fuse::{fuse, trim};

/// The node's view: `base` (a parsed `NCCL_TOPO_FILE`, or an empty `<system>`) filled with every
/// detected GPU (rank = NVML index order) and network device, the devices fused as `fusion`
/// says (`fusion::make_vnics`), as NCCL's ranks fill and fuse it.
///
/// Errors: [`TopoError::Unusable`] when the base document has no `<system>`, or an
/// `NCCL_NET_FORCE_MERGE` group cannot be made.
pub fn node_view(base: &XmlDoc, inv: &Inventory, fusion: &Fusion) -> Result<XmlDoc, TopoError> {
    let mut fused = XmlDoc::new(base.source.clone());
    let mut gpus: Vec<&GpuInfo> = inv.gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    for (rank, gpu) in gpus.into_iter().enumerate() {
        let mut x = base.clone();
        if x.root().is_none() {
            x = XmlDoc::new_system(base.source.clone());
        }
        let root = x
            .root()
            .ok_or_else(|| TopoError::Unusable("topology without <system>".into()))?;
        let cpus: Vec<usize> = x
            .node(root)
            .children
            .iter()
            .copied()
            .filter(|&c| x.node(c).name == "cpu")
            .collect();
        for c in cpus {
            x.set_attr(c, "host_hash", &inv.host_hash_attr());
        }
        let mut f = Filler { x: &mut x, inv };
        f.fill_gpu(gpu, rank);
        for (dev, net) in inv.nets.iter().enumerate() {
            f.fill_net(dev, net);
        }
        make_vnics(&mut x, &inv.nets, fusion)?;
        trim(&mut x);
        fuse(&mut fused, &x);
    }
    Ok(fused)
}

struct Filler<'a> {
    x: &'a mut XmlDoc,
    inv: &'a Inventory,
}

impl Filler<'_> {
    fn pci(&self, busid: &str) -> Option<&PciDevice> {
        let id = busid_to_u64(busid);
        self.inv.pci.iter().find(|d| busid_to_u64(&d.busid) == id)
    }

    /// NCCL `ncclTopoGetPciNode`: the `<pci>` with this bus id, or a new detached one.
    fn pci_node(&mut self, busid: &str) -> usize {
        match self.x.find_tag_kv("pci", "busid", busid) {
            Some(i) => i,
            None => {
                let i = self.x.add(None, "pci", 0);
                self.x.set_attr(i, "busid", busid);
                i
            }
        }
    }

    fn fill_gpu(&mut self, gpu: &GpuInfo, rank: usize) {
        let node = self.pci_node(&gpu.busid);
        self.x.set_attr_if_unset(node, "class", "0x03");
        self.fill_sys(node);
        let g = match self.x.sub(node, "gpu") {
            Some(g) => g,
            None => self.x.add(Some(node), "gpu", 0),
        };
        self.x.set_attr_if_unset(g, "dev", &gpu.index.to_string());
        self.x.set_attr_if_unset(g, "sm", &gpu.sm.to_string());
        if self.x.sub(g, "nvlink").is_none() {
            for l in gpu.nvlinks.iter().filter(|l| l.p2p && l.active) {
                let Some(target) = &l.remote_busid else {
                    continue;
                };
                match self.x.sub_kv(g, "nvlink", "target", target) {
                    Some(n) => {
                        let c: i64 = self
                            .x
                            .attr(n, "count")
                            .and_then(|c| c.parse().ok())
                            .unwrap_or(0);
                        self.x.set_attr(n, "count", &(c + 1).to_string());
                    }
                    None => {
                        let n = self.x.add(Some(g), "nvlink", 0);
                        self.x.set_attr(n, "target", target);
                        self.x.set_attr(n, "count", "1");
                    }
                }
            }
        }
        if self.x.sub(g, "c2c").is_none()
            && gpu.sm >= 90
            && let Some((bw, count)) = gpu.c2c
        {
            let c = self.x.add(Some(g), "c2c", 0);
            self.x.set_attr(c, "bw", &bw.to_string());
            self.x.set_attr(c, "count", &count.to_string());
        }
        let links: Vec<usize> = self.x.node(g).children.clone();
        for n in links {
            if self.x.node(n).name != "nvlink" || self.x.attr(n, "tclass").is_some() {
                continue;
            }
            let target = self.x.attr(n, "target").unwrap_or("").to_string();
            let class = (target != "fffffff:ffff:ff")
                .then(|| self.pci(&target).and_then(|d| d.class.clone()))
                .flatten()
                .unwrap_or_else(|| "0x068000".to_string());
            self.x.set_attr(n, "tclass", &class);
        }
        self.x.set_attr(g, "keep", "1");
        self.x.set_attr(g, "rank", &rank.to_string());
        self.x.set_attr_if_unset(g, "gdr", "1");
    }

    /// NCCL `ncclTopoGetXmlFromSys`: the PCI attributes from sysfs, then the parent (the switch
    /// above, skipping one level of downstream port, or the NUMA node's CPU), recursively.
    fn fill_sys(&mut self, node: usize) {
        let busid = self.x.attr(node, "busid").unwrap_or("").to_string();
        let dev = self.pci(&busid).cloned();
        if let Some(d) = &dev {
            if let Some(c) = &d.class {
                self.x.set_attr(node, "class", c);
            }
            for (key, v) in [
                ("vendor", &d.vendor),
                ("device", &d.device),
                ("subsystem_vendor", &d.subsystem_vendor),
                ("subsystem_device", &d.subsystem_device),
            ] {
                if self.x.attr(node, key).is_none()
                    && let Some(v) = v
                {
                    self.x.set_attr(node, key, v);
                }
            }
        }
        let port = dev
            .as_ref()
            .and_then(|d| d.parent.as_deref().and_then(|p| self.pci(p)).cloned());
        if self.x.attr(node, "link_speed").is_none() {
            let v = match &dev {
                Some(d) => {
                    let mine = d.max_link_speed.clone().unwrap_or_default();
                    let up = port
                        .as_ref()
                        .and_then(|p| p.max_link_speed.clone())
                        .unwrap_or_default();
                    let (a, b) = (gts(&mine).unwrap_or(f32::MAX), gts(&up).unwrap_or(f32::MAX));
                    if b < a { up } else { mine }
                }
                None => String::new(),
            };
            self.x.set_attr(node, "link_speed", &v);
        }
        if self.x.attr(node, "link_width").is_none() {
            let v = match &dev {
                Some(d) => {
                    let up = port.as_ref().and_then(|p| p.max_link_width).unwrap_or(0);
                    d.max_link_width.unwrap_or(0).min(up).to_string()
                }
                None => String::new(),
            };
            self.x.set_attr(node, "link_width", &v);
        }
        let mut parent = self.x.node(node).parent;
        if parent.is_none() {
            let p = match &dev {
                Some(d) => {
                    let numa = d.numa_node.unwrap_or(-1).to_string();
                    let up = dirname(&d.path);
                    let up2 = dirname(up);
                    if is_bdf(basename(up)) && is_bdf(basename(up2)) {
                        self.pci_node(basename(up2))
                    } else {
                        self.cpu_node(&numa, false)
                    }
                }
                None => self.cpu_node("-1", true),
            };
            let pos = self
                .x
                .node(p)
                .children
                .iter()
                .position(|&c| self.x.attr(c, "busid").is_some_and(|b| busid.as_str() < b))
                .unwrap_or(self.x.node(p).children.len());
            self.x.attach(p, node, pos);
            parent = Some(p);
        }
        if let Some(p) = parent {
            match self.x.node(p).name.as_str() {
                "pci" => self.fill_sys(p),
                "cpu" => self.fill_cpu(p),
                _ => {}
            }
        }
    }

    /// The `<cpu>` of NUMA node `numa` under `<system>`, created with `host_hash` and `numaid`
    /// (and, for the unknown CPU NCCL makes when sysfs has nothing, filled at once).
    fn cpu_node(&mut self, numa: &str, fill_now: bool) -> usize {
        let root = self.x.root().unwrap_or(0);
        let existing = if fill_now {
            self.x.find_tag_kv("cpu", "numaid", numa)
        } else {
            self.x.sub_kv(root, "cpu", "numaid", numa)
        };
        if let Some(c) = existing {
            return c;
        }
        let c = self.x.add(Some(root), "cpu", 0);
        self.x.set_attr(c, "host_hash", &self.inv.host_hash_attr());
        self.x.set_attr(c, "numaid", numa);
        if fill_now {
            self.fill_cpu(c);
        }
        c
    }

    /// NCCL `ncclTopoGetXmlFromCpu`: affinity from the NUMA node's `cpumap`, then arch, vendor,
    /// family and model where unset.
    fn fill_cpu(&mut self, c: usize) {
        let inv = self.inv;
        if self.x.attr(c, "affinity").is_none() {
            let numa: i64 = self
                .x
                .attr(c, "numaid")
                .and_then(|n| n.parse().ok())
                .unwrap_or(-1);
            if let Some(map) = inv
                .numa
                .iter()
                .find(|n| n.id == numa)
                .and_then(|n| n.cpumap.clone())
            {
                self.x.set_attr(c, "affinity", &map);
            }
        }
        if self.x.attr(c, "arch").is_none()
            && let Some(a) = &inv.cpu.arch
        {
            self.x.set_attr(c, "arch", a);
        }
        if inv.cpu.arch.as_deref() == Some("x86_64") {
            if self.x.attr(c, "vendor").is_none()
                && let Some(v) = &inv.cpu.vendor
            {
                self.x.set_attr(c, "vendor", v);
            }
            if self.x.attr(c, "familyid").is_none()
                && let (Some(f), Some(m)) = (inv.cpu.family, inv.cpu.model)
            {
                self.x.set_attr(c, "familyid", &f.to_string());
                self.x.set_attr(c, "modelid", &m.to_string());
            }
        }
    }

    /// NCCL `ncclTopoFillNet` and `ncclTopoPopulateNics` for network device number `dev`.
    fn fill_net(&mut self, dev: usize, net: &super::net::NetDev) {
        let node = match self.x.find_tag_kv("net", "name", &net.name) {
            Some(n) => n,
            None => {
                let parent = match (&net.pci_path, net.is_pci) {
                    (Some(path), true) => {
                        let busid = u64_to_busid(busid_to_u64(basename(path)));
                        let p = self.pci_node(&busid);
                        self.x.set_attr_if_unset(p, "class", "0x02");
                        self.fill_sys(p);
                        Some(p)
                    }
                    _ => self.x.find_tag("cpu"),
                };
                let Some(parent) = parent else { return };
                let nic = match self.x.sub(parent, "nic") {
                    Some(n) => n,
                    None => self.x.add(Some(parent), "nic", 0),
                };
                let n = self.x.add(Some(nic), "net", 0);
                self.x.set_attr(n, "name", &net.name);
                n
            }
        };
        self.x.set_attr(node, "keep", "1");
        self.x.set_attr(node, "dev", &dev.to_string());
        for (k, v) in [
            ("latency", "0".to_string()),
            ("speed", net.speed_mbps.to_string()),
            ("port", net.port.to_string()),
            ("guid", format!("0x{:x}", net.guid)),
            ("maxconn", net.max_comms.to_string()),
            ("gdr", u8::from(net.gdr).to_string()),
        ] {
            self.x.set_attr_if_unset(node, k, &v);
        }
    }
}
