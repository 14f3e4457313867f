//! The text and JSON views of `rnccl rings`.

use rnccl::Func;
use rnccl::config::syntax::{ALGORITHMS, PROTOCOLS};
use rnccl::graph::info::{channel_lines, graph_lines, ring_lines, tree_lines, trees_line};
use rnccl::graph::tuning::Model;
use rnccl::graph::{ChannelPlan, Graph, Pattern};
use rnccl::topo::info::system_lines;
use rnccl::topo::{NodeType, NoteKind, System, TopoNote};
use serde::Serialize;

use super::{Planned, tune};
use crate::render::gbs;

/// Size used for "expected bandwidth": 1 GiB, large enough for every model to plateau.
const BIG: u64 = 1 << 30;

fn pattern_word(p: Pattern) -> &'static str {
    match p {
        Pattern::Ring => "ring",
        Pattern::BalancedTree => "balanced tree",
        Pattern::SplitTree => "split tree",
        Pattern::Tree => "tree",
        Pattern::Nvls => "NVLS",
        Pattern::CollnetDirect => "CollNet direct",
    }
}

fn gpu_name(sys: &System, rank: usize) -> String {
    sys.gpu_of_rank(rank)
        .and_then(|g| sys.nodes(NodeType::Gpu)[g].gpu())
        .map_or(format!("rank{rank}"), |g| format!("GPU{}", g.dev))
}

fn net_name(sys: &System, id: u64) -> String {
    sys.nodes(NodeType::Net)
        .iter()
        .find(|n| n.id == id)
        .and_then(|n| n.net())
        .map_or(format!("NET/{id:x}"), |x| {
            format!("NET{} {}", x.dev, x.name)
        })
}

fn summary(sys: &System, g: &Graph, inter: bool) -> String {
    let bw = if inter || g.pattern.is_tree() {
        format!("{}/{} GB/s intra/inter", gbs(g.bw_intra), gbs(g.bw_inter))
    } else {
        format!("{} GB/s", gbs(g.bw_intra))
    };
    let _ = sys;
    format!(
        "pattern {} ({}), {} channels x {bw}, path types {} inside the node / {} to the network, {}",
        g.pattern.code(),
        pattern_word(g.pattern),
        g.n_channels,
        g.type_intra.as_str(),
        g.type_inter.as_str(),
        if g.same_channels {
            "same GPU order on every channel"
        } else {
            "GPU order varies by channel"
        }
    )
}

/// Expected bandwidth line for `f` at 1 GiB.
fn expected(m: &Model, f: Func) -> Option<(String, f64, f64, f32, usize)> {
    let c = m.choose(f, BIG)?;
    let algbw = BIG as f64 / (f64::from(c.time_us) * 1000.0);
    Some((
        format!("{}/{}", ALGORITHMS[c.algo], PROTOCOLS[c.proto]),
        algbw,
        algbw * f.bus_factor(m.nranks),
        c.time_us,
        c.nchannels,
    ))
}

/// The text view.
pub fn lines(p: &Planned, rank: usize) -> Vec<String> {
    let sys = &p.system;
    let ch = &p.channels;
    let c = &ch.connected;
    let ngpus = sys.count(NodeType::Gpu);
    let (cc, _) = sys.comp_cap().unwrap_or((0, 0));
    let mut out = vec![
        format!("rnccl rings: {}", p.label),
        format!(
            "{} node(s) x {ngpus} GPU(s) = {} ranks; sm {cc}{}",
            p.nodes,
            c.nranks,
            if sys.count(NodeType::Nvs) > 0 {
                ", NVSwitch"
            } else {
                ""
            }
        ),
    ];
    if sys.hosts.len() > 1 {
        out.push(format!(
            "{} hosts in one NVLink domain (MNNVL): each node of the communicator is the whole clique",
            sys.hosts.len()
        ));
    }
    let assumed: Vec<&TopoNote> = sys
        .notes
        .iter()
        .filter(|n| n.kind == NoteKind::Assumed)
        .collect();
    if !assumed.is_empty() {
        out.push(
            "Assumed about the host the file describes (rnccl topo lists every filled value):"
                .into(),
        );
        out.extend(assumed.iter().map(|n| format!("  {n}")));
    }
    let searched = if ch.from_file.is_empty() {
        "NCCL's search on one node".to_string()
    } else {
        let which: Vec<&str> = ch
            .from_file
            .iter()
            .map(|&id| if id == 0 { "ring" } else { "tree" })
            .collect();
        format!(
            "NCCL's graphs on one node ({} read from {} instead of searched)",
            which.join(" and "),
            p.graph_file
                .as_deref()
                .map_or("the graph file".to_string(), |f| f.display().to_string())
        )
    };
    if !ch.notes.is_empty() {
        out.push("Reading the graph file:".into());
        out.extend(ch.notes.iter().map(|n| format!("  {n}")));
    }
    out.extend([
        String::new(),
        searched,
        format!("  ring (graph 0): {}", summary(sys, &ch.ring, ch.inter)),
        format!("  tree (graph 1): {}", summary(sys, &ch.tree, ch.inter)),
        format!(
            "  channels: {} searched, {} after NCCL doubles them and applies NCCL_MIN/MAX_NCHANNELS",
            c.search_channels, c.nchannels
        ),
        String::new(),
        format!("As NCCL_DEBUG=INFO prints them on rank {rank} (NCCL_DEBUG_SUBSYS=INIT,GRAPH)"),
    ]);
    let info: Vec<String> = system_lines(sys, ch.inter)
        .into_iter()
        .chain(graph_lines(sys, &ch.ring, ch.inter))
        .chain(graph_lines(sys, &ch.tree, ch.inter))
        .chain(tree_lines(c, rank))
        .chain(if rank == 0 {
            channel_lines(c, 0)
        } else {
            Vec::new()
        })
        .chain(ring_lines(c, rank))
        .chain(std::iter::once(trees_line(c, rank)))
        .collect();
    out.extend(info.into_iter().map(|l| format!("  {l}")));
    out.push(String::new());
    if ch.inter {
        out.push(
            "GPUs and network devices per channel on every node (ring: in, GPU order, out)".into(),
        );
        for i in 0..ch.ring.n_channels {
            let (a, b) = ch.ring.nets(i);
            let gpus: Vec<String> = ch
                .ring
                .channel(i)
                .iter()
                .map(|&r| gpu_name(sys, r))
                .collect();
            out.push(format!(
                "  ring channel {i:2}: {} -> {} -> {}",
                net_name(sys, a),
                gpus.join(" "),
                net_name(sys, b)
            ));
        }
        for i in 0..ch.tree.n_channels {
            let (a, b) = ch.tree.nets(i);
            let gpus: Vec<String> = ch
                .tree
                .channel(i)
                .iter()
                .map(|&r| gpu_name(sys, r))
                .collect();
            out.push(format!(
                "  tree channel {i:2}: {} -> {} -> {}",
                net_name(sys, a),
                gpus.join(" "),
                net_name(sys, b)
            ));
        }
    } else {
        out.push("One node: the channels stay on NVLink/PCIe; no network device is used.".into());
    }
    out.push(String::new());
    out.push(
        "Expected bandwidth (NCCL's tuning model, 1 GiB per call; busbw as nccl-tests reports it)"
            .into(),
    );
    let mut t = crate::render::Table::new([
        "collective",
        "algo/proto",
        "channels",
        "time",
        "algbw",
        "busbw",
    ]);
    for f in [
        Func::AllReduce,
        Func::AllGather,
        Func::ReduceScatter,
        Func::Broadcast,
        Func::Reduce,
    ] {
        match expected(&p.model, f) {
            Some((ap, alg, bus, time, nc)) => t.row([
                f.nccl_name().to_string(),
                ap,
                nc.to_string(),
                format!("{:.0} us", time),
                format!("{alg:.1} GB/s"),
                format!("{bus:.1} GB/s"),
            ]),
            None => t.row([f.nccl_name().to_string(), "none usable".to_string()]),
        }
    }
    out.extend(t.lines(2));
    out
}

#[derive(Serialize)]
struct GraphJson {
    id: u32,
    pattern: u32,
    cross_nic: u8,
    nchannels: usize,
    bw_intra: f32,
    bw_inter: f32,
    latency_inter: f32,
    type_intra: &'static str,
    type_inter: &'static str,
    same_channels: bool,
    channels: Vec<ChannelJson>,
}

#[derive(Serialize)]
struct ChannelJson {
    ranks: Vec<usize>,
    gpus: Vec<String>,
    net_in: Option<String>,
    net_out: Option<String>,
}

fn graph_json(sys: &System, g: &Graph, inter: bool) -> GraphJson {
    GraphJson {
        id: g.id,
        pattern: g.pattern.code(),
        cross_nic: g.cross_nic,
        nchannels: g.n_channels,
        bw_intra: g.bw_intra,
        bw_inter: g.bw_inter,
        latency_inter: g.latency_inter,
        type_intra: g.type_intra.as_str(),
        type_inter: g.type_inter.as_str(),
        same_channels: g.same_channels,
        channels: (0..g.n_channels)
            .map(|c| ChannelJson {
                ranks: g.channel(c).to_vec(),
                gpus: g.channel(c).iter().map(|&r| gpu_name(sys, r)).collect(),
                net_in: inter.then(|| net_name(sys, g.nets(c).0)),
                net_out: inter.then(|| net_name(sys, g.nets(c).1)),
            })
            .collect(),
    }
}

#[derive(Serialize)]
struct ExpectedJson {
    collective: &'static str,
    algo_proto: String,
    nchannels: usize,
    time_us: f32,
    algbw: f64,
    busbw: f64,
}

/// The JSON view.
#[derive(Serialize)]
pub struct RingsJson {
    source: String,
    nodes: usize,
    ranks: usize,
    ring: GraphJson,
    tree: GraphJson,
    plan: ChannelPlan,
    info_lines: Vec<String>,
    expected: Vec<ExpectedJson>,
    tuning: Option<tune::TuneJson>,
}

/// Builds the JSON view.
pub fn json(p: &Planned, rank: usize, tune_for: Option<Func>) -> RingsJson {
    let ch = &p.channels;
    let c = &ch.connected;
    let mut info = graph_lines(&p.system, &ch.ring, ch.inter);
    info.extend(graph_lines(&p.system, &ch.tree, ch.inter));
    info.extend(tree_lines(c, rank));
    if rank == 0 {
        info.extend(channel_lines(c, 0));
    }
    info.push(trees_line(c, rank));
    RingsJson {
        source: p.label.clone(),
        nodes: p.nodes,
        ranks: c.nranks,
        ring: graph_json(&p.system, &ch.ring, ch.inter),
        tree: graph_json(&p.system, &ch.tree, ch.inter),
        plan: ch.plan(),
        info_lines: info,
        expected: [
            Func::AllReduce,
            Func::AllGather,
            Func::ReduceScatter,
            Func::Broadcast,
            Func::Reduce,
        ]
        .into_iter()
        .filter_map(|f| {
            expected(&p.model, f).map(|(ap, algbw, busbw, time_us, nchannels)| ExpectedJson {
                collective: f.nccl_name(),
                algo_proto: ap,
                nchannels,
                time_us,
                algbw,
                busbw,
            })
        })
        .collect(),
        tuning: tune_for.map(|f| tune::json(p, f)),
    }
}
