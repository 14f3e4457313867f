//! Topology: detection (sysfs PCI tree, NVML, /sys/class/net, /sys/class/infiniband), the system
//! graph with NCCL's node and link types, paths and path types, NCCL topology XML in and out.
//!
//! The model follows NCCL 2.28 (src/graph/topo.cc, paths.cc, xml.cc; internals §2): the same
//! nodes, link bandwidths, path rules and XML, so rnccl reads NCCL's dumps and NCCL reads
//! rnccl's. [`System::load`] gives this host's view (merged with `NCCL_TOPO_FILE` as NCCL merges
//! it); [`System::from_xml_str`] reads another machine's file.

pub mod assume;
pub mod busid;
pub mod bw;
pub mod detect;
pub mod diagnose;
mod error;
pub mod ifaces;
pub mod info;
pub mod kinds;
mod load;
mod note;
pub(crate) mod p2p;
pub mod params;
pub(crate) mod paths;
pub mod system;
pub mod xml;

pub use error::TopoError;
pub use kinds::{LinkType, NodeType, PathType};
pub use note::{NoteKind, TopoNote};
pub use params::TopoParams;
pub use system::{Link, LinkId, Node, NodeInfo, NodeRef, Path, System};
