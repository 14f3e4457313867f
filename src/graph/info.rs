//! NCCL's INFO lines about channels (NCCL 2.28 src/graph/search.cc `ncclTopoPrintGraph`,
//! src/graph/connect.cc, src/graph/rings.cc `dumpLine`, src/init.cc; internals §8.2), without
//! the `host:pid:tid [dev] NCCL INFO ` prefix.

use super::connect::{Connected, TreeLinks};
use super::types::Graph;
use crate::topo::system::LOCAL_ID_MASK;
use crate::topo::{NodeType, System};

fn signed(v: Option<usize>) -> String {
    v.map_or("-1".into(), |x| x.to_string())
}

fn down(t: &TreeLinks, i: usize) -> String {
    signed(t.down.get(i).copied())
}

/// `Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d` and one line per
/// channel: ` c : [NET/s-id] GPU/s-id ... [NET/s-id]`.
pub fn graph_lines(sys: &System, g: &Graph, inter: bool) -> Vec<String> {
    let mut out = vec![format!(
        "Pattern {}, crossNic {}, nChannels {}, bw {:.6}/{:.6}, type {}/{}, sameChannels {}",
        g.pattern.code(),
        g.cross_nic,
        g.n_channels,
        f64::from(g.bw_intra),
        f64::from(g.bw_inter),
        g.type_intra.as_str(),
        g.type_inter.as_str(),
        u8::from(g.same_channels)
    )];
    let net = |id: u64| format!(" NET/{:x}-{:x}", id >> 56, id & LOCAL_ID_MASK);
    for c in 0..g.n_channels {
        let mut line = format!("{c:2} :");
        if inter {
            line.push_str(&net(g.nets(c).0));
        }
        for &rank in g.channel(c) {
            if let Some(i) = sys.gpu_of_rank(rank) {
                line.push(' ');
                line.push_str(&sys.nodes(NodeType::Gpu)[i].label());
            }
            if g.pattern == super::Pattern::Nvls {
                break;
            }
        }
        if inter {
            line.push_str(&net(g.nets(c).1));
        }
        out.push(line);
    }
    out
}

/// `Channel %02d/%02d : r0 r1 ...` for every channel, as rank `rank` prints them (rank 0 in
/// NCCL): the ring from `rank`, numbers padded to the width of the largest rank, the line cut at
/// 127 characters with `...` as NCCL's 128-byte buffer cuts it.
pub fn channel_lines(conn: &Connected, rank: usize) -> Vec<String> {
    let width = (conn.nranks.max(1) - 1).to_string().len();
    (0..conn.nchannels)
        .map(|c| {
            let mut line = format!("Channel {c:02}/{:02} :", conn.nchannels);
            for r in conn.ring_from(c, rank) {
                if line.len() >= 127 {
                    break;
                }
                line.push_str(&format!(" {r:>width$}"));
            }
            if line.len() >= 128 {
                line.truncate(124);
                line.push_str("...");
            }
            line
        })
        .collect()
}

/// The `Tree %d : up -> rank -> d0/d1/d2` lines `rank` prints while trees are connected.
pub fn tree_lines(conn: &Connected, rank: usize) -> Vec<String> {
    conn.tree_events
        .iter()
        .filter(|e| e.rank == rank)
        .map(|e| {
            format!(
                "Tree {} : {} -> {} -> {}/{}/{}",
                e.channel,
                signed(e.links.up),
                rank,
                down(&e.links, 0),
                down(&e.links, 1),
                down(&e.links, 2)
            )
        })
        .collect()
}

/// `Ring %02d : prev -> rank -> next` for every channel.
pub fn ring_lines(conn: &Connected, rank: usize) -> Vec<String> {
    (0..conn.nchannels)
        .map(|c| {
            format!(
                "Ring {c:02} : {} -> {rank} -> {}",
                conn.ring_prev[c][rank], conn.ring_next[c][rank]
            )
        })
        .collect()
}

/// `Trees [0] d0/d1/d2->rank->up [1] ...` for all channels (NCCL cuts the line at 1023 bytes).
pub fn trees_line(conn: &Connected, rank: usize) -> String {
    let mut line = String::new();
    for c in 0..conn.nchannels {
        let t = &conn.trees[c][rank];
        line.push_str(&format!(
            " [{c}] {}/{}/{}->{rank}->{}",
            down(t, 0),
            down(t, 1),
            down(t, 2),
            signed(t.up)
        ));
    }
    line.truncate(1022);
    format!("Trees{line}")
}
