//! Choosing the network interface for bootstrap and TCP transport traffic, with NCCL's rules
//! (`src/misc/socket.cc:ncclFindInterfaces`, internals §1.4).
//!
//! `NCCL_SOCKET_IFNAME` (prefix list, `^` to exclude, `=` for exact names; a value of one
//! character or less is ignored) selects interfaces; without it the order is `ib*`, then the
//! interface on the subnet of `NCCL_COMM_ID`'s address, then anything but `docker*`, `lo`,
//! `virbr*`, then `docker*`, `lo`, `virbr*`. `NCCL_SOCKET_FAMILY` (`AF_INET`/`AF_INET6`) filters.
//! IPv6 link-local addresses are skipped (they need a scope to bind).

use std::net::{IpAddr, SocketAddr};

use crate::config::Config;
use crate::config::syntax::DeviceFilter;
use crate::error::{Error, Result};

/// An interface and one of its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Interface name (e.g. `eth0`).
    pub name: String,
    /// The address rnccl binds to on it.
    pub addr: IpAddr,
    /// Prefix length of the address's subnet.
    pub prefix: u8,
}

/// Every interface address on this host (or in this network namespace), from `getifaddrs`.
///
/// Errors: [`Error::System`] when `getifaddrs` fails.
pub fn host_interfaces() -> Result<Vec<Interface>> {
    let mut out = Vec::new();
    let addrs = nix::ifaddrs::getifaddrs()
        .map_err(|e| Error::system("listing network interfaces", e.into()))?;
    for ifa in addrs {
        let Some(addr) = ifa.address else { continue };
        let mask = ifa.netmask;
        let (ip, prefix) = if let Some(a) = addr.as_sockaddr_in() {
            let p = mask
                .as_ref()
                .and_then(|m| m.as_sockaddr_in())
                .map(|m| u32::from(m.ip()).count_ones() as u8);
            (IpAddr::V4(a.ip()), p.unwrap_or(32))
        } else if let Some(a) = addr.as_sockaddr_in6() {
            if a.ip().is_unicast_link_local() {
                continue;
            }
            let p = mask
                .as_ref()
                .and_then(|m| m.as_sockaddr_in6())
                .map(|m| u128::from(m.ip()).count_ones() as u8);
            (IpAddr::V6(a.ip()), p.unwrap_or(128))
        } else {
            continue;
        };
        out.push(Interface {
            name: ifa.interface_name,
            addr: ip,
            prefix,
        });
    }
    Ok(out)
}

fn same_subnet(a: IpAddr, b: IpAddr, prefix: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(x), IpAddr::V4(y)) => {
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix.min(32))
            };
            u32::from(x) & m == u32::from(y) & m
        }
        (IpAddr::V6(x), IpAddr::V6(y)) => {
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - prefix.min(128))
            };
            u128::from(x) & m == u128::from(y) & m
        }
        _ => false,
    }
}

/// Orders and filters `all` as NCCL would; the first entry is the one used. `comm_id` is the
/// address of `NCCL_COMM_ID`, if set.
///
/// Errors: [`Error::InvalidUsage`] when `NCCL_SOCKET_IFNAME` or `NCCL_SOCKET_FAMILY` is
/// malformed or matches nothing; the message lists the interfaces that exist.
pub fn select(all: &[Interface], cfg: &Config, comm_id: Option<IpAddr>) -> Result<Vec<Interface>> {
    let family = cfg.string("NCCL_SOCKET_FAMILY");
    let fam_ok = |i: &Interface| match family {
        Some("AF_INET") => i.addr.is_ipv4(),
        Some("AF_INET6") => i.addr.is_ipv6(),
        _ => true,
    };
    if let Some(f) = family
        && f != "AF_INET"
        && f != "AF_INET6"
    {
        return Err(Error::invalid_usage(format!(
            "NCCL_SOCKET_FAMILY={f:?} is not AF_INET or AF_INET6"
        )));
    }
    let listing = || {
        let mut names: Vec<String> = all
            .iter()
            .map(|i| format!("{} ({})", i.name, i.addr))
            .collect();
        names.dedup();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    if let Some(spec) = cfg.string("NCCL_SOCKET_IFNAME").filter(|s| s.len() > 1) {
        let filter = DeviceFilter::parse(spec)
            .map_err(|e| Error::invalid_usage(format!("NCCL_SOCKET_IFNAME={spec:?}: {e}")))?;
        let picked: Vec<Interface> = all
            .iter()
            .filter(|i| filter.matches(&i.name, None) && fam_ok(i))
            .cloned()
            .collect();
        if picked.is_empty() {
            return Err(Error::invalid_usage(format!(
                "NCCL_SOCKET_IFNAME={spec:?} matches no interface{}; this host has: {}",
                family
                    .map(|f| format!(" of family {f}"))
                    .unwrap_or_default(),
                listing()
            )));
        }
        return Ok(picked);
    }
    let usable: Vec<&Interface> = all.iter().filter(|i| fam_ok(i)).collect();
    let is = |i: &Interface, p: &str| i.name.starts_with(p);
    let plain = |i: &Interface| !(is(i, "docker") || i.name == "lo" || is(i, "virbr"));
    let mut order: Vec<Interface> = Vec::new();
    let mut push = |pred: &dyn Fn(&Interface) -> bool| {
        for i in usable.iter().filter(|i| pred(i)) {
            if !order.contains(i) {
                order.push((*i).clone());
            }
        }
    };
    push(&|i| is(i, "ib"));
    if let Some(c) = comm_id {
        push(&|i| same_subnet(i.addr, c, i.prefix));
    }
    push(&|i| plain(i) && i.addr.is_ipv4());
    push(&plain);
    push(&|i| is(i, "docker"));
    push(&|i| i.name == "lo");
    push(&|i| is(i, "virbr"));
    if order.is_empty() {
        return Err(Error::invalid_usage(format!(
            "no usable network interface; this host has: {}",
            listing()
        )));
    }
    Ok(order)
}

/// The interface rnccl uses for bootstrap and TCP transport traffic on this host.
///
/// Errors: as [`select`], and [`Error::System`] when interfaces cannot be listed.
pub fn bootstrap_interface(cfg: &Config, comm_id: Option<SocketAddr>) -> Result<Interface> {
    let all = host_interfaces()?;
    Ok(select(&all, cfg, comm_id.map(|a| a.ip()))?.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    fn iface(name: &str, addr: &str, prefix: u8) -> Interface {
        Interface {
            name: name.into(),
            addr: addr.parse().unwrap(),
            prefix,
        }
    }

    fn host() -> Vec<Interface> {
        vec![
            iface("lo", "127.0.0.1", 8),
            iface("docker0", "172.17.0.1", 16),
            iface("eth0", "10.0.0.5", 24),
            iface("eth1", "192.168.7.2", 24),
            iface("ib0", "10.9.0.5", 16),
            iface("eth0", "2001:db8::5", 64),
        ]
    }

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        let mut c = Config::defaults();
        for (k, v) in pairs {
            c.set(k, *v, Source::Env);
        }
        c
    }

    #[test]
    fn auto_order_prefers_ib_then_subnet_then_plain() {
        let order = select(&host(), &cfg(&[]), None).unwrap();
        assert_eq!(order[0].name, "ib0");
        let order = select(&host(), &cfg(&[]), Some("192.168.7.99".parse().unwrap())).unwrap();
        assert_eq!(
            order[1].name, "eth1",
            "subnet of NCCL_COMM_ID comes right after ib"
        );
        let names: Vec<&str> = order.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names.last(), Some(&"lo"));
        let no_ib: Vec<Interface> = host().into_iter().filter(|i| i.name != "ib0").collect();
        assert_eq!(select(&no_ib, &cfg(&[]), None).unwrap()[0].name, "eth0");
    }

    #[test]
    fn ifname_and_family_filters() {
        let picked = select(
            &host(),
            &cfg(&[("NCCL_SOCKET_IFNAME", "^lo,docker,ib")]),
            None,
        )
        .unwrap();
        assert!(picked.iter().all(|i| i.name.starts_with("eth")));
        let picked = select(
            &host(),
            &cfg(&[
                ("NCCL_SOCKET_IFNAME", "=eth0"),
                ("NCCL_SOCKET_FAMILY", "AF_INET6"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(picked, vec![iface("eth0", "2001:db8::5", 64)]);
        let e = select(&host(), &cfg(&[("NCCL_SOCKET_IFNAME", "enp")]), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("matches no interface") && e.contains("eth1 (192.168.7.2)"),
            "{e}"
        );
        let one_char = select(&host(), &cfg(&[("NCCL_SOCKET_IFNAME", "x")]), None).unwrap();
        assert_eq!(
            one_char[0].name, "ib0",
            "values of one character are ignored, as in NCCL"
        );
    }
}
