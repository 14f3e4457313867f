//! The host a topology file describes, as detection would have read it there: every `<pci>` of
//! the file becomes a PCI function, every GPU-class function an NVML GPU, every NIC-class
//! function a device of the network plugin, every `<cpu>` a NUMA node — with what the file does
//! not say taken from [`Assumptions`] or guessed from the file, and each such choice reported.
//! Filling the file from this [`Inventory`] is then what NCCL does on the live host.

use std::collections::BTreeMap;

use super::Assumptions;
use super::models::{self, CpuPreset, Fabric, GpuModel, NetPlugin, NicModel};
use crate::topo::TopoNote;
use crate::topo::busid::{busid_to_u64, normalize};
use crate::topo::detect::Inventory;
use crate::topo::detect::cpu::{CpuInfo, HostInfo, NumaNode};
use crate::topo::detect::net::NetDev;
use crate::topo::detect::nvml::{GpuInfo, GpuSource, NvLinkInfo};
use crate::topo::detect::pci::PciDevice;
use crate::topo::xml::XmlDoc;

/// The bus id NCCL's dumps give an NVLink whose far end (an NVSwitch) the host cannot see.
const NVSWITCH_TARGET: &str = "fffffff:ff:ff.0";

/// Whether a `<pci>` holds (or, by class, is) a GPU.
fn is_gpu(doc: &XmlDoc, p: usize) -> bool {
    doc.sub(p, "gpu").is_some() || doc.attr(p, "class").is_some_and(|c| c.starts_with("0x03"))
}

/// Whether a `<pci>` holds (or, by class, is) a network device.
fn is_nic(doc: &XmlDoc, p: usize) -> bool {
    doc.sub(p, "nic").is_some() || doc.attr(p, "class").is_some_and(|c| c.starts_with("0x02"))
}

fn hex_attr(doc: &XmlDoc, i: usize, key: &str) -> Option<u16> {
    let v = doc.attr(i, key)?.trim();
    u16::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
}

fn gts(speed: &str) -> f32 {
    speed
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0)
}

/// A sysfs-like path for a `<pci>`: its `<pci>` ancestors' bus ids under a root complex, so
/// the code that reads parents from paths finds the file's tree.
fn sys_path(doc: &XmlDoc, p: usize) -> String {
    let mut chain = vec![doc.attr(p, "busid").unwrap_or("").to_string()];
    let mut up = doc.node(p).parent;
    while let Some(u) = up {
        if doc.node(u).name != "pci" {
            break;
        }
        chain.push(doc.attr(u, "busid").unwrap_or("").to_string());
        up = doc.node(u).parent;
    }
    chain.reverse();
    let root = &normalize(&chain[0])[..7];
    format!("/sys/devices/pci{root}/{}", chain.join("/"))
}

/// `the GPU at X`, `the 2 GPUs at X, Y`, `the 8 GPUs at X ... Z`.
fn list(what: &str, busids: &[String]) -> String {
    match busids {
        [] => format!("no {what}"),
        [one] => format!("the {what} at {one}"),
        many if many.len() <= 4 => format!("the {} {what}s at {}", many.len(), many.join(", ")),
        many => format!(
            "the {} {what}s at {} ... {}",
            many.len(),
            many[0],
            many[many.len() - 1]
        ),
    }
}

/// Devices that received one assumption, and why it was chosen.
struct Choice<M> {
    model: M,
    why: String,
    busids: Vec<String>,
}

fn record<M: PartialEq + Copy>(choices: &mut Vec<Choice<M>>, model: M, why: String, busid: &str) {
    match choices
        .iter_mut()
        .find(|c| c.model == model && c.why == why)
    {
        Some(c) => c.busids.push(busid.to_string()),
        None => choices.push(Choice {
            model,
            why,
            busids: vec![busid.to_string()],
        }),
    }
}

fn guess_gpu(doc: &XmlDoc, p: usize, a: &Assumptions) -> (&'static GpuModel, String) {
    if let Some(m) = a.gpu {
        return (m, "stated with --assume gpu".into());
    }
    if hex_attr(doc, p, "vendor") == Some(0x10de)
        && let Some(d) = hex_attr(doc, p, "device")
        && let Some(m) = models::gpu_by_id(d)
    {
        return (m, format!("from the PCI id 10de:{d:04x}"));
    }
    let sm = doc
        .sub(p, "gpu")
        .and_then(|g| doc.attr(g, "sm"))
        .and_then(|s| s.trim().parse::<u32>().ok());
    if let Some(sm) = sm
        && let Some(m) = models::GPUS.iter().find(|m| m.sm == sm)
    {
        return (m, format!("from sm=\"{sm}\" in the file"));
    }
    let speed = doc.attr(p, "link_speed").unwrap_or("");
    let key = match gts(speed) {
        s if s >= 32.0 => "h100-sxm",
        s if s >= 8.0 => "a100-sxm",
        _ => "h100-sxm",
    };
    let why = if speed.is_empty() {
        "no PCI id, sm or link speed in the file: the most common cloud GPU".to_string()
    } else {
        format!("guessed from the PCIe link speed {speed} (no PCI id in the file)")
    };
    (
        models::find(models::GPUS, key, |m| m.key).unwrap_or(&models::GPUS[0]),
        why,
    )
}

fn guess_nic(doc: &XmlDoc, p: usize, a: &Assumptions) -> (&'static NicModel, String) {
    if let Some(m) = a.nic {
        return (m, "stated with --assume nic".into());
    }
    let vendor = hex_attr(doc, p, "vendor");
    if let (Some(v), Some(d)) = (vendor, hex_attr(doc, p, "device"))
        && let Some(m) = models::nic_by_id(v, d)
    {
        return (m, format!("from the PCI id {v:04x}:{d:04x}"));
    }
    let class = doc.attr(p, "class").unwrap_or("");
    let speed = doc.attr(p, "link_speed").unwrap_or("");
    let by = |k: &str| models::find(models::NICS, k, |m| m.key).unwrap_or(&models::NICS[0]);
    if vendor == Some(0x1d0f) {
        return (by("efa"), "from the PCI vendor 1d0f (Amazon)".into());
    }
    if class.starts_with("0x0207") || vendor == Some(0x15b3) {
        let key = match gts(speed) {
            s if s >= 64.0 => "cx8",
            s if s >= 32.0 => "cx7",
            s if s >= 16.0 => "cx6",
            _ => "cx5",
        };
        return (
            by(key),
            format!(
                "guessed from the class {class} (InfiniBand) and the PCIe link speed {speed:?}"
            ),
        );
    }
    (
        by("eth"),
        format!("class {class:?} without a known PCI id: an Ethernet NIC used through sockets"),
    )
}

fn guess_cpu(doc: &XmlDoc, a: &Assumptions, grace: bool) -> (CpuInfo, Option<String>) {
    let info = |p: &CpuPreset| CpuInfo {
        arch: Some(p.arch.to_string()),
        vendor: p.vendor.map(str::to_string),
        family: p.family_model.map(|f| f.0),
        model: p.family_model.map(|f| f.1),
        model_name: Some(p.name.to_string()),
    };
    if let Some(p) = a.cpu {
        return (info(p), Some("stated with --assume cpu".into()));
    }
    let cpus: Vec<usize> = doc
        .root()
        .map(|r| doc.node(r).children.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|&c| doc.node(c).name == "cpu")
        .collect();
    if let Some(&c) = cpus.iter().find(|&&c| doc.attr(c, "arch").is_some()) {
        let num = |k: &str| doc.attr(c, k).and_then(|v| v.trim().parse::<u32>().ok());
        return (
            CpuInfo {
                arch: doc.attr(c, "arch").map(str::to_string),
                vendor: doc.attr(c, "vendor").map(str::to_string),
                family: num("familyid"),
                model: num("modelid"),
                model_name: None,
            },
            Some(format!(
                "as the <cpu> at line {} says (NCCL fills every CPU from the one host it runs on)",
                doc.node(c).line
            )),
        );
    }
    let by = |k: &str| models::find(models::CPUS, k, |m| m.key).unwrap_or(&models::CPUS[0]);
    if grace {
        return (info(by("grace")), Some("the GPUs are Grace systems".into()));
    }
    let vendors: Vec<u16> = doc
        .root()
        .map(|r| doc.descendants(r))
        .unwrap_or_default()
        .into_iter()
        .filter(|&i| doc.node(i).name == "pci")
        .filter_map(|i| hex_attr(doc, i, "vendor"))
        .collect();
    if vendors.contains(&0x1022) {
        return (
            info(by("genoa")),
            Some("from AMD (1022) PCI bridges in the file".into()),
        );
    }
    if vendors.contains(&0x8086) {
        return (
            info(by("spr")),
            Some("from Intel (8086) PCI bridges in the file".into()),
        );
    }
    (
        info(by("spr")),
        Some("nothing in the file says: the most common cloud host CPU".into()),
    )
}

/// The detection results of the host `doc` describes, and the assumptions made for it (as
/// notes). GPUs are numbered in `dev` order where the file gives it, else in bus id order (NVML's
/// order); network devices likewise by `dev`, else bus id. NVLinks are made from the fabric for
/// GPUs the file gives no `<gpu>` element, or for every GPU without `<nvlink>` when the GPU model
/// or fabric was stated.
pub fn offline_host(doc: &XmlDoc, a: &Assumptions) -> (Inventory, Vec<TopoNote>) {
    let all: Vec<usize> = doc.root().map(|r| doc.descendants(r)).unwrap_or_default();
    let pcis: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| doc.node(i).name == "pci" && doc.attr(i, "busid").is_some())
        .collect();
    let mut gpu_choices: Vec<Choice<&'static GpuModel>> = Vec::new();
    let mut nic_choices: Vec<Choice<&'static NicModel>> = Vec::new();
    let mut gpu_of: BTreeMap<usize, &'static GpuModel> = BTreeMap::new();
    let mut nic_of: BTreeMap<usize, &'static NicModel> = BTreeMap::new();
    for &p in &pcis {
        let busid = doc.attr(p, "busid").unwrap_or("");
        if is_gpu(doc, p) {
            let (m, why) = guess_gpu(doc, p, a);
            record(&mut gpu_choices, m, why, busid);
            gpu_of.insert(p, m);
        } else if is_nic(doc, p) {
            let (m, why) = guess_nic(doc, p, a);
            record(&mut nic_choices, m, why, busid);
            nic_of.insert(p, m);
        }
    }
    let numa_of = |p: usize| -> Option<i64> {
        doc.ancestor(p, "cpu")
            .and_then(|c| doc.attr(c, "numaid"))
            .and_then(|n| n.trim().parse().ok())
    };
    let mut pci = Vec::new();
    for &p in &pcis {
        let busid = doc.attr(p, "busid").unwrap_or("").to_string();
        let (speed, width) = if let Some(m) = gpu_of.get(&p) {
            (Some(m.link_speed.to_string()), Some(m.link_width))
        } else if let Some(m) = nic_of.get(&p) {
            (Some(m.link_speed.to_string()), Some(16))
        } else {
            let fastest = doc
                .descendants(p)
                .into_iter()
                .filter_map(|d| {
                    gpu_of
                        .get(&d)
                        .map(|m| m.link_speed)
                        .or(nic_of.get(&d).map(|m| m.link_speed))
                })
                .max_by(|x, y| gts(x).total_cmp(&gts(y)));
            (fastest.map(str::to_string), fastest.map(|_| 16))
        };
        let class = doc.attr(p, "class").map(str::to_string).or_else(|| {
            if gpu_of.contains_key(&p) {
                Some("0x030200".into())
            } else if let Some(m) = nic_of.get(&p) {
                Some(
                    if m.plugin == NetPlugin::Ib {
                        "0x020700"
                    } else {
                        "0x020000"
                    }
                    .into(),
                )
            } else {
                Some("0x060400".into())
            }
        });
        let (vendor, device) = match (gpu_of.get(&p), nic_of.get(&p)) {
            (Some(m), _) => (Some(0x10de), m.device_ids.first().copied()),
            (_, Some(m)) if m.vendor != 0 => (Some(m.vendor), m.device_ids.first().copied()),
            _ => (None, None),
        };
        let parent = doc
            .node(p)
            .parent
            .filter(|&u| doc.node(u).name == "pci")
            .and_then(|u| doc.attr(u, "busid"))
            .map(str::to_string);
        pci.push(PciDevice {
            path: sys_path(doc, p),
            parent,
            class,
            vendor: vendor.map(|v| format!("0x{v:04x}")),
            device: device.map(|d| format!("0x{d:04x}")),
            subsystem_vendor: vendor.map(|v| format!("0x{v:04x}")),
            subsystem_device: device.map(|_| "0x0000".to_string()),
            max_link_speed: speed.clone(),
            max_link_width: width,
            current_link_speed: speed,
            current_link_width: width,
            numa_node: numa_of(p),
            local_cpulist: None,
            acs_ctl: None,
            busid,
        });
    }
    let stated = a.gpu.is_some() || a.fabric.is_some() || a.nvlinks.is_some();
    let gpu_els: Vec<usize> = pcis
        .iter()
        .copied()
        .filter(|p| gpu_of.contains_key(p))
        .collect();
    let dev_of = |p: usize| -> Option<u32> {
        doc.sub(p, "gpu")
            .and_then(|g| doc.attr(g, "dev"))
            .and_then(crate::config::parse_c_int)
            .and_then(|d| u32::try_from(d).ok())
    };
    let mut order: Vec<usize> = gpu_els.clone();
    order.sort_by_key(|&p| {
        (
            dev_of(p).unwrap_or(u32::MAX),
            busid_to_u64(doc.attr(p, "busid").unwrap_or("")),
        )
    });
    let mut gpus = Vec::new();
    for (index, &p) in order.iter().enumerate() {
        let m = gpu_of[&p];
        let busid = doc.attr(p, "busid").unwrap_or("").to_string();
        let fabric = a.fabric.unwrap_or(m.fabric);
        let count = a.nvlinks.unwrap_or(m.nvlinks);
        let make_links = doc.sub(p, "gpu").is_none() || stated;
        let remote: Option<String> = match fabric {
            _ if !make_links || count == 0 => None,
            Fabric::None => None,
            Fabric::NvSwitch => Some(NVSWITCH_TARGET.into()),
            Fabric::Pairs => order
                .get(index ^ 1)
                .and_then(|&q| doc.attr(q, "busid"))
                .map(str::to_lowercase),
        };
        let nvlinks = match remote {
            Some(r) => (0..count)
                .map(|link| NvLinkInfo {
                    link,
                    p2p: true,
                    active: true,
                    remote_busid: Some(r.clone()),
                })
                .collect(),
            None => Vec::new(),
        };
        gpus.push(GpuInfo {
            index: dev_of(p).unwrap_or(index as u32),
            name: m.name.to_string(),
            sm: doc
                .sub(p, "gpu")
                .and_then(|g| doc.attr(g, "sm"))
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(m.sm),
            numa_node: numa_of(p),
            nvlinks,
            nvlink_speed_mbps: None,
            c2c: m.c2c,
            busid,
        });
    }
    let nets = offline_nets(doc, &pcis, &nic_of, a);
    let grace = gpu_of.values().any(|m| m.grace);
    let (cpu, cpu_why) = guess_cpu(doc, a, grace);
    let numa = all
        .iter()
        .copied()
        .filter(|&c| doc.node(c).name == "cpu")
        .filter_map(|c| {
            Some(NumaNode {
                id: doc.attr(c, "numaid")?.trim().parse().ok()?,
                cpumap: doc.attr(c, "affinity").map(str::to_string),
                cpulist: None,
            })
        })
        .collect();
    let mut notes = Vec::new();
    let needs = Needs::of(doc);
    if needs.cpu
        && let Some(why) = cpu_why
    {
        notes.push(TopoNote::assumed(format!(
            "CPU: {} {}{} for the <cpu> elements that do not say, {why}; change with --assume cpu=MODEL",
            cpu.arch.as_deref().unwrap_or("?"),
            cpu.vendor.as_deref().unwrap_or(""),
            match (cpu.family, cpu.model) {
                (Some(f), Some(m)) => format!(" family {f} model {m}"),
                _ => String::new(),
            }
        )));
    }
    if needs.gpu || stated {
        for c in &gpu_choices {
            let m = c.model;
            let fabric = a.fabric.unwrap_or(m.fabric);
            let links = a.nvlinks.unwrap_or(m.nvlinks);
            let nvl = match fabric {
                _ if links == 0 => "no NVLink".to_string(),
                Fabric::None => "no NVLink".to_string(),
                Fabric::NvSwitch => format!("{links} NVLinks to NVSwitches"),
                Fabric::Pairs => format!("{links} NVLinks to its pair"),
            };
            notes.push(TopoNote::assumed(format!(
                "GPU: {} (sm {}, {nvl}, PCIe link {} x{}{}) for {}, {}; change with --assume gpu=MODEL, fabric=nvswitch|pairs|none, nvlinks=N",
                m.name,
                m.sm,
                m.link_speed,
                m.link_width,
                m.c2c.map_or(String::new(), |(bw, n)| format!(", {n} C2C links of {bw} MB/s")),
                list("GPU", &c.busids),
                c.why
            )));
        }
    }
    if needs.nic || a.nic.is_some() || a.nic_speed_gbps.is_some() {
        for c in &nic_choices {
            let m = c.model;
            notes.push(TopoNote::assumed(format!(
                "NIC: {} at {} Gb/s through NCCL's {} plugin, GPUDirect RDMA {}, for {}, {}; change with --assume nic=MODEL, nic-speed=GBPS",
                m.name,
                a.nic_speed_gbps.unwrap_or(m.speed_gbps),
                m.plugin.name(),
                if m.gdr { "yes" } else { "no" },
                list("NIC", &c.busids),
                c.why
            )));
        }
    }
    let inv = Inventory {
        root: "(offline: assumptions)".into(),
        host: HostInfo::default(),
        cpu,
        numa,
        pci,
        gpus,
        gpu_source: GpuSource::Facts("assumptions".into()),
        interfaces: Vec::new(),
        ifs: Vec::new(),
        hcas: Vec::new(),
        nets,
        host_id: "offline".into(),
    };
    (inv, notes)
}

/// The network devices: the file's `<net>` elements (in `dev` order) and one device for every
/// NIC-class `<pci>` without one (bus id order), named as the plugin would name them.
fn offline_nets(
    doc: &XmlDoc,
    pcis: &[usize],
    nic_of: &BTreeMap<usize, &'static NicModel>,
    a: &Assumptions,
) -> Vec<NetDev> {
    let mut named: Vec<(i64, u64, NetDev)> = Vec::new();
    let mut used: Vec<String> = Vec::new();
    let all: Vec<usize> = doc.root().map(|r| doc.descendants(r)).unwrap_or_default();
    let eth = models::find(models::NICS, "eth", |m| m.key).unwrap_or(&models::NICS[0]);
    let dev = |m: &NicModel, name: String, pci: Option<(String, u64)>, guid: u64| NetDev {
        name,
        is_pci: pci.is_some(),
        pci_path: pci.map(|(p, _)| p),
        speed_mbps: i64::from(a.nic_speed_gbps.unwrap_or(m.speed_gbps)) * 1000,
        port: u32::from(m.plugin != NetPlugin::Socket),
        guid,
        max_comms: m.max_comms,
        gdr: m.gdr,
        plugin: m.plugin.name(),
    };
    for &n in all.iter().filter(|&&i| doc.node(i).name == "net") {
        let Some(name) = doc.attr(n, "name") else {
            continue;
        };
        let pci = doc.ancestor(n, "pci");
        let m = pci
            .and_then(|p| nic_of.get(&p).copied())
            .unwrap_or(a.nic.unwrap_or(eth));
        let order = doc
            .attr(n, "dev")
            .and_then(crate::config::parse_c_int)
            .unwrap_or(i64::MAX);
        let at = pci.map(|p| {
            let b = doc.attr(p, "busid").unwrap_or("");
            (sys_path(doc, p), busid_to_u64(b))
        });
        let key = at.as_ref().map_or(u64::MAX, |x| x.1);
        used.push(name.to_string());
        let guid = 0xa088_c203_0000_0000 + named.len() as u64;
        named.push((order, key, dev(m, name.to_string(), at, guid)));
    }
    named.sort_by_key(|(o, k, _)| (*o, *k));
    let mut out: Vec<NetDev> = named.into_iter().map(|(_, _, d)| d).collect();
    let mut bare: Vec<usize> = pcis
        .iter()
        .copied()
        .filter(|p| nic_of.contains_key(p) && doc.sub(*p, "nic").is_none())
        .collect();
    bare.sort_by_key(|&p| busid_to_u64(doc.attr(p, "busid").unwrap_or("")));
    for p in bare {
        let m = nic_of[&p];
        let b = busid_to_u64(doc.attr(p, "busid").unwrap_or(""));
        let name = match m.plugin {
            NetPlugin::Ofi => format!("rdmap{}s{}", (b >> 12) & 0xff, (b >> 4) & 0xff),
            _ => {
                let prefix = if m.plugin == NetPlugin::Ib {
                    "mlx5_"
                } else {
                    "eth"
                };
                let mut k = 0;
                while used.contains(&format!("{prefix}{k}")) {
                    k += 1;
                }
                format!("{prefix}{k}")
            }
        };
        used.push(name.clone());
        let guid = match m.plugin {
            NetPlugin::Ib => 0xa088_c203_0000_0000 + out.len() as u64,
            _ => out.len() as u64,
        };
        out.push(dev(m, name, Some((sys_path(doc, p), b)), guid));
    }
    out
}

/// Which parts of a file leave something to the host that NCCL's builder needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// A `<cpu>` lacks `arch`, or an x86 one `vendor`, or an Intel/Zhaoxin one `familyid` or
    /// `modelid`.
    pub cpu: bool,
    /// A GPU lacks its `<gpu>` element, `sm` or `gdr`, a PCI element its class or link
    /// attributes, or an `<nvlink>` its `tclass`.
    pub gpu: bool,
    /// A NIC-class `<pci>` has no `<nic>`, or a `<net>` lacks `dev`.
    pub nic: bool,
}

impl Needs {
    /// What `doc` leaves to the host.
    pub fn of(doc: &XmlDoc) -> Needs {
        let mut n = Needs::default();
        let Some(root) = doc.root() else { return n };
        for i in doc.descendants(root) {
            let has = |k: &str| doc.attr(i, k).is_some();
            match doc.node(i).name.as_str() {
                "cpu" => {
                    let arch = doc.attr(i, "arch");
                    let vendor = doc.attr(i, "vendor").unwrap_or("");
                    let x86 = arch.is_some_and(|a| a.starts_with("x86_64"));
                    let intel = ["GenuineIntel", "CentaurHauls", "  Shanghai  "]
                        .iter()
                        .any(|v| vendor.starts_with(v));
                    if arch.is_none()
                        || (x86 && !has("vendor"))
                        || (x86 && intel && !(has("familyid") && has("modelid")))
                    {
                        n.cpu = true;
                    }
                }
                "pci" => {
                    if !has("class") || !has("link_speed") || !has("link_width") {
                        n.gpu |= is_gpu(doc, i) || !is_nic(doc, i);
                        n.nic |= is_nic(doc, i);
                    }
                    if is_gpu(doc, i) && doc.sub(i, "gpu").is_none() {
                        n.gpu = true;
                    }
                    if is_nic(doc, i) && !is_gpu(doc, i) && doc.sub(i, "nic").is_none() {
                        n.nic = true;
                    }
                }
                "gpu" => n.gpu |= !has("sm") || !has("gdr"),
                "nvlink" => n.gpu |= !has("tclass") || !has("count"),
                "net" => n.nic |= !has("dev"),
                _ => {}
            }
        }
        n
    }

    /// Whether anything is left to the host.
    pub fn any(&self) -> bool {
        self.cpu || self.gpu || self.nic
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topo::xml::read::{Schema, parse};

    fn doc(s: &str) -> XmlDoc {
        parse(s, "t.xml", Schema::Topology).unwrap().doc
    }

    #[test]
    fn guesses_from_ids_classes_and_link_speeds() {
        let d = doc(
            r#"<system version="1"><cpu numaid="0"><pci busid="ffff:ff:01.0" class="0x060400" vendor="0x8086">
            <pci busid="0000:10:1c.0" class="0x030200" vendor="0x10de" device="0x20b2" link_speed="8 GT/s" link_width="16"/>
            <pci busid="0000:10:1d.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
            <pci busid="0000:10:1b.0" class="0x020000" vendor="0x1d0f" device="0xefa0"/>
            <pci busid="0000:10:1e.0" class="0x020700" link_speed="16 GT/s"/>
            </pci></cpu></system>"#,
        );
        assert!(Needs::of(&d).any());
        let (inv, notes) = offline_host(&d, &Assumptions::default());
        let names: Vec<&str> = inv.gpus.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["A100 SXM4", "H100 SXM5"]);
        assert_eq!(inv.gpus[0].nvlinks.len(), 12);
        assert_eq!(
            inv.gpus[1].nvlinks[0].remote_busid.as_deref(),
            Some(NVSWITCH_TARGET)
        );
        let nets: Vec<(&str, i64, &str)> = inv
            .nets
            .iter()
            .map(|n| (n.name.as_str(), n.speed_mbps, n.plugin))
            .collect();
        assert_eq!(
            nets,
            [("rdmap16s27", 100_000, "OFI"), ("mlx5_0", 200_000, "IB")]
        );
        assert_eq!(inv.cpu.vendor.as_deref(), Some("GenuineIntel"));
        let text: Vec<String> = notes.iter().map(|n| n.message.clone()).collect();
        assert!(
            text.iter().any(|t| t.contains("PCI id 10de:20b2")),
            "{text:#?}"
        );
        assert!(
            text.iter().any(|t| t.contains("Intel (8086) PCI bridges")),
            "{text:#?}"
        );
        let stated = Assumptions::parse(&["gpu=l4", "nic=cx7", "nic-speed=200"]).unwrap();
        let (inv, _) = offline_host(&d, &stated);
        assert!(inv.gpus.iter().all(|g| g.sm == 89 && g.nvlinks.is_empty()));
        assert!(
            inv.nets
                .iter()
                .all(|n| n.speed_mbps == 200_000 && n.plugin == "IB")
        );
    }

    #[test]
    fn pairs_link_neighbours_in_bus_order() {
        let d = doc(
            r#"<system version="1"><cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
            <pci busid="0000:02:00.0" class="0x030200"/><pci busid="0000:01:00.0" class="0x030200"/>
            </cpu></system>"#,
        );
        let (inv, _) = offline_host(&d, &Assumptions::parse(&["gpu=h100-nvl"]).unwrap());
        assert_eq!(inv.gpus[0].busid, "0000:01:00.0");
        assert_eq!(
            inv.gpus[0].nvlinks[0].remote_busid.as_deref(),
            Some("0000:02:00.0")
        );
        assert_eq!(inv.cpu.vendor.as_deref(), Some("AuthenticAMD"));
    }
}
