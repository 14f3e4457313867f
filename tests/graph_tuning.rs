//! NCCL's tuning model against the INFO TUNING tables NCCL 2.28.9 printed on the 2×H200 host
//! (one node of two ranks; two one-GPU nodes over the network), and its algorithm choices.

use rnccl::Func;
use rnccl::graph::tuning::table::{thresholds_line, tuning_lines};
use rnccl::graph::tuning::{LL, Model, RING, SIMPLE, TREE, TuneInput, TuneParams};
use rnccl::graph::{PlanParams, search_and_connect};
use rnccl::topo::System;

fn model(topo: &str, nodes: &[Vec<usize>]) -> Model {
    let sys = System::from_xml_str(topo).unwrap();
    let ch = search_and_connect(&sys, nodes, &PlanParams::default()).unwrap();
    let input = TuneInput::new(&sys, &ch);
    Model::new(&input, &TuneParams::defaults())
}

fn table<'a>(log: &'a str, thread: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| l.starts_with(thread))
        .filter_map(|l| l.split_once(" NCCL INFO ").map(|(_, m)| m))
        .skip_while(|m| !m.starts_with("  Algorithm"))
        .take(24)
        .collect()
}

fn threshold<'a>(log: &'a str, thread: &str) -> &'a str {
    log.lines()
        .filter(|l| l.starts_with(thread))
        .filter_map(|l| l.split_once(" NCCL INFO ").map(|(_, m)| m))
        .find(|m| m.starts_with("threadThresholds"))
        .unwrap()
}

#[test]
fn one_node_table_matches_nccl() {
    let log = include_str!("fixtures/anchors/h200x2/debug_info.log");
    let m = model(
        include_str!("fixtures/anchors/h200x2/topo.xml"),
        &[vec![0, 1]],
    );
    assert_eq!(tuning_lines(&m), table(log, "vm:1372:1383 [0]"));
    assert_eq!(thresholds_line(&m), threshold(log, "vm:1372:1383 [0]"));
    let c = m.choose(Func::AllReduce, 8).unwrap();
    assert_eq!(
        (c.algo, c.proto, c.nchannels, c.nthreads),
        (RING, LL, 1, 96)
    );
    let c = m.choose(Func::AllReduce, 1 << 30).unwrap();
    assert_eq!((c.algo, c.proto, c.nchannels), (RING, SIMPLE, 24));
}

#[test]
fn two_node_table_matches_nccl() {
    let log = include_str!("fixtures/anchors/h200x2/2node.log");
    let m = model(
        include_str!("fixtures/anchors/h200x2/topo_2node.xml"),
        &[vec![0], vec![1]],
    );
    assert_eq!(tuning_lines(&m), table(log, "vm:890:890 [0]"));
    assert_eq!(thresholds_line(&m), threshold(log, "vm:890:890 [0]"));
    let c = m.choose(Func::AllReduce, 4_194_304).unwrap();
    assert_eq!((c.algo, c.proto, c.nchannels), (RING, SIMPLE, 2));
    assert!(
        m.time(Func::AllReduce, TREE, 1, 1 << 20).is_none(),
        "LL128 is off over PHB"
    );
}

#[test]
fn user_algo_and_proto_knobs_restrict_the_choice() {
    let mut p = TuneParams::defaults();
    p.algo = Some(
        rnccl::config::syntax::AlgoProtoList::parse("Tree", &rnccl::config::syntax::ALGORITHMS)
            .unwrap(),
    );
    let sys = System::from_xml_str(include_str!("fixtures/anchors/h200x2/topo.xml")).unwrap();
    let ch = search_and_connect(&sys, &[vec![0, 1]], &PlanParams::default()).unwrap();
    let input = TuneInput::new(&sys, &ch);
    assert_eq!(
        (
            input.nranks,
            input.nnodes,
            input.nchannels,
            input.cc,
            input.nvs_count
        ),
        (2, 1, 24, (90, 90), 1)
    );
    let m = Model::new(&input, &p);
    assert_eq!(m.choose(Func::AllReduce, 1 << 20).unwrap().algo, TREE);
    assert!(
        m.choose(Func::Broadcast, 1 << 20).is_none(),
        "broadcast has only ring"
    );
}
