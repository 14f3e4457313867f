//! Hosts and rails: what each rank says about itself at the start of a check, the hosts that
//! follows from it, and the planes measured — the default interface, or one plane per rail
//! where hosts have several NICs.
//!
//! A rail is one NIC of each host, chosen with `NCCL_SOCKET_IFNAME=<exact name>` on that host
//! (rnccl's network transport is TCP sockets, so a rail is an IP interface: Ethernet, or
//! IPoIB's `ib0`, `ib1` on InfiniBand). `auto` takes NCCL's own socket device list on each host
//! (the first group of its interface order, see [`crate::topo::ifaces`], running interfaces
//! only) and makes rail `i` of each host's `i`-th device, when any host has several; a list of
//! names makes one rail per name. A host without a rail's NIC is a host problem.

use serde::{Deserialize, Serialize};

use super::report::{HostFacts, HostProblem};
use crate::config::Config;
use crate::error::Result;
use crate::topo::detect::iface;
use crate::topo::ifaces::{nccl_devices, select};

/// Which NICs a check measures pairs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rails {
    /// The interface the bootstrap picks (NCCL's rules, `NCCL_SOCKET_IFNAME` honoured).
    Default,
    /// One rail per NIC of NCCL's socket device list, where any host has several.
    Auto,
    /// One rail per interface name, the same name on every host.
    Names(Vec<String>),
}

impl std::fmt::Display for Rails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rails::Default => f.write_str("none"),
            Rails::Auto => f.write_str("auto"),
            Rails::Names(n) => f.write_str(&n.join(",")),
        }
    }
}

/// Where one rank of a check runs, as its caller knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankSetup {
    /// Its host's name in reports.
    pub host: String,
    /// What makes its host one host: ranks with the same key are on the same host.
    pub host_key: String,
    /// Its GPU's CUDA ordinal; `None` for a CPU rank on host memory.
    pub device: Option<usize>,
}

impl RankSetup {
    /// A rank on a host named by a host list: the name is the host's key.
    pub fn named(host: &str, device: Option<usize>) -> RankSetup {
        RankSetup {
            host: host.to_string(),
            host_key: host.to_string(),
            device,
        }
    }

    /// A rank a launcher started on this host: named `NCCL_HOSTID` when set, else the short
    /// host name; keyed by NCCL's host identity (`NCCL_HOSTID`, else host name and boot id).
    pub fn launched(knobs: &Config, device: Option<usize>) -> RankSetup {
        RankSetup {
            host: knobs
                .string("NCCL_HOSTID")
                .map_or_else(crate::os::host::short_hostname, str::to_string),
            host_key: crate::bootstrap::host::host_id(knobs),
            device,
        }
    }
}

/// What a rank tells every other at the start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RankInfo {
    host: String,
    key: String,
    device: String,
    /// NCCL's socket devices here, running ones, in its order.
    nics: Vec<String>,
    /// Every interface with an address.
    ifaces: Vec<String>,
}

impl RankInfo {
    /// This rank's facts.
    ///
    /// Errors: [`crate::error::Error::System`] when the interfaces cannot be listed;
    /// [`crate::error::Error::InvalidUsage`] for a bad `NCCL_SOCKET_IFNAME`.
    pub(crate) fn of(me: &RankSetup, knobs: &Config) -> Result<RankInfo> {
        let all = iface::read_host()
            .map_err(|e| crate::error::Error::system("listing network interfaces", e))?;
        let order = select(&all, knobs, None)?;
        let nics = nccl_devices(&order)
            .into_iter()
            .filter(|c| c.running)
            .map(|c| c.name.clone())
            .collect();
        let ifaces = all
            .iter()
            .filter(|i| i.addrs.as_ref().is_some_and(|a| !a.is_empty()))
            .map(|i| i.name.clone())
            .collect();
        let device = match me.device {
            None => "CPU".to_string(),
            Some(d) => crate::device::cuda::gpus()
                .ok()
                .and_then(|g| g.into_iter().find(|g| g.ordinal == d))
                .map_or_else(|| format!("GPU {d}"), |g| g.name),
        };
        Ok(RankInfo {
            host: me.host.clone(),
            key: me.host_key.clone(),
            device,
            nics,
            ifaces,
        })
    }
}

#[cfg(test)]
impl RankInfo {
    /// A CPU rank on `host` (its key too) with socket devices `nics`, for tests.
    pub(crate) fn fixture(host: &str, nics: &[&str]) -> RankInfo {
        RankInfo {
            host: host.into(),
            key: host.into(),
            device: "CPU".into(),
            nics: nics.iter().map(|s| s.to_string()).collect(),
            ifaces: nics
                .iter()
                .map(|s| s.to_string())
                .chain(["lo".to_string()])
                .collect(),
        }
    }
}

/// The world's hosts, in order of their first rank.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// Each host's facts.
    pub hosts: Vec<HostFacts>,
    /// Each world rank's host.
    pub host_of: Vec<usize>,
    /// Each host's interfaces with an address.
    ifaces: Vec<Vec<String>>,
}

impl Layout {
    /// The hosts of every rank's `infos` (in world rank order). Two hosts with one name get
    /// `#2`, `#3`… appended to the later ones.
    pub(crate) fn new(infos: &[RankInfo]) -> Layout {
        let mut keys: Vec<&str> = Vec::new();
        let mut hosts: Vec<HostFacts> = Vec::new();
        let mut ifaces = Vec::new();
        let mut host_of = Vec::with_capacity(infos.len());
        for info in infos {
            let h = match keys.iter().position(|k| *k == info.key) {
                Some(h) => h,
                None => {
                    let same = hosts
                        .iter()
                        .filter(|h| h.name.split('#').next() == Some(info.host.as_str()))
                        .count();
                    let name = match same {
                        0 => info.host.clone(),
                        n => format!("{}#{}", info.host, n + 1),
                    };
                    keys.push(&info.key);
                    hosts.push(HostFacts {
                        name,
                        ranks: 0,
                        device: info.device.clone(),
                        nics: info.nics.clone(),
                    });
                    ifaces.push(info.ifaces.clone());
                    hosts.len() - 1
                }
            };
            hosts[h].ranks += 1;
            host_of.push(h);
        }
        Layout {
            hosts,
            host_of,
            ifaces,
        }
    }
}

/// One plane: the NIC each host uses, `None` for hosts not on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plane {
    /// The rail's name; `None` for the default interface.
    pub label: Option<String>,
    /// Per host: on the plane, with the interface to select (`None`: the default choice).
    pub nic: Vec<Option<Option<String>>>,
}

impl Plane {
    /// Whether host `h` is on this plane.
    pub(crate) fn has(&self, h: usize) -> bool {
        self.nic[h].is_some()
    }
}

/// The planes `rails` asks for on `layout`'s hosts, and the hosts that lack a rail's NIC.
pub(crate) fn decide(layout: &Layout, rails: &Rails) -> (Vec<Plane>, Vec<HostProblem>) {
    let n = layout.hosts.len();
    let default = || Plane {
        label: None,
        nic: vec![Some(None); n],
    };
    let mut problems = Vec::new();
    let planes = match rails {
        Rails::Default => vec![default()],
        Rails::Auto => {
            let most = layout.hosts.iter().map(|h| h.nics.len()).max().unwrap_or(0);
            if most <= 1 {
                return (vec![default()], problems);
            }
            for h in layout.hosts.iter().filter(|h| h.nics.len() < most) {
                problems.push(HostProblem {
                    host: h.name.clone(),
                    reason: format!(
                        "has {} running socket NIC{} ({}) where another host has {most}: \
                         the missing rails are not measured on it (a NIC down or unconfigured?)",
                        h.nics.len(),
                        if h.nics.len() == 1 { "" } else { "s" },
                        if h.nics.is_empty() {
                            "none".to_string()
                        } else {
                            h.nics.join(", ")
                        }
                    ),
                });
            }
            (0..most)
                .map(|i| {
                    let nic: Vec<Option<Option<String>>> = layout
                        .hosts
                        .iter()
                        .map(|h| h.nics.get(i).map(|s| Some(s.clone())))
                        .collect();
                    let mut names = nic.iter().flatten().flatten();
                    let first = names.next().cloned().unwrap_or_default();
                    let label = if names.all(|s| *s == first) {
                        first
                    } else {
                        format!("rail {i}")
                    };
                    Plane {
                        label: Some(label),
                        nic,
                    }
                })
                .collect()
        }
        Rails::Names(names) => names
            .iter()
            .map(|name| {
                let nic = (0..n)
                    .map(|h| {
                        let has = layout.ifaces[h].iter().any(|i| i == name);
                        if !has {
                            problems.push(HostProblem {
                                host: layout.hosts[h].name.clone(),
                                reason: format!(
                                    "has no interface {name} with an address (it has: {}): rail {name} is not measured on it",
                                    layout.ifaces[h].join(", ")
                                ),
                            });
                        }
                        has.then(|| Some(name.clone()))
                    })
                    .collect();
                Plane {
                    label: Some(name.clone()),
                    nic,
                }
            })
            .collect(),
    };
    (planes, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(host: &str, nics: &[&str]) -> RankInfo {
        RankInfo::fixture(host, nics)
    }

    #[test]
    fn hosts_follow_their_first_rank() {
        let mut infos = vec![
            info("a", &["eth0"]),
            info("b", &["eth0"]),
            info("a", &["eth0"]),
        ];
        infos.push(RankInfo {
            key: "other".into(),
            ..info("a", &["eth0"])
        });
        let l = Layout::new(&infos);
        let names: Vec<&str> = l.hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "a#2"]);
        assert_eq!(l.host_of, [0, 1, 0, 2]);
        assert_eq!(l.hosts[0].ranks, 2);
    }

    #[test]
    fn rails_from_nic_lists() {
        let l = Layout::new(&[info("a", &["eth0"]), info("b", &["eth0"])]);
        let (p, probs) = decide(&l, &Rails::Auto);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].label, None, "one NIC each: the default interface");
        assert!(probs.is_empty());

        let l = Layout::new(&[
            info("a", &["ib0", "ib1"]),
            info("b", &["ib0", "ib1"]),
            info("c", &["ib0"]),
            info("d", &["ib0", "ib3"]),
        ]);
        let (p, probs) = decide(&l, &Rails::Auto);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].label.as_deref(), Some("ib0"));
        assert_eq!(
            p[1].label.as_deref(),
            Some("rail 1"),
            "hosts name rail 1 differently"
        );
        assert!(!p[1].has(2) && p[1].has(3));
        assert_eq!(p[1].nic[3], Some(Some("ib3".to_string())));
        assert_eq!(probs.len(), 1);
        assert_eq!(probs[0].host, "c");
        assert!(probs[0].reason.contains("has 1 running socket NIC (ib0)"));

        let (p, probs) = decide(&l, &Rails::Names(vec!["ib1".into()]));
        assert_eq!(p.len(), 1);
        assert_eq!(
            (0..4).map(|h| p[0].has(h)).collect::<Vec<_>>(),
            [true, true, false, false]
        );
        let named: Vec<&str> = probs.iter().map(|p| p.host.as_str()).collect();
        assert_eq!(named, ["c", "d"]);
        assert!(probs[1].reason.contains("has no interface ib1"));

        let (p, _) = decide(&l, &Rails::Default);
        assert_eq!(
            p,
            vec![Plane {
                label: None,
                nic: vec![Some(None); 4]
            }]
        );
    }
}
