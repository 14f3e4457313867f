//! NCCL's path types and bandwidths on hand-built topologies (tests/fixtures/synthetic/make.py):
//! PIX, PXB, PHB, SYS, NVL, NVB, PXN, P2C, and the knobs that change them.

use rnccl::topo::{NodeRef, NodeType, PathType, System, TopoParams};

fn sys(name: &str, params: TopoParams) -> System {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/synthetic")
        .join(name);
    System::from_file(&path, params).unwrap()
}

fn gpu_by_dev(s: &System, dev: i32) -> NodeRef {
    let i = s
        .nodes(NodeType::Gpu)
        .iter()
        .position(|n| n.gpu().unwrap().dev == dev)
        .unwrap();
    NodeRef::new(NodeType::Gpu, i)
}

fn net(i: usize) -> NodeRef {
    NodeRef::new(NodeType::Net, i)
}

fn ty(s: &System, a: NodeRef, b: NodeRef) -> PathType {
    s.path(a, b).unwrap().ty
}

#[test]
fn pcie_tiers_pix_pxb_phb_sys() {
    let s = sys("pcie-tiers.xml", TopoParams::default());
    let (g0, g1, g2) = (gpu_by_dev(&s, 0), gpu_by_dev(&s, 1), gpu_by_dev(&s, 2));
    assert_eq!(
        ty(&s, g1, net(0)),
        PathType::Pix,
        "GPU1 and the NIC share switch B"
    );
    assert_eq!(
        ty(&s, g0, net(0)),
        PathType::Pxb,
        "GPU0 reaches the NIC through switches A and B"
    );
    assert_eq!(ty(&s, g0, g1), PathType::Pxb);
    assert_eq!(ty(&s, g0, g2), PathType::Sys, "across the two CPUs");
    assert_eq!(ty(&s, g2, net(0)), PathType::Sys);
    let p = s.path(g1, net(0)).unwrap();
    assert_eq!(
        (p.hops(), p.bw),
        (3, 12.5),
        "GPU-switch-NIC-NET, the 100 Gb/s port is the bottleneck"
    );
    // CPU to CPU on AMD is 16 GB/s and caps the SYS path.
    assert_eq!(s.path(g0, g2).unwrap().bw, 16.0);
}

#[test]
fn p2p_level_reroutes_through_the_cpu() {
    let s = sys(
        "pcie-tiers.xml",
        TopoParams {
            p2p_level: Some(PathType::Pix),
            ..TopoParams::default()
        },
    );
    let (g0, g1) = (gpu_by_dev(&s, 0), gpu_by_dev(&s, 1));
    assert_eq!(
        ty(&s, g0, g1),
        PathType::Phb,
        "beyond NCCL_P2P_LEVEL=PIX: through the CPU"
    );
    let p = s.path(g0, g1).unwrap();
    assert!(p.links.iter().any(|l| s.link(*l).rem.ty == NodeType::Cpu));
}

#[test]
fn nvlink_through_a_gpu_is_nvb_unless_disabled() {
    let s = sys("nvb.xml", TopoParams::default());
    let (g0, g1, g2) = (gpu_by_dev(&s, 0), gpu_by_dev(&s, 1), gpu_by_dev(&s, 2));
    assert_eq!(ty(&s, g0, g1), PathType::Nvl);
    assert_eq!(
        s.path(g0, g1).unwrap().bw,
        80.0,
        "4 links x 20 GB/s on sm80"
    );
    assert_eq!(ty(&s, g0, g2), PathType::Nvb);
    assert_eq!(s.path(g0, g2).unwrap().hops(), 2);
    let s = sys(
        "nvb.xml",
        TopoParams {
            nvb_disable: true,
            ..TopoParams::default()
        },
    );
    assert_eq!(
        ty(&s, gpu_by_dev(&s, 0), gpu_by_dev(&s, 2)),
        PathType::Pix,
        "NCCL_NVB_DISABLE: back to PCIe"
    );
}

#[test]
fn nvswitch_nodes_use_pxn_to_reach_other_switches_nics() {
    let s = sys("dgx8x16.xml", TopoParams::default());
    assert_eq!(
        (
            s.count(NodeType::Gpu),
            s.count(NodeType::Net),
            s.count(NodeType::Nvs)
        ),
        (8, 16, 1)
    );
    let g0 = gpu_by_dev(&s, 0);
    assert_eq!(ty(&s, g0, gpu_by_dev(&s, 7)), PathType::Nvl);
    assert_eq!(ty(&s, g0, net(0)), PathType::Pix);
    assert_eq!(
        ty(&s, g0, net(4)),
        PathType::Pxn,
        "NIC 4 sits by GPU 2: relay over NVLink"
    );
    assert_eq!(ty(&s, net(4), g0), PathType::Phb, "PXN is only GPU->NIC");
    assert_eq!(ty(&s, g0, net(12)), PathType::Pxn, "other socket too");
    let s = sys(
        "dgx8x16.xml",
        TopoParams {
            pxn_disable: true,
            ..TopoParams::default()
        },
    );
    assert_eq!(ty(&s, gpu_by_dev(&s, 0), net(4)), PathType::Phb);
    assert_eq!(ty(&s, gpu_by_dev(&s, 0), net(12)), PathType::Sys);
}

#[test]
fn gdr_level_and_gdr_decisions() {
    let s = sys("dgx8x16.xml", TopoParams::default());
    let g0 = gpu_by_dev(&s, 0).idx;
    assert!(s.gdr(g0, 0), "same switch");
    assert!(s.gdr(g0, 4), "PXN: decided by the relay GPU's distance");
    let s = sys("pcie-tiers.xml", TopoParams::default());
    let g0 = gpu_by_dev(&s, 0).idx;
    assert!(s.gdr(g0, 0), "PXB is within the default GDR level");
    let s = sys(
        "pcie-tiers.xml",
        TopoParams {
            net_gdr_level: Some(PathType::Pix),
            ..TopoParams::default()
        },
    );
    let g0 = gpu_by_dev(&s, 0);
    assert!(!s.gdr(g0.idx, 0));
    assert_eq!(
        ty(&s, g0, net(0)),
        PathType::Phb,
        "without GDR the NIC is reached through the CPU"
    );
}

#[test]
fn c2c_gpu_reaches_the_cpus_nic_as_p2c() {
    let s = sys("c2c.xml", TopoParams::default());
    let g = gpu_by_dev(&s, 0);
    let c = NodeRef::new(NodeType::Cpu, 0);
    assert_eq!(ty(&s, g, c), PathType::C2c);
    assert!(
        (s.path(g, c).unwrap().bw - 447.12).abs() < 0.01,
        "10 links x 44712 MB/s"
    );
    assert_eq!(ty(&s, g, net(0)), PathType::P2c);
}
