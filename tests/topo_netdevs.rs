//! Which network devices NCCL uses: `NCCL_NETDEVS_POLICY` (NCCL 2.28 src/graph/topo.cc
//! `ncclTopoGetLocalNet`, src/graph/search.cc `ncclTopoSelectNets`) — how many of its closest
//! NICs a GPU spreads its channels over, and what that does to the channels NCCL builds across
//! nodes, on `dgx8x16.xml` (per PCIe switch two GPUs and four 200 Gb/s NICs) — and NIC fusion
//! (`NCCL_NET_MERGE_LEVEL`, src/graph/topo.cc `ncclTopoMakeVNics`).

use rnccl::graph::{PlanParams, search_and_connect};
use rnccl::topo::params::NetDevsPolicy;
use rnccl::topo::{NodeType, System, TopoParams};

fn dgx(policy: NetDevsPolicy) -> System {
    let params = TopoParams {
        netdevs: policy,
        ..TopoParams::default()
    };
    System::from_xml_text(
        include_str!("fixtures/synthetic/dgx8x16.xml"),
        "dgx8x16.xml",
        params,
    )
    .unwrap()
}

/// The NETs GPU `g` uses on channels 0..8.
fn nets(sys: &System, g: usize) -> Vec<usize> {
    (0..8).map(|c| sys.local_net(g, c).unwrap()).collect()
}

#[test]
fn nets_per_gpu_follow_the_policy() {
    // Four equally close NICs shared by two GPUs: AUTO gives each GPU two (its index,
    // bit-mirrored over 4, picks which), ALL all four, MAX:1 one.
    assert_eq!(nets(&dgx(NetDevsPolicy::Auto), 0), [0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(nets(&dgx(NetDevsPolicy::Auto), 1), [2, 3, 2, 3, 2, 3, 2, 3]);
    assert_eq!(nets(&dgx(NetDevsPolicy::All), 0), [0, 1, 2, 3, 0, 1, 2, 3]);
    assert_eq!(nets(&dgx(NetDevsPolicy::All), 1), [2, 3, 0, 1, 2, 3, 0, 1]);
    assert_eq!(nets(&dgx(NetDevsPolicy::Max(1)), 0), [0; 8]);
    assert_eq!(nets(&dgx(NetDevsPolicy::Max(1)), 1), [2; 8]);
    assert_eq!(
        nets(&dgx(NetDevsPolicy::Max(3)), 0),
        [0, 1, 2, 0, 1, 2, 0, 1]
    );
}

#[test]
fn the_policy_changes_the_nics_channels_use_across_nodes() {
    let ranks: Vec<Vec<usize>> = vec![(0..8).collect(), (8..16).collect()];
    let used = |policy| {
        let sys = dgx(policy);
        let ch = search_and_connect(&sys, &ranks, &PlanParams::default()).unwrap();
        let mut n: Vec<u64> = (0..ch.ring.n_channels).map(|c| ch.ring.nets(c).0).collect();
        n.sort_unstable();
        n.dedup();
        (ch.ring.n_channels, n.len(), sys.count(NodeType::Net))
    };
    let (auto_ch, auto_nets, total) = used(NetDevsPolicy::Auto);
    assert_eq!(total, 16);
    assert_eq!(
        auto_nets, 16,
        "AUTO: every NIC carries a channel ({auto_ch} channels)"
    );
    let (_, max1_nets, _) = used(NetDevsPolicy::Max(1));
    assert_eq!(max1_nets, 8, "MAX:1: one NIC per GPU");
}

/// NIC fusion (`NCCL_NET_MERGE_LEVEL`, default PORT): the two ports (PCI functions .0 and .1) of
/// a dual-port InfiniBand NIC become one virtual device with their speeds summed, numbered after
/// the physical ones; LOC fuses nothing, PHB fuses every NIC under the CPU.
#[test]
fn dual_port_nics_fuse_as_the_merge_level_says() {
    let skeleton = r#"<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:12:00.0" class="0x020700" vendor="0x15b3" device="0x101b" link_speed="16.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:12:00.1" class="0x020700" vendor="0x15b3" device="0x101b" link_speed="16.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="0000:20:00.0" class="0x020700" vendor="0x15b3" device="0x101b" link_speed="16.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>
"#;
    let nets = |level: &str| {
        let cfg = rnccl::config::Config::load(&rnccl::config::LoadOptions {
            env: Some([("NCCL_NET_MERGE_LEVEL".to_string(), level.to_string())].into()),
            home: Some("/nonexistent".into()),
            system_conf: Some("/nonexistent/nccl.conf".into()),
            ..Default::default()
        })
        .unwrap();
        let params = TopoParams::from_config(&cfg).unwrap();
        let sys = System::from_xml_text(skeleton, "dual.xml", params).unwrap();
        sys.nodes(NodeType::Net)
            .iter()
            .filter_map(|n| n.net())
            .map(|x| format!("{}:{}:{}", x.dev, x.name, x.bw * 8.0))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(nets("PORT"), "3:mlx5_0+mlx5_1:400 2:mlx5_2:200");
    assert_eq!(nets("LOC"), "0:mlx5_0:200 1:mlx5_1:200 2:mlx5_2:200");
    assert_eq!(nets("PHB"), "3:mlx5_0+mlx5_1+mlx5_2:600");
}
