//! The topology model against NCCL's own dumps from a 2×H200 NVSwitch host (NCCL 2.28.9):
//! topology XML round trips, the INFO GRAPH system print, paths.

use rnccl::topo::info::system_lines;
use rnccl::topo::{NodeType, PathType, System};

const TOPO: &str = include_str!("fixtures/anchors/h200x2/topo.xml");
const SKELETON_DUMP: &str = include_str!("fixtures/anchors/h200x2/topo_skeleton.xml");
const LOG: &str = include_str!("fixtures/anchors/h200x2/debug_info.log");
const LOG_2NODE: &str = include_str!("fixtures/anchors/h200x2/2node.log");

/// The INFO lines one thread printed, without the `host:pid:tid [dev] NCCL INFO ` prefix.
fn info_lines<'a>(log: &'a str, thread: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| l.starts_with(thread))
        .filter_map(|l| l.split_once(" NCCL INFO ").map(|(_, m)| m))
        .collect()
}

fn block<'a>(lines: &[&'a str], first: &str, last_prefix: &str) -> Vec<&'a str> {
    let s = lines
        .iter()
        .position(|l| l.starts_with(first))
        .expect("block start");
    let e = s + lines[s..]
        .iter()
        .position(|l| l.starts_with(last_prefix))
        .expect("block end");
    lines[s..=e].to_vec()
}

#[test]
fn nccl_dumps_round_trip_byte_for_byte() {
    for text in [TOPO, SKELETON_DUMP] {
        let sys = System::from_xml_str(text).unwrap();
        assert_eq!(sys.to_xml_string(), text);
    }
}

#[test]
fn info_graph_print_matches_nccl_single_node() {
    let sys = System::from_xml_str(TOPO).unwrap();
    let want = block(
        &info_lines(LOG, "vm:1372:1383 [0]"),
        "=== System",
        "NET/0-0 :",
    );
    assert_eq!(system_lines(&sys, false), want);
}

#[test]
fn info_graph_print_matches_nccl_two_nodes() {
    let sys = System::from_xml_str(include_str!("fixtures/anchors/h200x2/topo_2node.xml")).unwrap();
    let want = block(
        &info_lines(LOG_2NODE, "vm:890:890 [0]"),
        "=== System",
        "NET/0-0 :",
    );
    assert_eq!(system_lines(&sys, true), want);
}

#[test]
fn paths_between_gpus_and_nic() {
    let sys = System::from_xml_str(TOPO).unwrap();
    let g0 = rnccl::topo::NodeRef::new(NodeType::Gpu, 0);
    let g1 = rnccl::topo::NodeRef::new(NodeType::Gpu, 1);
    let n0 = rnccl::topo::NodeRef::new(NodeType::Net, 0);
    let p = sys.path(g0, g1).unwrap();
    assert_eq!((p.ty, p.hops()), (PathType::Nvl, 2));
    assert!((p.bw - 370.8).abs() < 1e-3, "{}", p.bw);
    let p = sys.path(g0, n0).unwrap();
    assert_eq!((p.ty, p.hops(), p.bw), (PathType::Phb, 3, 1.25));
}
