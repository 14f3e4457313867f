//! What this host offers NCCL, for checking `NCCL_SOCKET_IFNAME` and `NCCL_IB_HCA` in
//! `env-explain`: the network interfaces and RDMA adapters, read by topology detection's readers
//! ([`crate::topo::detect::iface`], [`crate::topo::detect::net`]) from this host or from a
//! captured sysfs tree (tests).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::topo::detect::iface::{self, NetInterface};
use crate::topo::detect::net::{self, Hca};
use crate::topo::detect::sysfs::Root;

/// What this host offers NCCL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostDevices {
    /// Network interfaces, in `getifaddrs` order (by name in a captured tree).
    pub interfaces: Vec<NetInterface>,
    /// RDMA adapters and their ports, by name.
    pub hcas: Vec<Hca>,
    /// The root the tree was read from (`/` for this host).
    pub root: PathBuf,
}

impl HostDevices {
    /// This machine: interfaces from `getifaddrs`, adapters from `/sys/class/infiniband`.
    pub fn detect() -> HostDevices {
        HostDevices::from_sysfs(Path::new("/"))
    }

    /// A captured tree laid out like `/` (`<root>/sys/class/net`, `<root>/sys/class/infiniband`):
    /// interfaces from sysfs (running per `operstate`, addresses unknown); `/` is this host.
    pub fn from_sysfs(root: &Path) -> HostDevices {
        let r = Root::new(root);
        HostDevices {
            interfaces: iface::read(&r),
            hcas: net::read_hcas(&r),
            root: root.to_path_buf(),
        }
    }

    /// Where adapters are listed (`<root>/sys/class/infiniband`).
    pub fn infiniband_dir(&self) -> PathBuf {
        Root::new(&self.root).at("/sys/class/infiniband")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_captured_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (name, state) in [("eth0", "up"), ("ib0", "down")] {
            let d = root.join("sys/class/net").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("operstate"), format!("{state}\n")).unwrap();
        }
        let port = root.join("sys/class/infiniband/mlx5_0/ports/1");
        std::fs::create_dir_all(&port).unwrap();
        std::fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
        std::fs::write(port.join("link_layer"), "InfiniBand\n").unwrap();
        let h = HostDevices::from_sysfs(root);
        assert_eq!(h.interfaces.len(), 2);
        assert!(h.interfaces[0].running && !h.interfaces[1].running);
        assert_eq!(h.hcas[0].ports[0].state_word(), "ACTIVE");
        assert!(h.hcas[0].ports[0].active());
    }

    #[test]
    fn detects_this_machine_without_failing() {
        let h = HostDevices::detect();
        assert!(h.interfaces.iter().all(|i| !i.name.is_empty()));
    }
}
