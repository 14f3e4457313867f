//! Which network interface NCCL would use, with NCCL's rules (`src/misc/socket.cc:
//! ncclFindInterfaces`, internals §1.4): the one rule behind the bootstrap's choice
//! ([`bootstrap_interface`]), `env-explain`'s verdict on `NCCL_SOCKET_IFNAME` and the socket
//! devices `rnccl topo` lists, all from the interface list of [`crate::topo::detect::iface`].
//!
//! `NCCL_SOCKET_IFNAME` (prefix list, `^` to exclude, `=` for exact names; a value of one
//! character or less is ignored) selects interfaces; without it the order is `ib*`, then the
//! interface on the subnet of `NCCL_COMM_ID`'s address, then anything but `docker*`, `lo`,
//! `virbr*` (IPv4 addresses first), then `docker*`, `lo`, `virbr*`. `NCCL_SOCKET_FAMILY`
//! (`AF_INET`/`AF_INET6`) filters addresses. IPv6 loopback (as NCCL) and link-local addresses
//! (they need a scope to bind) are skipped. NCCL's own list is the first non-empty group of that
//! order ([`nccl_devices`]); the bootstrap binds the first address of the whole order.

use std::net::{IpAddr, SocketAddr};

use crate::config::syntax::DeviceFilter;
use crate::config::{Config, ConfigError};
use crate::error::{Error, Result};
use crate::topo::detect::iface::{self, IfAddr, NetInterface};

/// NCCL's Socket plugin lists at most this many interfaces (`MAX_IFS`).
pub const MAX_IFS: usize = 16;

/// An interface and the address rnccl binds to on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Interface name (e.g. `eth0`).
    pub name: String,
    /// The address rnccl binds to on it.
    pub addr: IpAddr,
    /// Prefix length of the address's subnet.
    pub prefix: u8,
}

/// Why the rule picked an interface: the group of NCCL's search order it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// It matches `NCCL_SOCKET_IFNAME`.
    IfName,
    /// Its name starts with `ib`.
    Ib,
    /// It is on the subnet of `NCCL_COMM_ID`'s address.
    CommIdSubnet,
    /// Anything but `docker*`, `lo` and `virbr*`.
    Other,
    /// `docker*`.
    Docker,
    /// `lo`.
    Loopback,
    /// `virbr*`.
    Virbr,
}

/// One interface address the rule accepts, in preference order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Interface name.
    pub name: String,
    /// The address, `None` when the interface list does not know addresses (a sysfs tree).
    pub addr: Option<IfAddr>,
    /// Whether the interface is running.
    pub running: bool,
    /// Why it was picked.
    pub reason: Reason,
}

/// `NCCL_SOCKET_FAMILY`: the address family interfaces are restricted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `AF_INET`.
    V4,
    /// `AF_INET6`.
    V6,
}

impl Family {
    fn admits(self, ip: IpAddr) -> bool {
        match self {
            Family::V4 => ip.is_ipv4(),
            Family::V6 => ip.is_ipv6(),
        }
    }

    /// `AF_INET` or `AF_INET6`.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "AF_INET",
            Family::V6 => "AF_INET6",
        }
    }
}

/// Why no interface can be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IfaceError {
    /// `NCCL_SOCKET_IFNAME` or `NCCL_SOCKET_FAMILY` has a value that cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `NCCL_SOCKET_IFNAME` matches nothing usable.
    #[error(
        "NCCL_SOCKET_IFNAME={value:?} matches no interface{}; this host has: {listing}",
        family.map(|f| format!(" of family {}", f.name())).unwrap_or_default()
    )]
    NoMatch {
        /// The filter as given.
        value: String,
        /// `NCCL_SOCKET_FAMILY`, when set.
        family: Option<Family>,
        /// The interfaces that exist, with their addresses.
        listing: String,
    },
    /// No interface has a usable address.
    #[error("no usable network interface; this host has: {listing}")]
    NoneUsable {
        /// The interfaces that exist, with their addresses.
        listing: String,
    },
}

impl From<IfaceError> for Error {
    fn from(e: IfaceError) -> Self {
        Error::InvalidUsage(e.to_string())
    }
}

/// `NCCL_SOCKET_FAMILY` as the rule reads it.
///
/// Errors: [`ConfigError::BadValue`] for a value other than `AF_INET` or `AF_INET6`.
pub fn family(cfg: &Config) -> std::result::Result<Option<Family>, ConfigError> {
    Ok(match cfg.text("NCCL_SOCKET_FAMILY")? {
        Some("AF_INET") => Some(Family::V4),
        Some("AF_INET6") => Some(Family::V6),
        Some(other) => {
            return Err(cfg.refuse(
                "NCCL_SOCKET_FAMILY",
                format!("{other:?} is not AF_INET or AF_INET6"),
                "write AF_INET or AF_INET6, or unset it".into(),
            ));
        }
        None => None,
    })
}

/// `NCCL_SOCKET_IFNAME` as the rule reads it: `None` when unset or one character or less (NCCL
/// ignores such values).
///
/// Errors: [`ConfigError::BadValue`] for a malformed list.
pub fn ifname_filter(
    cfg: &Config,
) -> std::result::Result<Option<(String, DeviceFilter)>, ConfigError> {
    let Some(spec) = cfg.text("NCCL_SOCKET_IFNAME")?.filter(|s| s.len() > 1) else {
        return Ok(None);
    };
    let filter = DeviceFilter::parse(spec)
        .map_err(|hint| cfg.refuse("NCCL_SOCKET_IFNAME", "not a device list".into(), hint))?;
    Ok(Some((spec.to_string(), filter)))
}

/// A test of one group of NCCL's search order.
type Pick<'a> = dyn Fn(&Candidate) -> bool + 'a;

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

/// `name (addr), ...` of every interface, for error messages.
fn listing(all: &[NetInterface]) -> String {
    let mut names: Vec<String> = Vec::new();
    for i in all {
        match &i.addrs {
            Some(addrs) if !addrs.is_empty() => {
                names.extend(addrs.iter().map(|a| format!("{} ({})", i.name, a.ip)));
            }
            _ => names.push(i.name.clone()),
        }
    }
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// The interface addresses the rule may consider, in `getifaddrs` order (IPv4 addresses of all
/// interfaces, then IPv6): family-filtered, IPv6 loopback and link-local dropped. An interface
/// whose addresses are unknown counts once, with no address, when it is running.
fn addresses(all: &[NetInterface], family: Option<Family>) -> Vec<Candidate> {
    let mut out = Vec::new();
    for v4 in [true, false] {
        for i in all {
            let addrs: Vec<Option<IfAddr>> = match &i.addrs {
                None if v4 && i.running => vec![None],
                None => Vec::new(),
                Some(a) => a
                    .iter()
                    .filter(|a| a.ip.is_ipv4() == v4)
                    .filter(|a| match a.ip {
                        IpAddr::V6(ip) => !ip.is_loopback() && !ip.is_unicast_link_local(),
                        IpAddr::V4(_) => true,
                    })
                    .filter(|a| family.is_none_or(|f| f.admits(a.ip)))
                    .map(|a| Some(*a))
                    .collect(),
            };
            out.extend(addrs.into_iter().map(|addr| Candidate {
                name: i.name.clone(),
                addr,
                running: i.running,
                reason: Reason::Other,
            }));
        }
    }
    out
}

/// Orders and filters the interfaces of `all` as NCCL would for a communicator whose
/// `NCCL_COMM_ID` address is `comm_id`; the first entry is the one the bootstrap binds.
///
/// Errors: [`IfaceError::Config`] when `NCCL_SOCKET_IFNAME` or `NCCL_SOCKET_FAMILY` is
/// malformed; [`IfaceError::NoMatch`] when `NCCL_SOCKET_IFNAME` matches nothing usable;
/// [`IfaceError::NoneUsable`] when no interface has an address. Both list what exists.
pub fn select(
    all: &[NetInterface],
    cfg: &Config,
    comm_id: Option<IpAddr>,
) -> std::result::Result<Vec<Candidate>, IfaceError> {
    let family = family(cfg)?;
    let usable = addresses(all, family);
    if let Some((value, filter)) = ifname_filter(cfg)? {
        let picked: Vec<Candidate> = usable
            .into_iter()
            .filter(|c| filter.matches(&c.name, None))
            .map(|c| Candidate {
                reason: Reason::IfName,
                ..c
            })
            .collect();
        if picked.is_empty() {
            return Err(IfaceError::NoMatch {
                value,
                family,
                listing: listing(all),
            });
        }
        return Ok(picked);
    }
    let is = |c: &Candidate, p: &str| c.name.starts_with(p);
    let plain = |c: &Candidate| !(is(c, "docker") || c.name == "lo" || is(c, "virbr"));
    let v4 = |c: &Candidate| c.addr.is_none_or(|a| a.ip.is_ipv4());
    let subnet = |c: &Candidate| match (c.addr, comm_id) {
        (Some(a), Some(id)) => same_subnet(a.ip, id, a.prefix),
        _ => false,
    };
    let groups: [(Reason, &Pick); 7] = [
        (Reason::Ib, &|c| is(c, "ib")),
        (Reason::CommIdSubnet, &subnet),
        (Reason::Other, &|c| plain(c) && v4(c)),
        (Reason::Other, &plain),
        (Reason::Docker, &|c| is(c, "docker")),
        (Reason::Loopback, &|c| c.name == "lo"),
        (Reason::Virbr, &|c| is(c, "virbr")),
    ];
    let mut order: Vec<Candidate> = Vec::new();
    for (reason, pred) in groups {
        for c in usable.iter().filter(|c| pred(c)) {
            if !order.iter().any(|o| o.name == c.name && o.addr == c.addr) {
                order.push(Candidate {
                    reason,
                    ..c.clone()
                });
            }
        }
    }
    if order.is_empty() {
        return Err(IfaceError::NoneUsable {
            listing: listing(all),
        });
    }
    Ok(order)
}

/// The interfaces NCCL itself lists (its Socket plugin's devices): the names of the first group
/// of `order` (as [`select`] returns it), each once, at most [`MAX_IFS`].
pub fn nccl_devices(order: &[Candidate]) -> Vec<&Candidate> {
    let Some(first) = order.first() else {
        return Vec::new();
    };
    let mut out: Vec<&Candidate> = Vec::new();
    for c in order.iter().filter(|c| c.reason == first.reason) {
        if !out.iter().any(|o| o.name == c.name) && out.len() < MAX_IFS {
            out.push(c);
        }
    }
    out
}

/// The interface the bootstrap binds among `order`: the first with a known address.
pub fn first_bindable(order: &[Candidate]) -> Option<Interface> {
    order.iter().find_map(|c| {
        c.addr.map(|a| Interface {
            name: c.name.clone(),
            addr: a.ip,
            prefix: a.prefix,
        })
    })
}

/// The interface rnccl uses for bootstrap and TCP transport traffic on this host.
///
/// Errors: as [`select`] (as [`Error::InvalidUsage`]), and [`Error::System`] when interfaces
/// cannot be listed.
pub fn bootstrap_interface(cfg: &Config, comm_id: Option<SocketAddr>) -> Result<Interface> {
    let all = iface::read_host().map_err(|e| Error::system("listing network interfaces", e))?;
    let order = select(&all, cfg, comm_id.map(|a| a.ip()))?;
    first_bindable(&order).ok_or_else(|| {
        Error::from(IfaceError::NoneUsable {
            listing: listing(&all),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, addrs: &[(&str, u8)]) -> NetInterface {
        NetInterface {
            name: name.into(),
            running: true,
            addrs: Some(
                addrs
                    .iter()
                    .map(|(a, p)| IfAddr {
                        ip: a.parse().unwrap(),
                        prefix: *p,
                    })
                    .collect(),
            ),
        }
    }

    fn host() -> Vec<NetInterface> {
        vec![
            iface("lo", &[("127.0.0.1", 8), ("::1", 128)]),
            iface("docker0", &[("172.17.0.1", 16)]),
            iface(
                "eth0",
                &[("10.0.0.5", 24), ("2001:db8::5", 64), ("fe80::1", 64)],
            ),
            iface("eth1", &[("192.168.7.2", 24)]),
            iface("ib0", &[("10.9.0.5", 16)]),
        ]
    }

    fn names(order: &[Candidate]) -> Vec<&str> {
        order.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn auto_order_prefers_ib_then_subnet_then_plain() {
        let order = select(&host(), &Config::from_pairs(&[]).unwrap(), None).unwrap();
        assert_eq!(order[0].name, "ib0");
        assert_eq!(
            names(
                &nccl_devices(&order)
                    .into_iter()
                    .cloned()
                    .collect::<Vec<_>>()
            ),
            ["ib0"]
        );
        let order = select(
            &host(),
            &Config::from_pairs(&[]).unwrap(),
            Some("192.168.7.99".parse().unwrap()),
        )
        .unwrap();
        assert_eq!(
            (order[1].name.as_str(), order[1].reason),
            ("eth1", Reason::CommIdSubnet),
            "subnet of NCCL_COMM_ID comes right after ib"
        );
        assert_eq!(names(&order).last(), Some(&"lo"));
        assert!(
            order
                .iter()
                .all(|c| c.addr.unwrap().ip != "fe80::1".parse::<IpAddr>().unwrap()),
            "link-local addresses cannot be bound without a scope"
        );
        let no_ib: Vec<NetInterface> = host().into_iter().filter(|i| i.name != "ib0").collect();
        let order = select(&no_ib, &Config::from_pairs(&[]).unwrap(), None).unwrap();
        assert_eq!(first_bindable(&order).unwrap().addr.to_string(), "10.0.0.5");
        assert_eq!(
            nccl_devices(&order)
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["eth0", "eth1"],
            "NCCL's list is the first group, each name once"
        );
    }

    #[test]
    fn ifname_and_family_filters() {
        let picked = select(
            &host(),
            &Config::from_pairs(&[("NCCL_SOCKET_IFNAME", "^lo,docker,ib")]).unwrap(),
            None,
        )
        .unwrap();
        assert!(picked.iter().all(|c| c.name.starts_with("eth")));
        let picked = select(
            &host(),
            &Config::from_pairs(&[
                ("NCCL_SOCKET_IFNAME", "=eth0"),
                ("NCCL_SOCKET_FAMILY", "AF_INET6"),
            ])
            .unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(
            first_bindable(&picked),
            Some(Interface {
                name: "eth0".into(),
                addr: "2001:db8::5".parse().unwrap(),
                prefix: 64
            })
        );
        let e = select(
            &host(),
            &Config::from_pairs(&[("NCCL_SOCKET_IFNAME", "enp")]).unwrap(),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("matches no interface") && e.contains("eth1 (192.168.7.2)"),
            "{e}"
        );
        let one_char = select(
            &host(),
            &Config::from_pairs(&[("NCCL_SOCKET_IFNAME", "x")]).unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(
            one_char[0].name, "ib0",
            "values of one character are ignored, as in NCCL"
        );
        let e = select(
            &host(),
            &Config::from_pairs(&[("NCCL_SOCKET_FAMILY", "inet")]).unwrap(),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("NCCL_SOCKET_FAMILY"), "{e}");
    }

    #[test]
    fn unknown_addresses_count_when_running() {
        let mut fixture = vec![
            NetInterface {
                name: "eth0".into(),
                running: false,
                addrs: None,
            },
            NetInterface {
                name: "eth1".into(),
                running: true,
                addrs: None,
            },
        ];
        let order = select(
            &fixture,
            &Config::from_pairs(&[("NCCL_SOCKET_FAMILY", "AF_INET6")]).unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(names(&order), ["eth1"]);
        assert_eq!(first_bindable(&order), None, "no address to bind");
        fixture[1].running = false;
        assert!(matches!(
            select(&fixture, &Config::from_pairs(&[]).unwrap(), None),
            Err(IfaceError::NoneUsable { .. })
        ));
    }
}
