//! Checks against this host: device filters (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`) evaluated on the
//! interfaces and HCA ports that exist (NVIDIA/nccl#1837: a filter that matches nothing fails with
//! a cryptic error), files that must exist, and the congestion control `RNCCL_SOCKET_CC` comes to
//! on this kernel.

use std::path::Path;

use super::HostDevices;
use crate::config::syntax::DeviceFilter;
use crate::config::{Config, lookup, value};
use crate::config::{Finding, KnobSpec, KnobType};
use crate::topo::detect::net::HcaPort;
use crate::topo::ifaces::{self, Family, IfaceError};

/// Host-dependent findings for `spec` set to `raw` (already known to parse).
pub(super) fn check(cfg: &Config, spec: &KnobSpec, raw: &str, host: &HostDevices) -> Vec<Finding> {
    match (spec.name, spec.ty) {
        // A value of one character or less is ignored: the choice is then NCCL's own.
        ("NCCL_SOCKET_IFNAME", _) => interfaces(cfg, Some(raw).filter(|r| r.len() > 1), host),
        // Without a usable NCCL_SOCKET_IFNAME these two steer the choice: say where it lands.
        ("NCCL_SOCKET_FAMILY" | "NCCL_COMM_ID", _)
            if cfg
                .string("NCCL_SOCKET_IFNAME")
                .is_none_or(|v| v.len() <= 1) =>
        {
            interfaces(cfg, None, host)
        }
        ("NCCL_IB_HCA", _) => hcas(cfg, raw, host),
        ("RNCCL_SOCKET_CC", _) => congestion(raw),
        (_, KnobType::File) => file_exists(spec, raw),
        (_, KnobType::OutputFile) => parent_exists(raw),
        _ => Vec::new(),
    }
}

/// What the data sockets' congestion control comes to on this host with `RNCCL_SOCKET_CC=raw`:
/// the choice and why, or why a communicator would refuse it.
fn congestion(raw: &str) -> Vec<Finding> {
    match crate::bootstrap::congestion::Congestion::on_this_host(raw) {
        Ok(c) => vec![Finding::note(format!("on this host: {}", c.why))],
        Err(e) => vec![Finding::error(
            e.to_string(),
            "every communicator with TCP connections refuses it at init",
        )],
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

/// The socket interface choice judged by the bootstrap's own rule ([`ifaces::select`]) on this
/// host's interfaces, with `NCCL_SOCKET_IFNAME` (`ifname`, when that is the setting explained),
/// `NCCL_SOCKET_FAMILY` and `NCCL_COMM_ID`'s subnet as the bootstrap sees them: what NCCL would
/// list, which address the bootstrap would bind, or why nothing fits.
fn interfaces(cfg: &Config, ifname: Option<&str>, host: &HostDevices) -> Vec<Finding> {
    let filter = match ifname.map(DeviceFilter::parse) {
        Some(Ok(f)) => Some(f),
        Some(Err(_)) => return Vec::new(),
        None => None,
    };
    let all: Vec<&str> = host.interfaces.iter().map(|i| i.name.as_str()).collect();
    let listing = if all.is_empty() {
        "none".to_string()
    } else {
        all.join(", ")
    };
    let comm_id = cfg
        .string("NCCL_COMM_ID")
        .and_then(|a| crate::bootstrap::unique_id::resolve(a).ok())
        .map(|a| a.ip());
    let mut out = Vec::new();
    match ifaces::select(&host.interfaces, cfg, comm_id) {
        Ok(order) => {
            let used: Vec<&str> = ifaces::nccl_devices(&order)
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            let bind = ifaces::first_bindable(&order)
                .map(|b| format!("; the bootstrap binds {} ({})", b.name, b.addr))
                .unwrap_or_default();
            out.push(Finding::note(format!(
                "NCCL would use: {}{bind}",
                used.join(", ")
            )));
            if let Some(c) = order.first().filter(|c| !c.running) {
                out.push(Finding::warning(
                    format!(
                        "{} is not running (down, or no carrier): NCCL still picks it, and connections over it fail",
                        c.name
                    ),
                    "bring it up, or select another interface",
                ));
            }
        }
        Err(IfaceError::NoMatch { family, .. }) => {
            let named: Vec<&str> = all
                .iter()
                .copied()
                .filter(|n| filter.as_ref().is_some_and(|f| f.matches(n, None)))
                .collect();
            if named.is_empty() {
                out.push(Finding::error(
                    format!("matches no network interface on this host (interfaces here: {listing}); NCCL fails to initialise"),
                    "name an interface that exists, e.g. =eth0, or unset it",
                ));
            } else {
                let fam = match family {
                    Some(Family::V4) => " IPv4",
                    Some(Family::V6) => " IPv6",
                    None => "",
                };
                out.push(Finding::error(
                    format!(
                        "matches {} but none is up with an{fam} address, so NCCL finds no interface",
                        named.join(", ")
                    ),
                    "bring the interface up, give it an address, or pick another",
                ));
            }
        }
        Err(IfaceError::NoneUsable { .. }) => out.push(Finding::error(
            format!(
                "no interface here has a usable{} address (interfaces here: {listing}); NCCL fails to initialise",
                match ifaces::family(cfg) {
                    Ok(Some(Family::V4)) => " IPv4",
                    Ok(Some(Family::V6)) => " IPv6",
                    _ => "",
                }
            ),
            "give an interface an address, or change NCCL_SOCKET_FAMILY",
        )),
        // A malformed filter or family is that value's own finding.
        Err(IfaceError::Config(_)) => {}
    }
    if let Some(f) = &filter {
        out.extend(prefix_surprises(f, &all));
    }
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
    let ports: Vec<(&str, &HcaPort)> = host
        .hcas
        .iter()
        .flat_map(|h| h.ports.iter().map(move |p| (h.name.as_str(), p)))
        .collect();
    if ports.is_empty() {
        return vec![Finding::error(
            format!(
                "this host has no InfiniBand/RoCE ports (nothing under {}); NCCL finds no IB device and falls back to TCP sockets",
                host.infiniband_dir().display()
            ),
            "check the HCA driver (ibv_devinfo), or unset NCCL_IB_HCA on hosts without HCAs",
        )];
    }
    let listing: Vec<String> = ports
        .iter()
        .map(|(h, p)| {
            format!(
                "{h}:{} ({}, {})",
                p.port,
                p.state_word(),
                p.link_layer.as_deref().unwrap_or("")
            )
        })
        .collect();
    let matched: Vec<&(&str, &HcaPort)> = ports
        .iter()
        .filter(|(h, p)| filter.matches(h, Some(p.port)))
        .collect();
    let active: Vec<String> = matched
        .iter()
        .filter(|(_, p)| p.active())
        .map(|(h, p)| format!("{h}:{}", p.port))
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
    let names: Vec<&str> = host.hcas.iter().map(|h| h.name.as_str()).collect();
    out.extend(prefix_surprises(&filter, &names));
    out
}

fn file_exists(spec: &KnobSpec, raw: &str) -> Vec<Finding> {
    let path = Path::new(raw);
    if spec.name == "NCCL_TOPO_FILE" && path.exists() {
        return topology_verdict(raw);
    }
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

/// What NCCL makes of topology file `raw`: the verdict `rnccl topo` and communicator creation
/// give (a malformed file, or one NCCL's parser refuses, fails NCCL's init).
fn topology_verdict(raw: &str) -> Vec<Finding> {
    use crate::topo::xml::read::{Schema, parse};
    let text = match std::fs::read_to_string(raw) {
        Ok(t) => t,
        Err(e) => {
            return vec![Finding::error(
                format!("cannot be read ({e}): NCCL cannot load the topology from it"),
                "check the path and its permissions",
            )];
        }
    };
    match parse(&text, raw, Schema::Topology) {
        Err(e) => vec![Finding::error(
            format!("{e}: NCCL fails communicator creation"),
            format!("fix the file (rnccl topo --topo-file {raw} shows it)"),
        )],
        Ok(p) => p
            .notes
            .iter()
            .filter(|n| n.nccl_rejects)
            .map(|n| {
                Finding::error(
                    format!("NCCL would refuse this topology: {n}"),
                    format!("fix the file (rnccl topo --topo-file {raw} lists every problem)"),
                )
            })
            .collect(),
    }
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
    use crate::config::Severity;
    use crate::topo::detect::iface::{IfAddr, NetInterface};
    use crate::topo::detect::net::Hca;

    fn host() -> HostDevices {
        let iface = |name: &str, ip: &str| NetInterface {
            name: name.into(),
            running: true,
            addrs: Some(vec![IfAddr {
                ip: ip.parse().unwrap(),
                prefix: 24,
            }]),
        };
        HostDevices {
            interfaces: vec![iface("eth0", "10.0.0.2"), iface("ib0", "fd00::2")],
            hcas: vec![Hca {
                name: "mlx5_0".into(),
                guid: None,
                device_path: None,
                pci_busid: None,
                ports: vec![HcaPort {
                    port: 1,
                    state: Some("4: ACTIVE".into()),
                    rate: None,
                    link_layer: Some("InfiniBand".into()),
                }],
            }],
            root: "/".into(),
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
        assert_eq!(
            f[0].message,
            "NCCL would use: ib0; the bootstrap binds ib0 (fd00::2)"
        );
    }

    #[test]
    fn a_down_interface_is_picked_with_a_warning() {
        let mut h = host();
        h.interfaces[0].running = false;
        let cfg = {
            let mut c = Config::defaults();
            c.set("NCCL_SOCKET_IFNAME", "=eth0", crate::config::Source::Env);
            c
        };
        let f = check(&cfg, lookup("NCCL_SOCKET_IFNAME").unwrap(), "=eth0", &h);
        assert!(f[0].message.contains("binds eth0 (10.0.0.2)"), "{f:?}");
        assert_eq!(f[1].severity, Severity::Warning);
        assert!(f[1].message.contains("not running"), "{f:?}");
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
