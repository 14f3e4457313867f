//! Multi-node NVLink (MNNVL) topology files, as NCCL fuses and dumps them for a clique spanning
//! several hosts (NCCL 2.28 src/graph/topo.cc `ncclTopoGetSystemFromXml`, `ncclGetSystemId`):
//! several `host_hash` values, one NVSwitch shared by every host, CPUs linked only within their
//! host, node ids carrying the host index, and the channel search over the whole clique.

use rnccl::graph::xml::graphs_xml;
use rnccl::graph::{PlanParams, search_and_connect};
use rnccl::topo::{LinkType, NodeRef, NodeType, PathType, System};

fn gb300() -> System {
    System::from_xml_str(include_str!("fixtures/synthetic/gb300-2host.xml")).unwrap()
}

#[test]
fn hosts_get_their_own_ids_and_share_one_nvswitch() {
    let sys = gb300();
    assert_eq!(
        sys.hosts,
        vec![0x3f1c_5b2a_9e0d_4471, 0x8a27_e6d1_c4b3_f590]
    );
    assert_eq!(sys.count(NodeType::Gpu), 8);
    assert_eq!(sys.count(NodeType::Cpu), 4);
    assert_eq!(sys.count(NodeType::Nvs), 1);
    assert_eq!(sys.count(NodeType::Net), 8);
    let labels: Vec<String> = sys.nodes(NodeType::Gpu).iter().map(|n| n.label()).collect();
    assert_eq!(
        labels,
        [
            "GPU/0-806000",
            "GPU/0-906000",
            "GPU/0-1806000",
            "GPU/0-1906000",
            "GPU/1-806000",
            "GPU/1-906000",
            "GPU/1-1806000",
            "GPU/1-1906000"
        ]
    );
    let ranks: Vec<usize> = (0..8)
        .map(|g| sys.nodes(NodeType::Gpu)[g].gpu().unwrap().rank)
        .collect();
    assert_eq!(ranks, (0..8).collect::<Vec<_>>());
    for (c, cpu) in sys.nodes(NodeType::Cpu).iter().enumerate() {
        let sys_links: Vec<NodeRef> = cpu
            .links
            .iter()
            .filter(|l| l.ty == LinkType::Sys)
            .map(|l| l.rem)
            .collect();
        assert_eq!(
            sys_links.len(),
            1,
            "CPU {c} links only its host's other CPU"
        );
        assert_eq!(sys.node(sys_links[0]).host(), cpu.host());
    }
    let g0 = NodeRef::new(NodeType::Gpu, 0);
    let g5 = NodeRef::new(NodeType::Gpu, 5);
    let p = sys.path(g0, g5).unwrap();
    assert_eq!(
        (p.ty, p.hops()),
        (PathType::Nvl, 2),
        "across hosts through the NVSwitch"
    );
    assert!((p.bw - 18.0 * 40.1).abs() < 0.01);
    let n0 = NodeRef::new(NodeType::Net, 0);
    assert_eq!(sys.path(g0, n0).unwrap().ty, PathType::P2c);
    assert_eq!(sys.host_of(NodeRef::new(NodeType::Net, 4)), 1);
}

/// The numbers NCCL 2.29.7 reported for a healthy two-tray GB300 clique (8 GPUs, all with 18
/// NVLinks to the NVSwitches) in a public root-cause report: ring graph 16 searched channels at
/// 45 GB/s, tree graph 16 channels, 32 collective channels once connected.
#[test]
fn the_clique_is_searched_as_one_nvlink_domain() {
    let sys = gb300();
    let ch = search_and_connect(&sys, &[(0..8).collect()], &PlanParams::default()).unwrap();
    assert!(!ch.inter);
    assert_eq!((ch.ring.n_channels, ch.ring.bw_intra), (16, 45.0));
    assert_eq!(ch.ring.type_intra, PathType::Nvl);
    assert_eq!(ch.tree.n_channels, 16);
    assert_eq!(ch.connected.nchannels, 32);
    assert_eq!(ch.ring.channel(0), &[0, 1, 2, 3, 4, 5, 6, 7]);
    let xml = graphs_xml(&sys, &ch.ring, &ch.tree, ch.inter);
    let first: Vec<&str> = xml.lines().skip(3).take(8).map(str::trim).collect();
    assert_eq!(
        first,
        [
            "<gpu dev=\"0\"/>",
            "<gpu dev=\"0x1\"/>",
            "<gpu dev=\"0x2\"/>",
            "<gpu dev=\"0x3\"/>",
            "<gpu dev=\"0x100000000000000\"/>",
            "<gpu dev=\"0x100000000000001\"/>",
            "<gpu dev=\"0x100000000000002\"/>",
            "<gpu dev=\"0x100000000000003\"/>"
        ],
        "a GPU's dev carries its host index, NCCL_TOPO_ID(systemId, dev)"
    );
}

/// Two cliques talking over the network: channels enter through the NICs of both trays, and
/// with `NCCL_CROSS_NIC=0` (rails per host, `NCCL_MNNVL_RAIL_PER_HOST`) stay on one NIC.
#[test]
fn two_cliques_over_the_network() {
    let sys = gb300();
    let ranks: Vec<Vec<usize>> = vec![(0..8).collect(), (8..16).collect()];
    let mut params = PlanParams::default();
    let ch = search_and_connect(&sys, &ranks, &params).unwrap();
    assert!(ch.inter);
    assert!(ch.ring.n_channels > 0);
    let nets: Vec<u64> = (0..ch.ring.n_channels).map(|c| ch.ring.nets(c).0).collect();
    let hosts: std::collections::BTreeSet<u64> = nets.iter().map(|id| id >> 56).collect();
    assert_eq!(
        hosts.len(),
        2,
        "channels enter through both trays' NICs: {nets:x?}"
    );
    params.search.rail_per_host = true;
    params.search.cross_nic = 0;
    let railed = search_and_connect(&sys, &ranks, &params).unwrap();
    for c in 0..railed.ring.n_channels {
        let (i, o) = railed.ring.nets(c);
        assert_eq!(i, o, "NCCL_CROSS_NIC=0 keeps a channel on one rail");
    }
}
