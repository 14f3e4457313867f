//! Channel search, connection and INFO lines against NCCL 2.28.9's own dumps and logs on a
//! 2×H200 NVSwitch host: one node (2 ranks), and two "nodes" of one GPU each (NCCL_HOSTID set
//! per rank, joined over the network).

use rnccl::graph::info::{channel_lines, graph_lines, ring_lines, tree_lines, trees_line};
use rnccl::graph::xml::graphs_xml;
use rnccl::graph::{Channels, PlanParams, plan_channels, search_and_connect};
use rnccl::topo::System;

const TOPO: &str = include_str!("fixtures/anchors/h200x2/topo.xml");
const GRAPH: &str = include_str!("fixtures/anchors/h200x2/graph.xml");
const LOG: &str = include_str!("fixtures/anchors/h200x2/debug_info.log");
const TOPO_2NODE: &str = include_str!("fixtures/anchors/h200x2/topo_2node.xml");
const GRAPH_2NODE: &str = include_str!("fixtures/anchors/h200x2/graph_2node.xml");
const LOG_2NODE: &str = include_str!("fixtures/anchors/h200x2/2node.log");
const TOPO_SKELETON: &str = include_str!("fixtures/anchors/h200x2/topo_skeleton.xml");
const GRAPH_SKELETON: &str = include_str!("fixtures/anchors/h200x2/graph_skeleton.xml");

/// INFO messages printed by threads whose `host:pid:tid [dev]` prefix starts with `thread`.
fn info<'a>(log: &'a str, thread: &str, starts: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|l| l.starts_with(thread))
        .filter_map(|l| l.split_once(" NCCL INFO ").map(|(_, m)| m))
        .filter(|m| starts.iter().any(|s| m.starts_with(s)))
        .collect()
}

fn channels(topo: &str, nodes: &[Vec<usize>]) -> (System, Channels) {
    let sys = System::from_xml_str(topo).unwrap();
    let ch = search_and_connect(&sys, nodes, &PlanParams::default()).unwrap();
    (sys, ch)
}

#[test]
fn single_node_graphs_match_nccls_dump() {
    let (sys, ch) = channels(TOPO, &[vec![0, 1]]);
    let (r, t) = (&ch.ring, &ch.tree);
    assert_eq!(
        (
            r.pattern.code(),
            r.n_channels,
            r.bw_intra,
            r.bw_inter,
            r.same_channels
        ),
        (4, 12, 30.0, 30.0, true)
    );
    assert_eq!(
        (r.type_intra.as_str(), r.type_inter.as_str()),
        ("NVL", "PIX")
    );
    assert!((0..12).all(|c| r.channel(c) == [0, 1]));
    assert_eq!(
        (
            t.pattern.code(),
            t.n_channels,
            t.bw_intra,
            t.bw_inter,
            t.same_channels
        ),
        (1, 12, 60.0, 60.0, false)
    );
    assert!((0..6).all(|c| t.channel(c) == [0, 1]) && (6..12).all(|c| t.channel(c) == [1, 0]));
    assert_eq!(graphs_xml(&sys, r, t, false), GRAPH);
    let mut lines = graph_lines(&sys, r, false);
    lines.extend(graph_lines(&sys, t, false));
    let want: Vec<&str> = LOG
        .lines()
        .filter(|l| l.starts_with("vm:1372:1383 [0]"))
        .filter_map(|l| l.split_once(" NCCL INFO ").map(|(_, m)| m))
        .skip_while(|m| !m.starts_with("Pattern 4"))
        .take(26)
        .collect();
    assert_eq!(lines, want);
}

#[test]
fn single_node_connection_matches_nccls_info_lines() {
    let (_, ch) = channels(TOPO, &[vec![0, 1]]);
    let c = &ch.connected;
    assert_eq!(c.nchannels, 24);
    assert_eq!(
        channel_lines(c, 0),
        info(LOG, "vm:1372:1383 [0]", &["Channel ", "Channel"])
            .into_iter()
            .filter(|l| l.contains("/24 :"))
            .collect::<Vec<_>>()
    );
    for (rank, thread) in [(0, "vm:1372:1383 [0]"), (1, "vm:1372:1384 [1]")] {
        assert_eq!(
            tree_lines(c, rank),
            info(LOG, thread, &["Tree "]),
            "rank {rank}"
        );
        assert_eq!(
            vec![trees_line(c, rank)],
            info(LOG, thread, &["Trees "]),
            "rank {rank}"
        );
    }
    let ring0: Vec<&str> = info(LOG, "vm:1372:1383 [0]", &["Ring "]);
    let ring1: Vec<&str> = info(LOG, "vm:1372:1384 [1]", &["Ring "]);
    assert_eq!(ring_lines(c, 0), ring0);
    assert_eq!(ring_lines(c, 1), ring1);
}

#[test]
fn skeleton_merged_by_nccl_gives_the_same_graphs() {
    let (sys, ch) = channels(TOPO_SKELETON, &[vec![0, 1]]);
    assert_eq!(graphs_xml(&sys, &ch.ring, &ch.tree, false), GRAPH_SKELETON);
}

#[test]
fn two_nodes_over_the_network_match_nccls_dump_and_lines() {
    let (sys, ch) = channels(TOPO_2NODE, &[vec![0], vec![1]]);
    assert_eq!(graphs_xml(&sys, &ch.ring, &ch.tree, true), GRAPH_2NODE);
    let mut lines = graph_lines(&sys, &ch.ring, true);
    lines.extend(graph_lines(&sys, &ch.tree, true));
    assert_eq!(
        lines,
        info(LOG_2NODE, "vm:890:890 [0]", &["Pattern", " 0 :"])
    );
    let c = &ch.connected;
    assert_eq!(
        channel_lines(c, 0),
        info(LOG_2NODE, "vm:890:890 [0]", &["Channel 0"])
            .into_iter()
            .filter(|l| l.contains("/02 :"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        tree_lines(c, 0),
        info(LOG_2NODE, "vm:890:890 [0]", &["Tree "])
    );
    assert_eq!(
        vec![trees_line(c, 0)],
        info(LOG_2NODE, "vm:890:890 [0]", &["Trees "])
    );
    assert_eq!(
        vec![trees_line(c, 1)],
        info(LOG_2NODE, "vm:891:891 [1]", &["Trees "])
    );
    assert_eq!(
        ring_lines(c, 0),
        info(LOG_2NODE, "vm:890:890 [0]", &["Ring "])
    );
}

#[test]
fn plan_for_the_engine() {
    let sys = System::from_xml_str(TOPO).unwrap();
    let p = plan_channels(&sys, &[vec![0, 1]], 0, 64).unwrap();
    assert_eq!(p.nchannels, 24);
    assert!(p.rings.iter().all(|r| r == &[0, 1]));
    assert_eq!(p.trees[0][0].down, vec![1]);
    assert_eq!(p.trees[6][1].down, vec![0]);
    let p = plan_channels(&sys, &[vec![0, 1]], 0, 4).unwrap();
    assert_eq!((p.nchannels, p.rings.len(), p.trees.len()), (4, 4, 4));
    let p = plan_channels(&sys, &[vec![0, 1]], 40, 64).unwrap();
    assert_eq!(p.nchannels, 40);
    assert_eq!(p.trees[30], p.trees[6]);
    assert!(plan_channels(&sys, &[vec![0, 1, 2]], 0, 64).is_none());
    let p = plan_channels(&sys, &[vec![2, 3], vec![0, 1]], 0, 64).unwrap();
    assert_eq!(p.rings[0].len(), 4);
    assert_eq!(p.rings[0][0], 0);
}
