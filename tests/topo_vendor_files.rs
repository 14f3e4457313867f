//! Topology files as clouds publish them (tests/fixtures/vendor/, with their licences): what
//! NCCL builds from each on the instance type it describes, read offline with the host facts
//! the file leaves out assumed or guessed from its PCI ids, classes and link speeds — the
//! system (GPUs, NVLink fabric, network devices, CPUs) and the channels NCCL's search finds for
//! one node and for two. Azure's NC A100 v4 graph file is compared with the search field by
//! field, and used instead of it as `NCCL_GRAPH_FILE` would be.

use rnccl::graph::file::GraphFile;
use rnccl::graph::{Channels, PlanParams, search_and_connect, search_or_load};
use rnccl::topo::assume::Assumptions;
use rnccl::topo::{NodeType, NoteKind, PathType, System, TopoParams};

fn vendor(path: &str, assume: &[&str]) -> System {
    let full = format!(
        "{}/tests/fixtures/vendor/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    System::from_file_assuming(
        std::path::Path::new(&full),
        TopoParams::default(),
        &Assumptions::parse(assume).unwrap(),
    )
    .unwrap()
}

/// `ngpus sm NVS? | net name speed(Gb/s) gdr, ... | cpu arch/vendor/model codes`.
fn summary(sys: &System) -> String {
    let gpus = sys.nodes(NodeType::Gpu);
    let nets: Vec<String> = sys
        .nodes(NodeType::Net)
        .iter()
        .filter_map(|n| n.net())
        .map(|x| {
            format!(
                "{} {}{}",
                x.name,
                x.bw * 8.0,
                if x.gdr { " gdr" } else { "" }
            )
        })
        .collect();
    let (arch, vendor, model) = sys.cpu_type();
    format!(
        "{} GPUs sm {}{} | {} | {} CPUs {}/{}/{}",
        gpus.len(),
        gpus[0].gpu().unwrap().sm,
        if sys.count(NodeType::Nvs) > 0 {
            " NVSwitch"
        } else {
            ""
        },
        nets.join(", "),
        sys.count(NodeType::Cpu),
        arch as u32,
        vendor as u32,
        model.code()
    )
}

fn plan(sys: &System, nodes: usize) -> Channels {
    let n = sys.count(NodeType::Gpu);
    let ranks: Vec<Vec<usize>> = (0..nodes).map(|k| (k * n..(k + 1) * n).collect()).collect();
    search_and_connect(sys, &ranks, &PlanParams::default()).unwrap()
}

/// `ring C x BW type/type, tree C x BW, channels N` and the first channel's order.
fn channels(ch: &Channels) -> String {
    format!(
        "ring {} x {} {}/{}, tree pattern {} {} x {}/{}, {} channels; ring 0: {:?} in/out {:?}",
        ch.ring.n_channels,
        ch.ring.bw_intra,
        ch.ring.type_intra.as_str(),
        ch.ring.type_inter.as_str(),
        ch.tree.pattern.code(),
        ch.tree.n_channels,
        ch.tree.bw_intra,
        ch.tree.bw_inter,
        ch.connected.nchannels,
        ch.ring.channel(0),
        ch.ring.nets(0)
    )
}

fn assumed(sys: &System) -> Vec<&str> {
    sys.notes
        .iter()
        .filter(|n| n.kind == NoteKind::Assumed)
        .map(|n| n.message.as_str())
        .collect()
}

#[test]
fn azure_nd_h100_v5_skeleton() {
    let sys = vendor("azure/ndv5-topo.xml", &[]);
    assert_eq!(
        summary(&sys),
        "8 GPUs sm 90 NVSwitch | mlx5_0 400 gdr, mlx5_1 400 gdr, mlx5_2 400 gdr, mlx5_3 400 gdr, mlx5_4 400 gdr, mlx5_5 400 gdr, mlx5_6 400 gdr, mlx5_7 400 gdr | 2 CPUs 1/1/3"
    );
    let a = assumed(&sys);
    assert_eq!(a.len(), 2, "{a:#?}");
    assert!(
        a[0].starts_with("GPU: H100 SXM5 (sm 90, 18 NVLinks to NVSwitches")
            && a[0].contains("guessed from the PCIe link speed 32.0 GT/s PCIe")
    );
    assert!(
        a[1].starts_with("NIC: ConnectX-7 (NDR) at 400 Gb/s") && a[1].contains("class 0x020700")
    );
    assert_eq!(
        channels(&plan(&sys, 1)),
        "ring 12 x 30 NVL/PIX, tree pattern 1 12 x 30/30, 24 channels; ring 0: [0, 1, 2, 3, 4, 5, 6, 7] in/out (0, 0)"
    );
    assert_eq!(
        channels(&plan(&sys, 2)),
        "ring 8 x 48 NVL/PIX, tree pattern 3 8 x 48/48, 16 channels; ring 0: [0, 7, 6, 5, 4, 3, 2, 1] in/out (0, 1)"
    );
    // Every GPU reaches its own NIC through its PCIe switch, the others through NVLink (PXN).
    let g0 = rnccl::topo::NodeRef::new(NodeType::Gpu, 0);
    let n0 = rnccl::topo::NodeRef::new(NodeType::Net, 0);
    let n1 = rnccl::topo::NodeRef::new(NodeType::Net, 1);
    assert_eq!(sys.path(g0, n0).unwrap().ty, PathType::Pix);
    assert_eq!(sys.path(g0, n1).unwrap().ty, PathType::Pxn);
}

#[test]
fn azure_nd_a100_v4_skeleton() {
    let sys = vendor("azure/ndv4-topo.xml", &[]);
    assert_eq!(
        summary(&sys),
        "8 GPUs sm 80 NVSwitch | mlx5_2 200 gdr, mlx5_3 200 gdr, mlx5_0 200 gdr, mlx5_1 200 gdr, mlx5_6 200 gdr, mlx5_7 200 gdr, mlx5_4 200 gdr, mlx5_5 200 gdr | 4 CPUs 1/2/0"
    );
    assert_eq!(
        channels(&plan(&sys, 2)),
        "ring 8 x 24 NVL/PIX, tree pattern 1 8 x 30/24, 16 channels; ring 0: [2, 5, 4, 7, 6, 1, 0, 3] in/out (2, 2)"
    );
}

#[test]
fn azure_nd_v2_with_stated_assumptions() {
    let sys = vendor("azure/ndv2-topo.xml", &["gpu=v100-sxm", "nic=cx5"]);
    assert_eq!(
        summary(&sys),
        "8 GPUs sm 70 | mlx5_0 100 gdr | 2 CPUs 1/1/2"
    );
    let a = assumed(&sys);
    assert!(
        a[0].contains("V100 SXM2 (sm 70, no NVLink") && a[0].contains("stated with --assume gpu")
    );
    assert_eq!(
        channels(&plan(&sys, 2)),
        "ring 1 x 10 SYS/SYS, tree pattern 1 1 x 10/10, 2 channels; ring 0: [0, 1, 2, 3, 4, 5, 6, 7] in/out (0, 0)"
    );
}

#[test]
fn aws_p4d_and_p4de_models_from_pci_ids() {
    for (file, id) in [
        ("aws/p4d-24xl-topo.xml", "10de:20b0"),
        ("aws/p4de-24xl-topo.xml", "10de:20b2"),
    ] {
        let sys = vendor(file, &[]);
        assert_eq!(
            summary(&sys),
            "8 GPUs sm 80 NVSwitch | rdmap16s27 100 gdr, rdmap32s27 100 gdr, rdmap144s27 100 gdr, rdmap160s27 100 gdr | 2 CPUs 1/1/2",
            "{file}"
        );
        let a = assumed(&sys);
        assert!(a[0].contains(&format!("from the PCI id {id}")), "{a:#?}");
        assert!(
            a[1].starts_with("NIC: AWS EFA at 100 Gb/s through NCCL's OFI plugin")
                && a[1].contains("PCI id 1d0f:efa0")
        );
        assert_eq!(
            channels(&plan(&sys, 2)),
            "ring 4 x 12 NVL/PIX, tree pattern 1 4 x 24/12, 8 channels; ring 0: [0, 7, 6, 5, 4, 3, 2, 1] in/out (0, 0)",
            "{file}"
        );
    }
}

#[test]
fn aws_p5_is_complete_but_leaves_nvlinks_to_the_host() {
    let sys = vendor("aws/p5.48xl-topo.xml", &[]);
    assert!(assumed(&sys).is_empty(), "a complete file is read as it is");
    assert!(
        sys.notes.iter().any(|n| n
            .message
            .contains("8 GPU(s) have a <gpu> element without <nvlink>")),
        "{:#?}",
        sys.notes
    );
    assert_eq!(sys.count(NodeType::Nvs), 0);
    assert_eq!(
        channels(&plan(&sys, 2)),
        "ring 2 x 12 PHB/PHB, tree pattern 3 2 x 12/12, 4 channels; ring 0: [0, 1, 2, 3, 4, 5, 6, 7] in/out (0, 0)"
    );
    let sys = vendor("aws/p5.48xl-topo.xml", &["gpu=h100-sxm"]);
    assert_eq!(sys.count(NodeType::Net), 32);
    assert_eq!(
        sys.count(NodeType::Nvs),
        1,
        "stated: NVLinks to the NVSwitches"
    );
    assert_eq!(
        channels(&plan(&sys, 2)),
        "ring 32 x 12 NVL/PIX, tree pattern 3 32 x 12/12, 64 channels; ring 0: [0, 7, 6, 5, 4, 3, 2, 1] in/out (0, 6)"
    );
}

#[test]
fn aws_g5_names_only_pci_switches() {
    let full = format!(
        "{}/tests/fixtures/vendor/aws/g5.48xl-topo.xml",
        env!("CARGO_MANIFEST_DIR")
    );
    let e = System::from_file(std::path::Path::new(&full), TopoParams::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("names no GPU") && e.contains("--sysfs-root"),
        "{e}"
    );
}

/// The graphs Azure ships for NC A100 v4 against NCCL's search on its topology, field by field
/// (one node: the graph file has no NETs), then the file used as `NCCL_GRAPH_FILE`.
#[test]
fn azure_nc_a100_v4_graph_file_against_the_search() {
    let sys = vendor("azure/ncv4-topo.xml", &[]);
    assert_eq!(summary(&sys), "4 GPUs sm 80 | eth0 100 | 4 CPUs 1/2/0");
    let path = format!(
        "{}/tests/fixtures/vendor/azure/ncv4-graph.xml",
        env!("CARGO_MANIFEST_DIR")
    );
    let file = GraphFile::load(std::path::Path::new(&path)).unwrap();
    let searched = plan(&sys, 1);
    let ranks = vec![(0..4).collect::<Vec<usize>>()];
    let loaded = search_or_load(&sys, &ranks, &PlanParams::default(), Some(&file))
        .unwrap()
        .unwrap();
    assert_eq!(loaded.from_file, [0, 1]);
    assert!(loaded.notes.is_empty(), "{:?}", loaded.notes);
    let fields = |g: &rnccl::graph::Graph| {
        let mut v = vec![
            ("pattern", g.pattern.code().to_string()),
            ("crossnic", g.cross_nic.to_string()),
            ("nchannels", g.n_channels.to_string()),
            ("speedintra", g.bw_intra.to_string()),
            ("speedinter", g.bw_inter.to_string()),
            ("typeintra", g.type_intra.as_str().to_string()),
            ("typeinter", g.type_inter.as_str().to_string()),
            ("samechannels", u8::from(g.same_channels).to_string()),
        ];
        for c in 0..g.n_channels {
            v.push(("channel", format!("{c}: {:?}", g.channel(c))));
        }
        v
    };
    let diff = |ours: &rnccl::graph::Graph, theirs: &rnccl::graph::Graph| -> Vec<String> {
        let (a, b) = (fields(ours), fields(theirs));
        let mut out: Vec<String> = Vec::new();
        for (k, v) in &a {
            if !b.contains(&(*k, v.clone())) {
                out.push(format!("{k} search={v}"));
            }
        }
        for (k, v) in &b {
            if !a.contains(&(*k, v.clone())) {
                out.push(format!("{k} file={v}"));
            }
        }
        out
    };
    // Same pattern, cross-NIC, speeds, path types and first channel; Azure's file has more
    // channels than NCCL's search finds (its point), in varied orders.
    assert_eq!(
        diff(&searched.ring, &loaded.ring),
        [
            "nchannels search=1",
            "samechannels search=1",
            "nchannels file=2",
            "samechannels file=0",
            "channel file=1: [0, 3, 2, 1]"
        ]
    );
    assert_eq!(
        diff(&searched.tree, &loaded.tree),
        [
            "nchannels search=1",
            "samechannels search=1",
            "nchannels file=4",
            "samechannels file=0",
            "channel file=1: [1, 0, 3, 2]",
            "channel file=2: [3, 2, 1, 0]",
            "channel file=3: [2, 3, 0, 1]"
        ]
    );
    assert_eq!(loaded.connected.search_channels, 2);
    assert_eq!(loaded.connected.nchannels, 4);
    assert_eq!(loaded.rings()[1], [0, 3, 2, 1]);
}
