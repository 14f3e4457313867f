//! Benchmarks behind the topology acceptance numbers: parsing a 50 KB topology file (< 100 ms),
//! NCCL's search on an 8-GPU NVSwitch node with 16 NICs (< 1 s), and connecting 1024 such nodes
//! (< 1 s). Run with `cargo bench --bench topo_graph`.

use rnccl::graph::connect::connect;
use rnccl::graph::{Pattern, PlanParams, SearchParams, compute, search_and_connect};
use rnccl::topo::System;

const BIG: &str = include_str!("../tests/fixtures/synthetic/big50k.xml");
const DGX: &str = include_str!("../tests/fixtures/synthetic/dgx8x16.xml");

fn nodes(n: usize, g: usize) -> Vec<Vec<usize>> {
    (0..n).map(|i| (i * g..(i + 1) * g).collect()).collect()
}

fn main() {
    divan::main();
}

/// Parse the 55 KB file, build the graph and compute all paths.
#[divan::bench]
fn parse_50kb_topology() -> System {
    System::from_xml_str(divan::black_box(BIG)).unwrap()
}

/// Ring and tree search on one 8-GPU/16-NIC node, as for a single-node communicator.
#[divan::bench]
fn search_dgx_one_node(bencher: divan::Bencher) {
    let sys = System::from_xml_str(DGX).unwrap();
    bencher.bench(|| search_and_connect(&sys, &nodes(1, 8), &PlanParams::default()));
}

/// Ring and tree search of the same node for a multi-node communicator (through its NETs).
#[divan::bench]
fn search_dgx_inter_node(bencher: divan::Bencher) {
    let sys = System::from_xml_str(DGX).unwrap();
    bencher.bench(|| {
        let ring = compute(&sys, true, 0, Pattern::Ring, 1, 32, SearchParams::default());
        compute(
            &sys,
            true,
            1,
            Pattern::BalancedTree,
            ring.n_channels,
            ring.n_channels,
            SearchParams::default(),
        )
    });
}

/// Stitching rings and double binary trees over 1024 nodes of 8 GPUs (8192 ranks).
#[divan::bench]
fn stitch_1024_nodes(bencher: divan::Bencher) {
    let sys = System::from_xml_str(DGX).unwrap();
    let ring = compute(&sys, true, 0, Pattern::Ring, 1, 32, SearchParams::default());
    let tree = compute(
        &sys,
        true,
        1,
        Pattern::BalancedTree,
        ring.n_channels,
        ring.n_channels,
        SearchParams::default(),
    );
    let n = nodes(1024, 8);
    bencher
        .bench(|| connect(&ring, &tree, &n, 90, rnccl::graph::ChannelBounds::default()).unwrap());
}

/// The whole plan the engine asks for: search, connection and per-channel rings over 1024 nodes.
#[divan::bench(sample_count = 10)]
fn plan_1024_nodes(bencher: divan::Bencher) {
    let sys = System::from_xml_str(DGX).unwrap();
    let n = nodes(1024, 8);
    bencher.bench(|| search_and_connect(&sys, &n, &PlanParams::default()).map(|c| c.plan()));
}
