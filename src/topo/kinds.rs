//! NCCL's node, link and path types (NCCL src/graph/topo.h; internals §2.4), with NCCL's names.

use serde::Serialize;

/// The kind of a node of the system graph, in NCCL's index order (`GPU=0 PCI=1 NVS=2 CPU=3 NIC=4
/// NET=5`, NCCL 2.28 src/graph/topo.h). A `CPU` node is a NUMA domain; a `NIC` is one physical
/// adapter and its `NET`s are the ports the network plugin exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum NodeType {
    /// A GPU (one rank).
    Gpu = 0,
    /// A PCI switch or bridge.
    Pci = 1,
    /// The NVSwitch fabric (one shared node).
    Nvs = 2,
    /// A NUMA domain (CPU socket or sub-NUMA cluster) and its root complex.
    Cpu = 3,
    /// A network adapter.
    Nic = 4,
    /// A network device (port) of a NIC, as the net plugin lists it.
    Net = 5,
}

impl NodeType {
    /// All node types in NCCL's index order.
    pub const ALL: [NodeType; 6] = [
        NodeType::Gpu,
        NodeType::Pci,
        NodeType::Nvs,
        NodeType::Cpu,
        NodeType::Nic,
        NodeType::Net,
    ];

    /// NCCL's index of this type (0..6).
    pub fn index(self) -> usize {
        self as usize
    }

    /// NCCL's name (`topoNodeTypeStr`).
    pub fn as_str(self) -> &'static str {
        ["GPU", "PCI", "NVS", "CPU", "NIC", "NET"][self as usize]
    }
}

/// The kind of a link between two nodes. Values equal the path type they start
/// (NCCL src/graph/topo.h `LINK_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum LinkType {
    /// Same device (also BCM PCI switch peer links).
    Loc = 0,
    /// NVLink (to a GPU, the NVSwitch fabric or a POWER CPU).
    Nvl = 1,
    /// GPU to CPU chip-to-chip link (Grace).
    C2c = 3,
    /// PCIe.
    Pci = 4,
    /// CPU to CPU (QPI/UPI/xGMI).
    Sys = 9,
    /// NIC to network port.
    Net = 10,
}

impl LinkType {
    /// NCCL's name (`topoLinkTypeStr`).
    pub fn as_str(self) -> &'static str {
        match self {
            LinkType::Loc => "LOC",
            LinkType::Nvl => "NVL",
            LinkType::C2c => "C2C",
            LinkType::Pci => "PCI",
            LinkType::Sys => "SYS",
            LinkType::Net => "NET",
        }
    }

    /// The path type a path starts with when its first hop is this link (`LINK_NET` counts as
    /// `LOC`, NCCL src/graph/paths.cc `ncclTopoSetPaths`).
    pub fn path_type(self) -> PathType {
        match self {
            LinkType::Loc | LinkType::Net => PathType::Loc,
            LinkType::Nvl => PathType::Nvl,
            LinkType::C2c => PathType::C2c,
            LinkType::Pci => PathType::Pix,
            LinkType::Sys => PathType::Sys,
        }
    }
}

/// How far apart two nodes are, best first (NCCL src/graph/topo.h `PATH_*`; internals §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum PathType {
    /// Same device.
    Loc = 0,
    /// NVLink, directly or through NVSwitches.
    Nvl = 1,
    /// NVLink through one intermediate GPU.
    Nvb = 2,
    /// GPU to CPU over C2C.
    C2c = 3,
    /// At most one PCIe switch.
    Pix = 4,
    /// Several PCIe switches, no host bridge.
    Pxb = 5,
    /// GPU -C2C- CPU -PCIe- NIC.
    P2c = 6,
    /// GPU -NVLink- relay GPU -PCIe- NIC.
    Pxn = 7,
    /// Through a PCIe host bridge (the CPU).
    Phb = 8,
    /// Through the inter-socket link.
    Sys = 9,
    /// Through the network.
    Net = 10,
    /// Disconnected.
    Dis = 11,
}

impl PathType {
    /// All path types, best first.
    pub const ALL: [PathType; 12] = [
        PathType::Loc,
        PathType::Nvl,
        PathType::Nvb,
        PathType::C2c,
        PathType::Pix,
        PathType::Pxb,
        PathType::P2c,
        PathType::Pxn,
        PathType::Phb,
        PathType::Sys,
        PathType::Net,
        PathType::Dis,
    ];

    /// NCCL's name (`topoPathTypeStr`).
    pub fn as_str(self) -> &'static str {
        [
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS",
        ][self as usize]
    }

    /// The type with NCCL's name `s` (exact, upper case), as `NCCL_P2P_LEVEL` and graph files
    /// write it.
    pub fn from_name(s: &str) -> Option<PathType> {
        PathType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The next worse type (`Dis` stays `Dis`).
    pub fn next(self) -> PathType {
        PathType::ALL[(self as usize + 1).min(PathType::Dis as usize)]
    }
}

impl std::fmt::Display for PathType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_matches_nccl() {
        for (i, t) in PathType::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i);
            assert_eq!(PathType::from_name(t.as_str()), Some(*t));
        }
        assert!(PathType::Nvl < PathType::Pix && PathType::Pxn < PathType::Phb);
        assert_eq!(PathType::Pix.next(), PathType::Pxb);
        assert_eq!(PathType::Dis.next(), PathType::Dis);
        assert_eq!(LinkType::Net.path_type(), PathType::Loc);
        assert_eq!(NodeType::Nvs.as_str(), "NVS");
    }
}
