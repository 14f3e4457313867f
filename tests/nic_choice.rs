//! One "which NIC would NCCL use" rule: `env-explain`'s verdict on `NCCL_SOCKET_IFNAME`,
//! `NCCL_SOCKET_FAMILY` and `NCCL_COMM_ID` names the interface and address the bootstrap binds,
//! on this host (against the real bootstrap) and on host fixtures with several filters.

use std::net::{IpAddr, SocketAddr};

use rnccl::config::{Config, Severity};
use rnccl::explain::HostDevices;
use rnccl::explain::explain;
use rnccl::topo::detect::iface::{IfAddr, NetInterface};
use rnccl::topo::ifaces::{self, bootstrap_interface};

/// What env-explain says about the socket choice: `Ok((name, addr))` from its "the bootstrap
/// binds NAME (ADDR)" note, `Err(message)` for an error finding, `Ok(None)`-like `None` when it
/// names no address (a fixture without addresses).
fn explained(cfg: &Config, host: &HostDevices) -> Result<Option<(String, IpAddr)>, String> {
    let report = explain(cfg, host);
    let about = ["NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_COMM_ID"];
    let item = about
        .iter()
        .find_map(|n| report.settings.iter().find(|s| s.name == *n))
        .expect("a socket setting is explained");
    if let Some(e) = item.findings.iter().find(|f| f.severity == Severity::Error) {
        return Err(e.message.clone());
    }
    let note = item
        .findings
        .iter()
        .find(|f| f.message.starts_with("NCCL would use: "))
        .unwrap_or_else(|| panic!("no choice in {item:?}"));
    Ok(note
        .message
        .split_once("the bootstrap binds ")
        .map(|(_, b)| {
            let (name, addr) = b.split_once(" (").unwrap();
            (
                name.to_string(),
                addr.trim_end_matches(')').parse().unwrap(),
            )
        }))
}

#[test]
fn env_explain_names_what_the_bootstrap_binds_on_this_host() {
    let host = HostDevices::detect();
    let mut cases: Vec<Vec<(&str, &str)>> = Vec::new();
    for ifname in [
        "lo",
        "=lo",
        "^lo",
        "e",
        "eth",
        "^=lo",
        "=nope",
        "^lo,eth,ifb,docker",
    ] {
        for family in [None, Some("AF_INET"), Some("AF_INET6")] {
            let mut c = vec![("NCCL_SOCKET_IFNAME", ifname)];
            c.extend(family.map(|f| ("NCCL_SOCKET_FAMILY", f)));
            cases.push(c);
        }
    }
    cases.push(vec![("NCCL_SOCKET_FAMILY", "AF_INET6")]);
    cases.push(vec![("NCCL_SOCKET_FAMILY", "AF_INET")]);
    cases.push(vec![("NCCL_COMM_ID", "127.0.0.1:29999")]);
    for pairs in cases {
        let cfg = Config::from_pairs(&pairs).unwrap();
        let comm_id: Option<SocketAddr> = cfg.string("NCCL_COMM_ID").map(|a| a.parse().unwrap());
        let bootstrap = bootstrap_interface(&cfg, comm_id);
        match (explained(&cfg, &host), bootstrap) {
            (Ok(Some((name, addr))), Ok(i)) => {
                assert_eq!((name, addr), (i.name, i.addr), "{pairs:?}")
            }
            (Err(_), Err(_)) => {}
            (said, did) => panic!("{pairs:?}: env-explain says {said:?}, the bootstrap {did:?}"),
        }
    }
}

fn iface(name: &str, running: bool, addrs: &[(&str, u8)]) -> NetInterface {
    NetInterface {
        name: name.into(),
        running,
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

fn fixture(interfaces: Vec<NetInterface>) -> HostDevices {
    HostDevices {
        interfaces,
        hcas: Vec::new(),
        root: "/".into(),
    }
}

#[test]
fn env_explain_follows_the_bootstrap_rule_on_fixtures() {
    let hosts = [
        fixture(vec![
            iface("lo", true, &[("127.0.0.1", 8), ("::1", 128)]),
            iface("docker0", true, &[("172.17.0.1", 16)]),
            iface("eth0", true, &[("10.0.0.5", 24), ("2001:db8::5", 64)]),
            iface("ib0", true, &[("10.9.0.5", 16)]),
        ]),
        fixture(vec![
            iface("lo", true, &[("127.0.0.1", 8)]),
            iface("eth0", false, &[("192.168.1.4", 24)]),
            iface("ens1f0", true, &[("fd00::9", 64), ("fe80::9", 64)]),
        ]),
        fixture(vec![iface("lo", true, &[("127.0.0.1", 8)])]),
    ];
    let filters = [
        vec![("NCCL_SOCKET_IFNAME", "eth")],
        vec![("NCCL_SOCKET_IFNAME", "^ib,lo")],
        vec![
            ("NCCL_SOCKET_IFNAME", "=ens1f0"),
            ("NCCL_SOCKET_FAMILY", "AF_INET"),
        ],
        vec![
            ("NCCL_SOCKET_IFNAME", "ens,eth"),
            ("NCCL_SOCKET_FAMILY", "AF_INET6"),
        ],
        vec![("NCCL_SOCKET_FAMILY", "AF_INET6")],
        vec![("NCCL_COMM_ID", "172.17.0.9:5000")],
        vec![
            ("NCCL_COMM_ID", "192.168.1.1:5000"),
            ("NCCL_SOCKET_FAMILY", "AF_INET"),
        ],
    ];
    let mut agreed = 0;
    for (h, host) in hosts.iter().enumerate() {
        for pairs in &filters {
            let cfg = Config::from_pairs(pairs).unwrap();
            let comm_id = cfg
                .string("NCCL_COMM_ID")
                .map(|a| a.parse::<SocketAddr>().unwrap().ip());
            let rule = ifaces::select(&host.interfaces, &cfg, comm_id)
                .map(|order| ifaces::first_bindable(&order).map(|i| (i.name, i.addr)));
            match (explained(&cfg, host), rule) {
                (Ok(said), Ok(bound)) => assert_eq!(said, bound, "host {h} {pairs:?}"),
                (Err(_), Err(_)) => {}
                (said, rule) => panic!("host {h} {pairs:?}: env-explain {said:?}, rule {rule:?}"),
            }
            agreed += 1;
        }
    }
    assert_eq!(agreed, hosts.len() * filters.len());
    // The subnet of NCCL_COMM_ID wins over plain interfaces, docker's included.
    let cfg = Config::from_pairs(&[("NCCL_COMM_ID", "172.17.0.9:5000")]).unwrap();
    assert_eq!(
        explained(&cfg, &hosts[0]).unwrap().unwrap().0,
        "ib0",
        "ib first, as NCCL"
    );
    let no_ib = fixture(
        hosts[0]
            .interfaces
            .iter()
            .filter(|i| i.name != "ib0")
            .cloned()
            .collect(),
    );
    assert_eq!(explained(&cfg, &no_ib).unwrap().unwrap().0, "docker0");
}
