//! Checks against this host: device filters (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`) evaluated on the
//! interfaces and HCA ports that exist (NVIDIA/nccl#1837: a filter that matches nothing fails with
//! a cryptic error), and files that must exist.

use std::path::Path;

use crate::config::finding::Finding;
use crate::config::host::{Family, HostDevices};
use crate::config::registry::{KnobSpec, KnobType};
use crate::config::syntax::DeviceFilter;
use crate::config::{Config, lookup, value};

/// Host-dependent findings for `spec` set to `raw` (already known to parse).
pub(super) fn check(cfg: &Config, spec: &KnobSpec, raw: &str, host: &HostDevices) -> Vec<Finding> {
    match (spec.name, spec.ty) {
        ("NCCL_SOCKET_IFNAME", _) if raw.len() > 1 => interfaces(cfg, raw, host),
        ("NCCL_IB_HCA", _) => hcas(cfg, raw, host),
        (_, KnobType::File) => file_exists(spec, raw),
        (_, KnobType::OutputFile) => parent_exists(raw),
        _ => Vec::new(),
    }
}

/// Entries of a prefix filter that also select longer names (`mlx5_1` picks `mlx5_10`).
fn prefix_surprises(filter: &DeviceFilter, names: &[&str]) -> Vec<Finding> {
    if filter.exact {
        return Vec::new();
    }
    filter
        .entries
        .iter()
        .filter_map(|e| {
            let longer: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| n.starts_with(&e.name) && *n != e.name)
                .collect();
            (names.contains(&e.name.as_str()) && !longer.is_empty()).then(|| {
                Finding::note(format!(
                    "{} is a prefix: it also selects {}",
                    e.name,
                    longer.join(", ")
                ))
            })
        })
        .collect()
}

fn interfaces(cfg: &Config, raw: &str, host: &HostDevices) -> Vec<Finding> {
    let Ok(filter) = DeviceFilter::parse(raw) else {
        return Vec::new();
    };
    let family = match cfg.setting("NCCL_SOCKET_FAMILY").map(|s| s.raw.as_str()) {
        Some("AF_INET") => Some(Family::V4),
        Some("AF_INET6") => Some(Family::V6),
        _ => None,
    };
    let all: Vec<&str> = host.interfaces.iter().map(|i| i.name.as_str()).collect();
    let matched: Vec<_> = host
        .interfaces
        .iter()
        .filter(|i| filter.matches(&i.name, None))
        .collect();
    let usable: Vec<&str> = matched
        .iter()
        .filter(|i| i.usable(family))
        .map(|i| i.name.as_str())
        .collect();
    let listing = if all.is_empty() {
        "none".to_string()
    } else {
        all.join(", ")
    };
    let mut out = Vec::new();
    if matched.is_empty() {
        out.push(Finding::error(
            format!("matches no network interface on this host (interfaces here: {listing}); NCCL fails to initialise"),
            "name an interface that exists, e.g. =eth0, or unset it",
        ));
    } else if usable.is_empty() {
        let names: Vec<&str> = matched.iter().map(|i| i.name.as_str()).collect();
        let fam = match family {
            Some(Family::V4) => " IPv4",
            Some(Family::V6) => " IPv6",
            None => "",
        };
        out.push(Finding::error(
            format!(
                "matches {} but none is up with an{fam} address, so NCCL finds no interface",
                names.join(", ")
            ),
            "bring the interface up, give it an address, or pick another",
        ));
    } else {
        out.push(Finding::note(format!(
            "NCCL would use: {}",
            usable.join(", ")
        )));
    }
    out.extend(prefix_surprises(&filter, &all));
    out
}

fn hcas(cfg: &Config, raw: &str, host: &HostDevices) -> Vec<Finding> {
    let ib_disabled = cfg
        .setting("NCCL_IB_DISABLE")
        .and_then(|s| lookup("NCCL_IB_DISABLE").map(|k| value::read(k, &s.raw)));
    if ib_disabled.is_some_and(|r| r.effective != "0") {
        return Vec::new();
    }
    let Ok(filter) = DeviceFilter::parse(raw) else {
        return Vec::new();
    };
    let dir = host.sysfs.join("class/infiniband");
    if host.hca_ports.is_empty() {
        return vec![Finding::error(
            format!(
                "this host has no InfiniBand/RoCE ports (nothing under {}); NCCL finds no IB device and falls back to TCP sockets",
                dir.display()
            ),
            "check the HCA driver (ibv_devinfo), or unset NCCL_IB_HCA on hosts without HCAs",
        )];
    }
    let listing: Vec<String> = host
        .hca_ports
        .iter()
        .map(|p| format!("{}:{} ({}, {})", p.hca, p.port, p.state, p.link_layer))
        .collect();
    let matched: Vec<_> = host
        .hca_ports
        .iter()
        .filter(|p| filter.matches(&p.hca, Some(p.port)))
        .collect();
    let active: Vec<String> = matched
        .iter()
        .filter(|p| p.active())
        .map(|p| format!("{}:{}", p.hca, p.port))
        .collect();
    let mut out = Vec::new();
    if matched.is_empty() {
        out.push(Finding::error(
            format!("matches no HCA port on this host (ports here: {}); NCCL finds no IB device and falls back to TCP sockets", listing.join(", ")),
            "name an HCA that exists, e.g. =mlx5_0, or unset it",
        ));
    } else if active.is_empty() {
        out.push(Finding::error(
            format!("matches only ports that are not ACTIVE (ports here: {}); NCCL uses active ports only", listing.join(", ")),
            "bring the port up (ibstat), or select another HCA",
        ));
    } else {
        out.push(Finding::note(format!(
            "NCCL would use: {}",
            active.join(", ")
        )));
    }
    let mut names: Vec<&str> = host.hca_ports.iter().map(|p| p.hca.as_str()).collect();
    names.dedup();
    out.extend(prefix_surprises(&filter, &names));
    out
}

fn file_exists(spec: &KnobSpec, raw: &str) -> Vec<Finding> {
    let path = Path::new(raw);
    if raw.starts_with('~') || path.exists() {
        return Vec::new();
    }
    let what = match spec.name {
        "NCCL_CONF_FILE" => "NCCL skips a missing conf file without a word",
        "NCCL_TOPO_FILE" => "NCCL cannot load the topology from it",
        "NCCL_GRAPH_FILE" => "NCCL cannot load the graphs from it",
        _ => "the program cannot read it",
    };
    vec![Finding::warning(
        format!("file not found (from this directory): {what}"),
        "check the path",
    )]
}

fn parent_exists(raw: &str) -> Vec<Finding> {
    match Path::new(raw).parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !raw.starts_with('~') && !dir.exists() => {
            vec![Finding::warning(
                format!(
                    "directory {} does not exist, so the file cannot be written",
                    dir.display()
                ),
                "create the directory or choose another path",
            )]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadOptions;
    use crate::config::finding::Severity;
    use crate::config::host::{HcaPort, Interface};

    fn host() -> HostDevices {
        let iface = |name: &str, ip: &str| Interface {
            name: name.into(),
            running: true,
            addrs: Some(vec![ip.parse().unwrap()]),
        };
        HostDevices {
            interfaces: vec![iface("eth0", "10.0.0.2"), iface("ib0", "fd00::2")],
            hca_ports: vec![HcaPort {
                hca: "mlx5_0".into(),
                port: 1,
                state: "ACTIVE".into(),
                link_layer: "InfiniBand".into(),
            }],
            sysfs: "/sys".into(),
        }
    }

    fn findings(pairs: &[(&str, &str)], name: &str) -> Vec<Finding> {
        let cfg = Config::load(&LoadOptions {
            env: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            home: Some("/nonexistent".into()),
            system_conf: Some("/nonexistent/nccl.conf".into()),
            ..LoadOptions::default()
        })
        .unwrap();
        let raw = &cfg.setting(name).unwrap().raw;
        check(&cfg, lookup(name).unwrap(), raw, &host())
    }

    #[test]
    fn socket_family_filters_addresses() {
        let f = findings(
            &[
                ("NCCL_SOCKET_IFNAME", "eth0"),
                ("NCCL_SOCKET_FAMILY", "AF_INET6"),
            ],
            "NCCL_SOCKET_IFNAME",
        );
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].message.contains("IPv6"), "{f:?}");
        let f = findings(&[("NCCL_SOCKET_IFNAME", "^eth")], "NCCL_SOCKET_IFNAME");
        assert_eq!(f[0].message, "NCCL would use: ib0");
    }

    #[test]
    fn hca_ports_and_disabled_ib() {
        let f = findings(&[("NCCL_IB_HCA", "=mlx5_0:2")], "NCCL_IB_HCA");
        assert!(
            f[0].message.contains("mlx5_0:1 (ACTIVE, InfiniBand)"),
            "{f:?}"
        );
        let f = findings(
            &[("NCCL_IB_HCA", "mlx5_9"), ("NCCL_IB_DISABLE", "1")],
            "NCCL_IB_HCA",
        );
        assert!(
            f.is_empty(),
            "IB is off, so the filter is not checked: {f:?}"
        );
    }
}
