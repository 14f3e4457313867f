//! Building the node graph from topology XML, as NCCL's `ncclTopoGetSystemFromXml` does
//! (NCCL 2.28 src/graph/topo.cc): CPUs and their PCI trees, GPUs, NICs and NETs, then NVLinks,
//! C2C links and BCM switch peer links, flattening of Broadcom PEX switches, CPU-to-CPU links,
//! and NCCL's link order (NVLink first, PCI down, PCI up, SYS).

use std::collections::BTreeMap;

use super::{
    CpuArch, CpuModel, CpuNode, CpuVendor, GpuNode, LOCAL_ID_MASK, Link, NetNode, Node, NodeInfo,
    NodeRef,
};
use crate::topo::busid::busid_to_u64;
use crate::topo::bw::{self, LOC_BW};
use crate::topo::kinds::{LinkType, NodeType};
use crate::topo::xml::XmlDoc;
use crate::topo::{TopoError, TopoNote};

/// The PCI class prefixes NCCL maps to node types (src/graph/topo.cc `kvDictPciClass`), prefix
/// matched in order; anything else is a PCI switch or bridge.
pub fn class_type(class: &str) -> NodeType {
    const TABLE: [(&str, NodeType); 6] = [
        ("0x060400", NodeType::Pci),
        ("0x080100", NodeType::Pci),
        ("0x068000", NodeType::Nvs),
        ("0x068001", NodeType::Cpu),
        ("0x03", NodeType::Gpu),
        ("0x02", NodeType::Nic),
    ];
    TABLE
        .iter()
        .find(|(k, _)| class.starts_with(k))
        .map_or(NodeType::Pci, |&(_, t)| t)
}

pub(crate) type Nodes = [Vec<Node>; 6];

/// A visitor of XML elements with the bus id of the closest PCI element above them.
type Visit<'b, 'd> =
    dyn FnMut(&mut Builder<'d>, usize, Option<&str>, usize) -> Result<(), TopoError> + 'b;

struct Builder<'a> {
    doc: &'a XmlDoc,
    nodes: Nodes,
    ranks: BTreeMap<usize, usize>,
    notes: Vec<TopoNote>,
    one_way: Vec<(NodeRef, NodeRef, LinkType, usize)>,
    hosts: Vec<u64>,
}

/// The nodes and links of a document, with the hosts they belong to.
pub(crate) struct Built {
    /// Nodes by type.
    pub nodes: Nodes,
    /// `host_hash` of every host, in order of first appearance: a node's id carries the index
    /// (NCCL's `systemId`) in its top 8 bits.
    pub hosts: Vec<u64>,
    /// What was noticed.
    pub notes: Vec<TopoNote>,
}

/// NCCL's `NCCL_TOPO_ID(systemId, localId)`: the host index in the top 8 bits, the local id
/// (bus id, NUMA id, net dev) below.
pub fn topo_id(system: usize, local: u64) -> u64 {
    ((system as u64) << 56).wrapping_add(local & LOCAL_ID_MASK)
}

/// The `host_hash` of a `<cpu>` as NCCL reads it (`strtoull(s, NULL, 16)`, 0 when absent or not
/// hexadecimal).
pub(crate) fn host_hash(doc: &XmlDoc, cpu: usize) -> u64 {
    doc.attr(cpu, "host_hash").map_or(0, |h| {
        let t = h.trim();
        let t = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        let end = t.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(t.len());
        u64::from_str_radix(&t[..end], 16).unwrap_or(0)
    })
}

/// The host index of every `<cpu>` directly under the root, in NCCL's order
/// (`ncclGetSystemId`: a new index for every `host_hash` not seen before), and the hashes.
pub(crate) fn host_ids(doc: &XmlDoc) -> (BTreeMap<usize, usize>, Vec<u64>) {
    let mut ids = BTreeMap::new();
    let mut hosts: Vec<u64> = Vec::new();
    if let Some(root) = doc.root() {
        for &c in &doc.node(root).children {
            if doc.node(c).name != "cpu" {
                continue;
            }
            let h = host_hash(doc, c);
            let id = match hosts.iter().position(|&x| x == h) {
                Some(i) => i,
                None => {
                    hosts.push(h);
                    hosts.len() - 1
                }
            };
            ids.insert(c, id);
        }
    }
    (ids, hosts)
}

/// Builds the nodes and links described by `doc`.
///
/// `assign_ranks`: give GPUs without a `rank` attribute ranks in `dev` order after the ranks
/// already used (rnccl's offline view of a whole machine); without it such GPUs are left out,
/// as NCCL leaves out GPUs no rank owns.
///
/// Several `host_hash` values make several hosts (a multi-node NVLink dump, as NCCL writes it
/// for an MNNVL clique): node ids carry the host index (NCCL `ncclGetSystemId`), one NVSwitch
/// node serves every host, and CPUs connect only within their host (`ncclTopoConnectCpus`).
///
/// Errors: [`TopoError::Xml`] naming the element's line when an attribute NCCL requires is
/// missing or not a number (`cpu numaid/arch`, `pci busid/class/link_width/link_speed`,
/// `gpu sm`, `nvlink count/tclass/target`, `c2c count/bw`, `net dev`), or two GPUs share a rank.
pub(crate) fn build(doc: &XmlDoc, assign_ranks: bool) -> Result<Built, TopoError> {
    let (cpu_hosts, hosts) = host_ids(doc);
    let mut b = Builder {
        doc,
        nodes: Default::default(),
        ranks: BTreeMap::new(),
        notes: Vec::new(),
        one_way: Vec::new(),
        hosts,
    };
    b.ranks = gpu_ranks(doc, assign_ranks, &cpu_hosts)?;
    let root = doc
        .root()
        .ok_or_else(|| TopoError::Unusable("empty topology".into()))?;
    for &c in &doc.node(root).children {
        if doc.node(c).name == "cpu" {
            b.add_cpu(c, cpu_hosts[&c])?;
        }
    }
    b.walk(root, None, 0, &mut |b, i, busid, sys| {
        b.add_nvlink(i, busid, sys)
    })?;
    b.walk(root, None, 0, &mut |b, i, busid, sys| {
        b.add_c2c(i, busid, sys)
    })?;
    b.walk(root, None, 0, &mut |b, i, busid, sys| {
        b.add_pcilink(i, busid, sys)
    })?;
    for &(a, r, ty, x) in &b.one_way {
        if !b.nodes[r.ty.index()][r.idx]
            .links
            .iter()
            .any(|l| l.rem == a && l.ty == ty)
        {
            return Err(doc.error(
                x,
                format!(
                    "<{} target=\"{}\">: {} has no <{}> back to {}; NCCL fails on one-sided links (\"Failed to find reverse path\")",
                    doc.node(x).name,
                    doc.attr(x, "target").unwrap_or(""),
                    b.nodes[r.ty.index()][r.idx].label(),
                    doc.node(x).name,
                    b.nodes[a.ty.index()][a.idx].label()
                ),
            ));
        }
    }
    super::links::flatten_bcm_switches(&mut b.nodes);
    super::links::connect_cpus(&mut b.nodes);
    super::links::sort_links(&mut b.nodes);
    Ok(Built {
        nodes: b.nodes,
        hosts: b.hosts,
        notes: b.notes,
    })
}

/// The rank of every `<gpu>` element that gets one, by element index; GPUs without a rank are
/// numbered by host, then `dev`.
fn gpu_ranks(
    doc: &XmlDoc,
    assign: bool,
    cpu_hosts: &BTreeMap<usize, usize>,
) -> Result<BTreeMap<usize, usize>, TopoError> {
    let Some(root) = doc.root() else {
        return Ok(BTreeMap::new());
    };
    let gpus: Vec<usize> = doc
        .descendants(root)
        .into_iter()
        .filter(|&i| doc.node(i).name == "gpu")
        .collect();
    let mut ranks = BTreeMap::new();
    let mut owner: BTreeMap<usize, usize> = BTreeMap::new();
    let mut unranked = Vec::new();
    for &g in &gpus {
        match doc.attr(g, "rank") {
            Some(r) => {
                let r = int(doc, g, "rank", r)?;
                let r = usize::try_from(r)
                    .map_err(|_| doc.error(g, format!("<gpu rank=\"{r}\">: a rank is >= 0")))?;
                if let Some(&other) = owner.get(&r) {
                    return Err(doc.error(
                        g,
                        format!(
                            "<gpu rank=\"{r}\">: rank {r} is already the GPU at line {}",
                            doc.node(other).line
                        ),
                    ));
                }
                owner.insert(r, g);
                ranks.insert(g, r);
            }
            None if assign => {
                let dev = doc.attr(g, "dev").and_then(crate::config::parse_c_int);
                let host = doc
                    .ancestor(g, "cpu")
                    .and_then(|c| cpu_hosts.get(&c).copied())
                    .unwrap_or(0);
                unranked.push((host, dev.unwrap_or(i64::MAX), g));
            }
            None => {}
        }
    }
    unranked.sort();
    let mut next = 0;
    for (_, _, g) in unranked {
        while owner.contains_key(&next) {
            next += 1;
        }
        owner.insert(next, g);
        ranks.insert(g, next);
    }
    Ok(ranks)
}

/// An integer attribute value with C `strtol(s, NULL, 0)` rules; empty reads as 0 like NCCL.
pub(crate) fn int(doc: &XmlDoc, i: usize, key: &str, v: &str) -> Result<i64, TopoError> {
    if v.trim().is_empty() {
        return Ok(0);
    }
    crate::config::parse_c_int(v).ok_or_else(|| {
        doc.error(
            i,
            format!("<{} {key}=\"{v}\">: not an integer", doc.node(i).name),
        )
    })
}

fn required<'d>(doc: &'d XmlDoc, i: usize, key: &str) -> Result<&'d str, TopoError> {
    doc.attr(i, key).ok_or_else(|| {
        doc.error(
            i,
            format!(
                "<{}> needs attribute {key} (NCCL refuses the file without it)",
                doc.node(i).name
            ),
        )
    })
}

fn required_int(doc: &XmlDoc, i: usize, key: &str) -> Result<i64, TopoError> {
    int(doc, i, key, required(doc, i, key)?)
}

fn optional_int(doc: &XmlDoc, i: usize, key: &str, default: i64) -> Result<i64, TopoError> {
    doc.attr(i, key)
        .map_or(Ok(default), |v| int(doc, i, key, v))
}

/// Adds a link from `a` to `b` as NCCL's `ncclTopoConnectNodes`: bandwidths of parallel links of
/// one type add up, and the link moves up to keep the list sorted by decreasing bandwidth.
pub(crate) fn connect(nodes: &mut Nodes, a: NodeRef, b: NodeRef, ty: LinkType, bw: f32) {
    let links = &mut nodes[a.ty.index()][a.idx].links;
    let mut pos = match links.iter().position(|l| l.rem == b && l.ty == ty) {
        Some(p) => {
            links[p].bw += bw;
            p
        }
        None => {
            links.push(Link { ty, bw, rem: b });
            links.len() - 1
        }
    };
    while pos > 0 && links[pos - 1].bw < links[pos].bw {
        links.swap(pos - 1, pos);
        pos -= 1;
    }
}

fn create(
    nodes: &mut Nodes,
    ty: NodeType,
    id: u64,
    info: NodeInfo,
    busid: Option<String>,
    xml: usize,
) -> NodeRef {
    let v = &mut nodes[ty.index()];
    v.push(Node {
        ty,
        id,
        info,
        links: Vec::new(),
        busid,
        xml: Some(xml),
        paths: Default::default(),
    });
    NodeRef::new(ty, v.len() - 1)
}

fn find(nodes: &Nodes, ty: NodeType, id: u64) -> Option<NodeRef> {
    nodes[ty.index()]
        .iter()
        .position(|n| n.id == id)
        .map(|i| NodeRef::new(ty, i))
}

impl<'a> Builder<'a> {
    fn add_cpu(&mut self, x: usize, sys: usize) -> Result<(), TopoError> {
        let doc = self.doc;
        let numa = required_int(doc, x, "numaid")?;
        let arch_s = required(doc, x, "arch")?;
        let arch = [
            ("x86_64", CpuArch::X86),
            ("arm64", CpuArch::Arm),
            ("ppc64", CpuArch::Power),
        ]
        .iter()
        .find(|(k, _)| arch_s.starts_with(k))
        .map_or(CpuArch::Unknown, |&(_, a)| a);
        let mut vendor = CpuVendor::Unknown;
        let mut model = CpuModel::Unknown;
        if arch == CpuArch::X86 {
            let v = required(doc, x, "vendor")?;
            vendor = [
                ("GenuineIntel", CpuVendor::Intel),
                ("AuthenticAMD", CpuVendor::Amd),
                ("CentaurHauls", CpuVendor::Zhaoxin),
                ("  Shanghai  ", CpuVendor::Zhaoxin),
            ]
            .iter()
            .find(|(k, _)| v.starts_with(k))
            .map_or(CpuVendor::Unknown, |&(_, a)| a);
            if matches!(vendor, CpuVendor::Intel | CpuVendor::Zhaoxin) {
                let family = required_int(doc, x, "familyid")?;
                let m = required_int(doc, x, "modelid")?;
                model = match vendor {
                    CpuVendor::Intel if family == 6 && m >= 0xCF => CpuModel::IntelErp,
                    CpuVendor::Intel if family == 6 && m >= 0x8F => CpuModel::IntelSrp,
                    CpuVendor::Intel if family == 6 && m >= 0x55 => CpuModel::IntelSkl,
                    CpuVendor::Intel => CpuModel::IntelBdw,
                    _ if family == 7 && m == 0x5B => CpuModel::Yongfeng,
                    _ => CpuModel::Unknown,
                };
            }
        }
        let info = NodeInfo::Cpu(CpuNode {
            numa,
            arch,
            vendor,
            model,
            affinity: doc.attr(x, "affinity").map(str::to_string),
        });
        let cpu = create(
            &mut self.nodes,
            NodeType::Cpu,
            topo_id(sys, numa as u64),
            info,
            None,
            x,
        );
        for &c in &doc.node(x).children {
            match doc.node(c).name.as_str() {
                "pci" => self.add_pci(c, cpu, sys)?,
                "nic" => {
                    let id = topo_id(sys, 0);
                    let nic = match find(&self.nodes, NodeType::Nic, id) {
                        Some(n) => n,
                        None => {
                            let n =
                                create(&mut self.nodes, NodeType::Nic, id, NodeInfo::Nic, None, c);
                            connect(&mut self.nodes, cpu, n, LinkType::Pci, LOC_BW);
                            connect(&mut self.nodes, n, cpu, LinkType::Pci, LOC_BW);
                            n
                        }
                    };
                    self.add_nic(c, nic, sys)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn add_pci(&mut self, x: usize, parent: NodeRef, sys: usize) -> Result<(), TopoError> {
        let doc = self.doc;
        let class = required(doc, x, "class")?;
        let mut ty = class_type(class);
        let busid_s = required(doc, x, "busid")?;
        let busid = busid_to_u64(busid_s);
        let mut node = None;
        if let Some(g) = doc.sub(x, "gpu") {
            ty = NodeType::Gpu;
            let Some(&rank) = self.ranks.get(&g) else {
                return Ok(());
            };
            let sm = required_int(doc, g, "sm")?;
            let dev = optional_int(doc, g, "dev", rank as i64)?;
            let gdr = match doc.attr(g, "gdr") {
                Some(v) => int(doc, g, "gdr", v)? != 0,
                None => {
                    self.notes.push(TopoNote::note(format!(
                        "line {}: <gpu> has no gdr attribute; NCCL requires it (rnccl assumes gdr=\"0\")",
                        doc.node(g).line
                    )));
                    false
                }
            };
            let info = NodeInfo::Gpu(GpuNode {
                dev: dev as i32,
                rank,
                sm: sm as u32,
                gdr,
            });
            node = Some(create(
                &mut self.nodes,
                NodeType::Gpu,
                topo_id(sys, busid),
                info,
                Some(busid_s.to_string()),
                x,
            ));
        }
        if let Some(n) = doc.sub(x, "nic") {
            let id = topo_id(sys, busid);
            let nic = match find(&self.nodes, NodeType::Nic, id) {
                Some(r) => r,
                None => {
                    let r = create(
                        &mut self.nodes,
                        NodeType::Nic,
                        id,
                        NodeInfo::Nic,
                        Some(busid_s.to_string()),
                        x,
                    );
                    node = Some(r);
                    r
                }
            };
            self.add_nic(n, nic, sys)?;
        } else if ty == NodeType::Pci {
            let mut device: u64 = 0;
            for (key, shift) in [
                ("vendor", 48),
                ("device", 32),
                ("subsystem_vendor", 16),
                ("subsystem_device", 0),
            ] {
                if let Some(v) = doc.attr(x, key) {
                    device = device.wrapping_add((int(doc, x, key, v)? as u64) << shift);
                }
            }
            let r = create(
                &mut self.nodes,
                NodeType::Pci,
                topo_id(sys, busid),
                NodeInfo::Pci { device },
                Some(busid_s.to_string()),
                x,
            );
            node = Some(r);
            for &c in &doc.node(x).children {
                if doc.node(c).name == "pci" {
                    self.add_pci(c, r, sys)?;
                }
            }
        } else if ty != NodeType::Gpu {
            self.notes.push(TopoNote::note(format!(
                "line {}: PCI device {busid_s} (class {class}) has no <{}> element; it is left out, as NCCL leaves it out",
                doc.node(x).line,
                if ty == NodeType::Nic { "nic" } else { "gpu" }
            )));
        }
        if ty == NodeType::Gpu && node.is_none() && doc.sub(x, "gpu").is_none() {
            self.notes.push(TopoNote::note(format!(
                "line {}: GPU {busid_s} has no <gpu> element (NCCL fills it from NVML for its own ranks); it is left out",
                doc.node(x).line
            )));
        }
        if let Some(n) = node {
            let width = required_int(doc, x, "link_width")?;
            let speed = required(doc, x, "link_speed")?;
            let b = bw::pci_link_bw(speed, width.max(0) as u32);
            connect(&mut self.nodes, n, parent, LinkType::Pci, b);
            connect(&mut self.nodes, parent, n, LinkType::Pci, b);
        }
        Ok(())
    }

    fn add_nic(&mut self, x: usize, nic: NodeRef, sys: usize) -> Result<(), TopoError> {
        let doc = self.doc;
        let pci_busid = doc.ancestor(x, "pci").and_then(|p| doc.attr(p, "busid"));
        for &n in &doc.node(x).children {
            if doc.node(n).name != "net" || doc.attr(n, "dev").is_none() {
                continue;
            }
            let dev = required_int(doc, n, "dev")?;
            let id = topo_id(sys, dev as u64);
            let asic = match doc.attr(n, "guid") {
                Some(g) => u64::from_str_radix(
                    g.trim().trim_start_matches("0x").trim_start_matches("0X"),
                    16,
                )
                .map_err(|_| doc.error(n, format!("<net guid=\"{g}\">: not a hex number")))?,
                None => id,
            };
            let speed = optional_int(doc, n, "speed", 0)?;
            let latency = match doc.attr(n, "latency") {
                Some(v) => v.trim().parse::<f32>().unwrap_or(0.0),
                None => 0.0,
            };
            let net_bw = bw::net_bw(speed);
            let info = NodeInfo::Net(NetNode {
                dev,
                name: doc.attr(n, "name").unwrap_or("").to_string(),
                asic,
                port: optional_int(doc, n, "port", 0)?,
                bw: net_bw,
                latency,
                gdr: optional_int(doc, n, "gdr", 0)? != 0,
                coll: optional_int(doc, n, "coll", 0)? != 0,
                max_channels: optional_int(doc, n, "maxconn", 64)?,
                pci_id: fnv(pci_busid
                    .map_or_else(|| asic.to_le_bytes().to_vec(), |b| b.as_bytes().to_vec())),
                local_gpu: None,
            });
            let net = create(
                &mut self.nodes,
                NodeType::Net,
                id,
                info,
                pci_busid.map(str::to_string),
                n,
            );
            connect(&mut self.nodes, nic, net, LinkType::Net, net_bw);
            connect(&mut self.nodes, net, nic, LinkType::Net, net_bw);
        }
        Ok(())
    }

    /// Visits `i` and its subtree with the closest bus id above and the host index (NCCL's
    /// recursive `ncclTopoAddNvLinks` and siblings, which take the system id from each `<cpu>`).
    fn walk(
        &mut self,
        i: usize,
        busid: Option<&str>,
        sys: usize,
        f: &mut Visit<'_, 'a>,
    ) -> Result<(), TopoError> {
        let doc = self.doc;
        let sys = if doc.node(i).name == "cpu" {
            self.hosts
                .iter()
                .position(|&h| h == host_hash(doc, i))
                .unwrap_or(sys)
        } else {
            sys
        };
        f(self, i, busid, sys)?;
        let here = doc.attr(i, "busid").or(busid);
        for &c in &doc.node(i).children {
            self.walk(c, here, sys, f)?;
        }
        Ok(())
    }

    fn gpu_at(&self, busid: Option<&str>, sys: usize) -> Option<NodeRef> {
        find(
            &self.nodes,
            NodeType::Gpu,
            topo_id(sys, busid_to_u64(busid?)),
        )
    }

    fn add_nvlink(&mut self, i: usize, busid: Option<&str>, sys: usize) -> Result<(), TopoError> {
        let doc = self.doc;
        if doc.node(i).name != "nvlink" {
            return Ok(());
        }
        let Some(gpu) = self.gpu_at(busid, sys) else {
            return Ok(());
        };
        let count = required_int(doc, i, "count")?;
        let tclass = required(doc, i, "tclass")?;
        let remote = match class_type(tclass) {
            NodeType::Gpu => {
                let target = required(doc, i, "target")?;
                find(
                    &self.nodes,
                    NodeType::Gpu,
                    topo_id(sys, busid_to_u64(target)),
                )
            }
            NodeType::Cpu => find_local_cpu(&self.nodes, gpu, None),
            _ => Some(match self.nodes[NodeType::Nvs.index()].is_empty() {
                true => create(&mut self.nodes, NodeType::Nvs, 0, NodeInfo::Nvs, None, i),
                false => NodeRef::new(NodeType::Nvs, 0),
            }),
        };
        let Some(remote) = remote else { return Ok(()) };
        let sm = self.nodes[gpu.ty.index()][gpu.idx]
            .gpu()
            .map_or(0, |g| g.sm);
        let b = count as f32 * bw::nvlink_bw(sm);
        connect(&mut self.nodes, gpu, remote, LinkType::Nvl, b);
        if remote.ty == NodeType::Gpu {
            self.one_way.push((gpu, remote, LinkType::Nvl, i));
        } else {
            connect(&mut self.nodes, remote, gpu, LinkType::Nvl, b);
        }
        Ok(())
    }

    fn add_c2c(&mut self, i: usize, busid: Option<&str>, sys: usize) -> Result<(), TopoError> {
        let doc = self.doc;
        if doc.node(i).name != "c2c" {
            return Ok(());
        }
        let Some(gpu) = self.gpu_at(busid, sys) else {
            return Ok(());
        };
        let count = required_int(doc, i, "count")?;
        let b = required_int(doc, i, "bw")?;
        let c2c = ((b * count) as f64 / 1000.0) as f32;
        if let Some(cpu) = find_local_cpu(&self.nodes, gpu, None) {
            connect(&mut self.nodes, gpu, cpu, LinkType::C2c, c2c);
            connect(&mut self.nodes, cpu, gpu, LinkType::C2c, c2c);
        }
        Ok(())
    }

    fn add_pcilink(&mut self, i: usize, busid: Option<&str>, sys: usize) -> Result<(), TopoError> {
        let doc = self.doc;
        if doc.node(i).name != "pcilink" {
            return Ok(());
        }
        let Some(pci) =
            busid.and_then(|b| find(&self.nodes, NodeType::Pci, topo_id(sys, busid_to_u64(b))))
        else {
            return Err(doc.error(i, "<pcilink> outside a PCI switch that NCCL keeps"));
        };
        let target = required(doc, i, "target")?;
        if let Some(r) = find(
            &self.nodes,
            NodeType::Pci,
            topo_id(sys, busid_to_u64(target)),
        ) {
            connect(&mut self.nodes, pci, r, LinkType::Loc, LOC_BW);
            self.one_way.push((pci, r, LinkType::Loc, i));
        }
        Ok(())
    }
}

fn fnv(bytes: Vec<u8>) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The CPU above `node` following PCI links up the tree (NCCL `findLocalCpu`).
pub(crate) fn find_local_cpu(
    nodes: &Nodes,
    node: NodeRef,
    from: Option<NodeRef>,
) -> Option<NodeRef> {
    if node.ty == NodeType::Cpu {
        return Some(node);
    }
    for l in &nodes[node.ty.index()][node.idx].links {
        if l.ty == LinkType::Pci
            && Some(l.rem) != from
            && matches!(l.rem.ty, NodeType::Pci | NodeType::Cpu)
            && let Some(c) = find_local_cpu(nodes, l.rem, Some(node))
        {
            return Some(c);
        }
    }
    None
}
