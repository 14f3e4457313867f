//! The system graph: NCCL's nodes (GPU, PCI, NVS, CPU, NIC, NET), the links between them with
//! their bandwidths, and the paths between every GPU, NIC, CPU and NVSwitch (NCCL 2.28
//! src/graph/topo.h `ncclTopoSystem`). Built from NCCL topology XML by [`build`]; paths by
//! `topo::paths` (NCCL's src/graph/paths.cc).

pub mod build;
mod links;

use serde::Serialize;

use crate::topo::bw::LOC_BW;
use crate::topo::kinds::{LinkType, NodeType, PathType};
use crate::topo::params::TopoParams;
use crate::topo::xml::XmlDoc;

/// Mask of the local part of a node id; the top 8 bits hold the host index (NCCL
/// `NCCL_TOPO_ID_LOCAL_ID_MASK`).
pub const LOCAL_ID_MASK: u64 = 0x00ff_ffff_ffff_ffff;

/// A node of the graph: its type and its index among the nodes of that type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct NodeRef {
    /// The node's type.
    pub ty: NodeType,
    /// Index among the nodes of that type (NCCL's `system->nodes[ty].nodes[idx]`).
    pub idx: usize,
}

impl NodeRef {
    /// The node `idx` of type `ty`.
    pub fn new(ty: NodeType, idx: usize) -> NodeRef {
        NodeRef { ty, idx }
    }
}

/// CPU architecture (NCCL `NCCL_TOPO_CPU_ARCH_*`: x86 = 1, POWER = 2, ARM = 3; 0 unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CpuArch {
    /// Not given or not recognised.
    Unknown = 0,
    /// x86_64.
    X86 = 1,
    /// ppc64 (POWER).
    Power = 2,
    /// arm64.
    Arm = 3,
}

/// CPU vendor, x86 only (NCCL `NCCL_TOPO_CPU_VENDOR_*`: Intel = 1, AMD = 2, Zhaoxin = 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CpuVendor {
    /// Not x86, or not recognised.
    Unknown = 0,
    /// GenuineIntel.
    Intel = 1,
    /// AuthenticAMD.
    Amd = 2,
    /// CentaurHauls / Shanghai.
    Zhaoxin = 3,
}

/// CPU generation where NCCL distinguishes it (`NCCL_TOPO_CPU_MODEL_*`): Intel BDW = 1, SKL = 2,
/// SRP = 3, ERP = 4; Zhaoxin Yongfeng = 1; 0 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CpuModel {
    /// No model distinction.
    Unknown = 0,
    /// Intel Broadwell or older.
    IntelBdw = 1,
    /// Intel Skylake.
    IntelSkl = 2,
    /// Intel Sapphire Rapids.
    IntelSrp = 3,
    /// Intel Emerald Rapids.
    IntelErp = 4,
    /// Zhaoxin Yongfeng.
    Yongfeng = 5,
}

impl CpuModel {
    /// NCCL's integer code (Yongfeng is 1 in NCCL, like BDW, in a separate vendor space).
    pub fn code(self) -> u32 {
        match self {
            CpuModel::Yongfeng => 1,
            other => other as u32,
        }
    }
}

/// What a GPU node knows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuNode {
    /// NVML device index (`dev`).
    pub dev: i32,
    /// The rank owning this GPU (`rank`; rnccl numbers GPUs that have none by `dev`).
    pub rank: usize,
    /// Compute capability, major*10+minor (`sm`).
    pub sm: u32,
    /// GPUDirect RDMA support (`gdr`).
    pub gdr: bool,
}

/// What a CPU (NUMA domain) node knows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuNode {
    /// NUMA id (`numaid`, -1 when unknown).
    pub numa: i64,
    /// Architecture.
    pub arch: CpuArch,
    /// Vendor (x86).
    pub vendor: CpuVendor,
    /// Model class.
    pub model: CpuModel,
    /// The `affinity` cpumask as written (sysfs `cpumap` format), if given.
    pub affinity: Option<String>,
}

/// What a NET (network port) node knows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetNode {
    /// Net plugin device index (`dev`).
    pub dev: i64,
    /// Device name (`name`: `mlx5_0`, `eth0`).
    pub name: String,
    /// ASIC identity (`guid`; the node id when absent).
    pub asic: u64,
    /// Port number (`port`).
    pub port: i64,
    /// Bandwidth in GB/s (`speed` Mb/s / 8000).
    pub bw: f32,
    /// Latency in µs (`latency`).
    pub latency: f32,
    /// GPUDirect RDMA support (`gdr`).
    pub gdr: bool,
    /// CollNet support (`coll`).
    pub coll: bool,
    /// Maximum connections (`maxconn`).
    pub max_channels: i64,
    /// Hash of the PCI bus id of the NIC (or of the guid), for rail matching.
    pub pci_id: u64,
    /// The GPU NCCL pairs with this NET (`net.localGpu`), set with the paths.
    pub local_gpu: Option<usize>,
}

/// Type-specific data of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum NodeInfo {
    /// A GPU.
    Gpu(GpuNode),
    /// A PCI switch: vendor<<48 | device<<32 | subsystem_vendor<<16 | subsystem_device.
    Pci {
        /// The packed PCI ids.
        device: u64,
    },
    /// The NVSwitch fabric.
    Nvs,
    /// A NUMA domain.
    Cpu(CpuNode),
    /// A NIC.
    Nic,
    /// A network port.
    Net(NetNode),
}

/// A directed link from one node to another.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Link {
    /// Link kind.
    pub ty: LinkType,
    /// Bandwidth in GB/s (summed over parallel links of the same kind).
    pub bw: f32,
    /// The node at the other end.
    pub rem: NodeRef,
}

/// One link of a path: link number `link` of node `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LinkId {
    /// The node the link leaves from.
    pub from: NodeRef,
    /// Index into that node's links.
    pub link: usize,
}

/// A path from one node to another: its links in order from the source, its bottleneck
/// bandwidth in GB/s and its type (NCCL `ncclTopoLinkList`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Path {
    /// The links, source first.
    pub links: Vec<LinkId>,
    /// Bottleneck bandwidth, GB/s (LOC_BW for a node to itself, 0 when disconnected).
    pub bw: f32,
    /// NCCL path type.
    pub ty: PathType,
}

impl Path {
    pub(crate) fn disconnected() -> Path {
        Path {
            links: Vec::new(),
            bw: 0.0,
            ty: PathType::Dis,
        }
    }

    pub(crate) fn local() -> Path {
        Path {
            links: Vec::new(),
            bw: LOC_BW,
            ty: PathType::Loc,
        }
    }

    /// Number of links (NCCL's `count`, the hops printed in INFO GRAPH path lines).
    pub fn hops(&self) -> usize {
        self.links.len()
    }
}

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Node type.
    pub ty: NodeType,
    /// NCCL id: bus id number for GPU/PCI/NIC, NUMA id for CPU, plugin dev for NET, 0 for NVS.
    pub id: u64,
    /// Type-specific data.
    pub info: NodeInfo,
    /// Outgoing links, in NCCL's order (NVLink first, by bandwidth; PCI up-link last).
    pub links: Vec<Link>,
    /// The PCI bus id (`dddd:bb:dd.f`) for GPU, PCI and NIC nodes.
    pub busid: Option<String>,
    /// The XML element the node came from.
    #[serde(skip)]
    pub xml: Option<usize>,
    #[serde(skip)]
    pub(crate) paths: [Vec<Path>; 6],
}

impl Node {
    /// The host index (NCCL `NCCL_TOPO_ID_SYSTEM_ID`) in the node's id.
    pub fn host(&self) -> usize {
        (self.id >> 56) as usize
    }

    /// NCCL's `TYPE/sys-id` label as INFO GRAPH prints it (`GPU/0-1b000`, `CPU/0-ffffffffffffff`).
    pub fn label(&self) -> String {
        format!(
            "{}/{:x}-{:x}",
            self.ty.as_str(),
            self.id >> 56,
            self.id & LOCAL_ID_MASK
        )
    }

    /// The GPU data, for GPU nodes.
    pub fn gpu(&self) -> Option<&GpuNode> {
        match &self.info {
            NodeInfo::Gpu(g) => Some(g),
            _ => None,
        }
    }

    /// The CPU data, for CPU nodes.
    pub fn cpu(&self) -> Option<&CpuNode> {
        match &self.info {
            NodeInfo::Cpu(c) => Some(c),
            _ => None,
        }
    }

    /// The NET data, for NET nodes.
    pub fn net(&self) -> Option<&NetNode> {
        match &self.info {
            NodeInfo::Net(n) => Some(n),
            _ => None,
        }
    }
}

/// A machine's topology as NCCL models it: the node graph, its paths, the XML it came from and
/// what was noticed while reading it.
#[derive(Debug, Clone)]
pub struct System {
    pub(crate) nodes: [Vec<Node>; 6],
    /// The `host_hash` of every host the topology spans, in NCCL's `systemId` order: one for a
    /// node's own view, several for a multi-node NVLink (MNNVL) dump.
    pub hosts: Vec<u64>,
    /// The knobs the paths were computed with.
    pub params: TopoParams,
    /// NCCL-compatibility notes from reading the XML (those NCCL would refuse the file over are
    /// flagged), and what detection had to guess.
    pub notes: Vec<crate::topo::TopoNote>,
    /// What detection read from sysfs and NVML, when the system came from this host.
    pub inventory: Option<crate::topo::detect::Inventory>,
    pub(crate) xml: XmlDoc,
}

impl System {
    /// The nodes of type `ty`, in NCCL's index order.
    pub fn nodes(&self, ty: NodeType) -> &[Node] {
        &self.nodes[ty.index()]
    }

    /// Number of nodes of type `ty`.
    pub fn count(&self, ty: NodeType) -> usize {
        self.nodes[ty.index()].len()
    }

    /// The node `r`.
    pub fn node(&self, r: NodeRef) -> &Node {
        &self.nodes[r.ty.index()][r.idx]
    }

    /// The link `l`.
    pub fn link(&self, l: LinkId) -> &Link {
        &self.node(l.from).links[l.link]
    }

    /// The path from `from` to `to`, if paths toward `to`'s type were computed (they are for
    /// GPU, NET, CPU and NVS destinations).
    pub fn path(&self, from: NodeRef, to: NodeRef) -> Option<&Path> {
        self.node(from).paths[to.ty.index()].get(to.idx)
    }

    /// GPU indices in rank order.
    pub fn gpus_by_rank(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.count(NodeType::Gpu)).collect();
        v.sort_by_key(|&g| self.nodes(NodeType::Gpu)[g].gpu().map_or(0, |x| x.rank));
        v
    }

    /// The GPU index owning `rank`.
    pub fn gpu_of_rank(&self, rank: usize) -> Option<usize> {
        self.nodes(NodeType::Gpu)
            .iter()
            .position(|n| n.gpu().is_some_and(|g| g.rank == rank))
    }

    /// Lowest and highest compute capability of the GPUs (NCCL `ncclTopoGetCompCap`).
    pub fn comp_cap(&self) -> Option<(u32, u32)> {
        let sms: Vec<u32> = self
            .nodes(NodeType::Gpu)
            .iter()
            .filter_map(|n| n.gpu().map(|g| g.sm))
            .collect();
        Some((*sms.iter().min()?, *sms.iter().max()?))
    }

    /// The first CPU's architecture and vendor (NCCL `ncclTopoCpuType`).
    pub fn cpu_type(&self) -> (CpuArch, CpuVendor, CpuModel) {
        self.nodes(NodeType::Cpu)
            .first()
            .and_then(|n| n.cpu())
            .map_or(
                (CpuArch::Unknown, CpuVendor::Unknown, CpuModel::Unknown),
                |c| (c.arch, c.vendor, c.model),
            )
    }

    /// The NUMA domain closest to GPU `g`: the CPU with the fewest hops (NCCL `ncclGetLocalCpu`).
    pub fn local_cpu(&self, g: usize) -> Option<usize> {
        let paths = &self.nodes(NodeType::Gpu)[g].paths[NodeType::Cpu.index()];
        let mut best: Option<(usize, usize)> = None;
        for (c, p) in paths.iter().enumerate() {
            let h = p.hops();
            if h > 0 && best.is_none_or(|(_, bh)| h < bh) {
                best = Some((c, h));
            }
        }
        best.map(|(c, _)| c)
    }

    /// The XML document the system was built from.
    pub fn xml(&self) -> &XmlDoc {
        &self.xml
    }

    /// The host index (NCCL's `systemId`, an index into [`System::hosts`]) of node `r`.
    pub fn host_of(&self, r: NodeRef) -> usize {
        (self.node(r).id >> 56) as usize
    }
}
