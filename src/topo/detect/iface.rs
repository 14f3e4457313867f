//! The one reader of this host's network interfaces: names, whether each is running, and its
//! addresses with prefix lengths, from `getifaddrs` (as NCCL's `ncclFindInterfaces` reads them),
//! or from a sysfs tree (`/sys/class/net`, for captured hosts in tests), where addresses are
//! unknown. The bootstrap's interface choice, `env-explain`'s check of `NCCL_SOCKET_IFNAME` and
//! topology detection's socket devices all start from this list
//! ([`crate::topo::ifaces::select`]); sysfs attributes (speed, MTU, PCI path) stay in
//! [`super::net`], keyed by the same names.

use std::net::IpAddr;

use serde::Serialize;

use super::sysfs::Root;

/// One address of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IfAddr {
    /// The address.
    pub ip: IpAddr,
    /// Prefix length of its subnet (32 or 128 when the netmask is missing).
    pub prefix: u8,
}

/// One network interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetInterface {
    /// Its name (`eth0`).
    pub name: String,
    /// Whether it is running: `IFF_RUNNING` from `getifaddrs`, or `operstate` `up` or `unknown`
    /// (what loopback and many virtual devices report) in a sysfs tree.
    pub running: bool,
    /// Its IPv4 and IPv6 addresses in `getifaddrs` order; `None` when unknown (a sysfs tree shows
    /// no addresses).
    pub addrs: Option<Vec<IfAddr>>,
}

/// Every interface of this host (or network namespace), in `getifaddrs` order of first
/// appearance (interface index order), each with its IPv4/IPv6 addresses.
///
/// Errors: the `getifaddrs` error.
pub fn read_host() -> std::io::Result<Vec<NetInterface>> {
    let mut out: Vec<NetInterface> = Vec::new();
    for a in nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)? {
        let running = a.flags.contains(nix::net::if_::InterfaceFlags::IFF_RUNNING);
        let idx = match out.iter().position(|i| i.name == a.interface_name) {
            Some(i) => i,
            None => {
                out.push(NetInterface {
                    name: a.interface_name.clone(),
                    running,
                    addrs: Some(Vec::new()),
                });
                out.len() - 1
            }
        };
        let entry = &mut out[idx];
        entry.running |= running;
        let mask = a.netmask.as_ref();
        let addr = a.address.as_ref().and_then(|s| {
            if let Some(v4) = s.as_sockaddr_in() {
                let prefix = mask
                    .and_then(|m| m.as_sockaddr_in())
                    .map_or(32, |m| u32::from(m.ip()).count_ones() as u8);
                Some(IfAddr {
                    ip: IpAddr::V4(v4.ip()),
                    prefix,
                })
            } else {
                let v6 = s.as_sockaddr_in6()?;
                let prefix = mask
                    .and_then(|m| m.as_sockaddr_in6())
                    .map_or(128, |m| u128::from(m.ip()).count_ones() as u8);
                Some(IfAddr {
                    ip: IpAddr::V6(v6.ip()),
                    prefix,
                })
            }
        });
        if let Some(addr) = addr {
            entry.addrs.get_or_insert_with(Vec::new).push(addr);
        }
    }
    Ok(out)
}

/// The interfaces of the sysfs tree `root` (`/sys/class/net/*`, sorted by name): running when
/// `operstate` says `up` or `unknown`, addresses unknown.
pub fn read_sysfs(root: &Root) -> Vec<NetInterface> {
    root.list("/sys/class/net")
        .into_iter()
        .map(|name| {
            let state = root.read(&format!("/sys/class/net/{name}/operstate"));
            NetInterface {
                running: matches!(state.as_deref(), Some("up" | "unknown")),
                name,
                addrs: None,
            }
        })
        .collect()
}

/// The interfaces under `root`: this host's from `getifaddrs` when `root` is `/` (sysfs if
/// `getifaddrs` fails), a captured tree's from its sysfs otherwise.
pub fn read(root: &Root) -> Vec<NetInterface> {
    if root.is_host()
        && let Ok(list) = read_host()
    {
        return list;
    }
    read_sysfs(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        for (name, state) in [("eth0", "up"), ("ib0", "down"), ("lo", "unknown")] {
            let d = dir.path().join("sys/class/net").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("operstate"), format!("{state}\n")).unwrap();
        }
        let got = read(&Root::new(dir.path()));
        let summary: Vec<(&str, bool)> = got.iter().map(|i| (i.name.as_str(), i.running)).collect();
        assert_eq!(summary, [("eth0", true), ("ib0", false), ("lo", true)]);
        assert!(got.iter().all(|i| i.addrs.is_none()));
    }

    #[test]
    fn reads_this_host_with_addresses() {
        let list = read_host().unwrap();
        let lo = list.iter().find(|i| i.name == "lo").expect("loopback");
        let addrs = lo.addrs.as_ref().unwrap();
        assert!(
            addrs
                .iter()
                .any(|a| a.ip == IpAddr::from([127, 0, 0, 1]) && a.prefix == 8),
            "{lo:?}"
        );
    }
}
