//! Channels on larger systems: an 8-GPU NVSwitch node with 16 NICs searched alone and across
//! nodes, and the connection's invariants (every ring visits every rank once, every tree is a
//! tree with consistent up/down links) for many node counts.

use proptest::prelude::*;
use rnccl::graph::{ChannelBounds, ChannelPlan, PlanParams, search_and_connect};
use rnccl::topo::{NodeType, PathType, System, TopoParams};

fn dgx() -> System {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/synthetic/dgx8x16.xml");
    System::from_file(&p, TopoParams::default()).unwrap()
}

fn nodes(n: usize, g: usize) -> Vec<Vec<usize>> {
    (0..n).map(|i| (i * g..(i + 1) * g).collect()).collect()
}

fn check_plan(plan: &ChannelPlan, nranks: usize) {
    assert_eq!(plan.rings.len(), plan.nchannels);
    assert_eq!(plan.trees.len(), plan.nchannels);
    for ring in &plan.rings {
        let mut seen = vec![false; nranks];
        for &r in ring {
            assert!(!seen[r], "rank {r} twice in a ring");
            seen[r] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
    for tree in &plan.trees {
        let roots = tree.iter().filter(|t| t.up.is_none()).count();
        assert_eq!(roots, 1, "one root per channel");
        for (r, t) in tree.iter().enumerate() {
            assert!(t.down.len() <= 3);
            if let Some(u) = t.up {
                assert!(tree[u].down.contains(&r), "rank {r}'s parent {u} lists it");
            }
            for &d in &t.down {
                assert_eq!(tree[d].up, Some(r));
            }
        }
    }
}

#[test]
fn one_dgx_node() {
    let s = dgx();
    let ch = search_and_connect(&s, &nodes(1, 8), &PlanParams::default()).unwrap();
    assert_eq!(ch.ring.type_intra, PathType::Nvl);
    assert!(
        ch.ring.n_channels >= 8,
        "NVSwitch rings: {}",
        ch.ring.n_channels
    );
    assert_eq!(ch.tree.n_channels, ch.ring.n_channels);
    for c in 0..ch.ring.n_channels {
        let mut r = ch.ring.channel(c).to_vec();
        r.sort();
        assert_eq!(r, (0..8).collect::<Vec<_>>());
    }
    check_plan(&ch.plan(), 8);
}

#[test]
fn dgx_nodes_over_the_network_use_nearby_nics() {
    let s = dgx();
    let ch = search_and_connect(&s, &nodes(4, 8), &PlanParams::default()).unwrap();
    assert!(ch.ring.n_channels >= 2, "{}", ch.ring.n_channels);
    assert!(
        ch.ring.type_inter <= PathType::Pxn,
        "{:?}",
        ch.ring.type_inter
    );
    let nets = s.nodes(NodeType::Net);
    for c in 0..ch.ring.n_channels {
        let (a, b) = ch.ring.nets(c);
        assert!(nets.iter().any(|n| n.id == a) && nets.iter().any(|n| n.id == b));
    }
    let plan = ch.plan();
    check_plan(&plan, 32);
    assert!(plan.nchannels >= 2 * ch.ring.n_channels.min(ch.tree.n_channels));
}

#[test]
fn channel_bounds_clamp_and_copy() {
    let s = dgx();
    let p = PlanParams {
        bounds: ChannelBounds { min: 0, max: 3 },
        ..PlanParams::default()
    };
    let ch = search_and_connect(&s, &nodes(2, 8), &p).unwrap();
    assert_eq!(ch.plan().nchannels, 3);
    let p = PlanParams {
        bounds: ChannelBounds { min: 64, max: 64 },
        ..PlanParams::default()
    };
    let plan = search_and_connect(&s, &nodes(2, 8), &p).unwrap().plan();
    assert_eq!(plan.nchannels, 64);
    check_plan(&plan, 16);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn stitching_is_valid_for_any_node_count(n in 1usize..300) {
        let s = System::from_xml_str(include_str!("fixtures/anchors/h200x2/topo_2node.xml")).unwrap();
        let plan = search_and_connect(&s, &nodes(n, 1), &PlanParams::default()).unwrap().plan();
        check_plan(&plan, n);
        if n > 1 {
            prop_assert!(plan.rings[0].windows(2).all(|w| w[1] == (w[0] + 1) % n));
        }
    }
}
