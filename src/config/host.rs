//! This host's network interfaces and InfiniBand ports, as NCCL would consider them, for checking
//! `NCCL_SOCKET_IFNAME` and `NCCL_IB_HCA`. Interfaces come from `getifaddrs` (like
//! `src/os/linux.cc:ncclOsFindInterfaces`), HCA ports from `/sys/class/infiniband`; both can be
//! read from a sysfs-like fixture directory instead, for tests.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// A network interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    /// Its name (`eth0`).
    pub name: String,
    /// Whether it is up and running (`IFF_RUNNING`, or `operstate` "up" or "unknown" — what
    /// loopback reports — in a fixture).
    pub running: bool,
    /// Its IPv4/IPv6 addresses NCCL could use (IPv6 loopback excluded), or `None` when unknown
    /// (read from a fixture, which has no addresses).
    pub addrs: Option<Vec<IpAddr>>,
}

impl Interface {
    /// Whether NCCL could use it with `family` (`None`: any): running, with an address of that
    /// family when addresses are known.
    pub fn usable(&self, family: Option<Family>) -> bool {
        self.running
            && self.addrs.as_ref().is_none_or(|a| {
                a.iter().any(|ip| match family {
                    None => true,
                    Some(Family::V4) => ip.is_ipv4(),
                    Some(Family::V6) => ip.is_ipv6(),
                })
            })
    }
}

/// An address family, as `NCCL_SOCKET_FAMILY` restricts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `AF_INET`.
    V4,
    /// `AF_INET6`.
    V6,
}

/// One port of an InfiniBand/RoCE device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HcaPort {
    /// The device (`mlx5_0`).
    pub hca: String,
    /// The port number (from 1).
    pub port: u32,
    /// The state word from sysfs (`ACTIVE`, `DOWN`...).
    pub state: String,
    /// `InfiniBand` or `Ethernet` (RoCE).
    pub link_layer: String,
}

impl HcaPort {
    /// NCCL only uses active ports.
    pub fn active(&self) -> bool {
        self.state == "ACTIVE"
    }
}

/// What this host offers NCCL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostDevices {
    /// Network interfaces, sorted by name.
    pub interfaces: Vec<Interface>,
    /// HCA ports, sorted by device and port.
    pub hca_ports: Vec<HcaPort>,
    /// The sysfs directory HCAs were read from.
    pub sysfs: PathBuf,
}

impl HostDevices {
    /// This machine: interfaces from `getifaddrs`, HCAs from `/sys/class/infiniband`. A failing
    /// `getifaddrs` gives no interfaces.
    pub fn detect() -> HostDevices {
        let mut interfaces: Vec<Interface> = Vec::new();
        if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
            for a in addrs {
                let running = a.flags.contains(nix::net::if_::InterfaceFlags::IFF_RUNNING);
                let ip = a.address.as_ref().and_then(|s| {
                    s.as_sockaddr_in()
                        .map(|v4| IpAddr::V4(v4.ip()))
                        .or_else(|| s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
                });
                let entry = match interfaces.iter_mut().find(|i| i.name == a.interface_name) {
                    Some(e) => e,
                    None => {
                        interfaces.push(Interface {
                            name: a.interface_name.clone(),
                            running,
                            addrs: Some(Vec::new()),
                        });
                        interfaces.last_mut().expect("just pushed")
                    }
                };
                entry.running |= running;
                if let Some(ip) = ip.filter(|ip| !(ip.is_ipv6() && ip.is_loopback())) {
                    entry.addrs.get_or_insert_with(Vec::new).push(ip);
                }
            }
        }
        interfaces.sort_by(|a, b| a.name.cmp(&b.name));
        let sysfs = PathBuf::from("/sys");
        HostDevices {
            interfaces,
            hca_ports: read_hcas(&sysfs),
            sysfs,
        }
    }

    /// A fixture laid out like sysfs: interfaces are the entries of `<root>/class/net` (running
    /// when `operstate` says "up" or "unknown", addresses unknown), HCA ports come from
    /// `<root>/class/infiniband/<dev>/ports/<n>/{state,link_layer}`.
    pub fn from_sysfs(root: &Path) -> HostDevices {
        let mut interfaces: Vec<Interface> = list_dir(&root.join("class/net"))
            .into_iter()
            .map(|name| {
                let state = read_trimmed(&root.join("class/net").join(&name).join("operstate"));
                Interface {
                    running: matches!(state.as_str(), "up" | "unknown"),
                    name,
                    addrs: None,
                }
            })
            .collect();
        interfaces.sort_by(|a, b| a.name.cmp(&b.name));
        HostDevices {
            interfaces,
            hca_ports: read_hcas(root),
            sysfs: root.to_path_buf(),
        }
    }
}

fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn read_trimmed(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// HCA ports under `<sysfs>/class/infiniband`; the state file reads like "4: ACTIVE".
fn read_hcas(sysfs: &Path) -> Vec<HcaPort> {
    let base = sysfs.join("class/infiniband");
    let mut ports = Vec::new();
    for hca in list_dir(&base) {
        for port in list_dir(&base.join(&hca).join("ports")) {
            let Ok(num) = port.parse::<u32>() else {
                continue;
            };
            let dir = base.join(&hca).join("ports").join(&port);
            let state = read_trimmed(&dir.join("state"));
            let state = state
                .split_once(": ")
                .map_or(state.clone(), |(_, s)| s.to_string());
            ports.push(HcaPort {
                hca: hca.clone(),
                port: num,
                state,
                link_layer: read_trimmed(&dir.join("link_layer")),
            });
        }
    }
    ports.sort_by(|a, b| (a.hca.as_str(), a.port).cmp(&(b.hca.as_str(), b.port)));
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_sysfs_fixture() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (name, state) in [("eth0", "up"), ("ib0", "down")] {
            std::fs::create_dir_all(root.join("class/net").join(name)).unwrap();
            std::fs::write(
                root.join("class/net").join(name).join("operstate"),
                format!("{state}\n"),
            )
            .unwrap();
        }
        let port = root.join("class/infiniband/mlx5_0/ports/1");
        std::fs::create_dir_all(&port).unwrap();
        std::fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
        std::fs::write(port.join("link_layer"), "InfiniBand\n").unwrap();
        let h = HostDevices::from_sysfs(root);
        assert_eq!(h.interfaces.len(), 2);
        assert!(h.interfaces[0].usable(None) && !h.interfaces[1].usable(None));
        assert_eq!(h.hca_ports[0].state, "ACTIVE");
        assert!(h.hca_ports[0].active());
    }

    #[test]
    fn detects_this_machine_without_failing() {
        let h = HostDevices::detect();
        assert!(h.interfaces.iter().all(|i| !i.name.is_empty()));
    }
}
