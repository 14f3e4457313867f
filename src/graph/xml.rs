//! NCCL's graph XML (`NCCL_GRAPH_DUMP_FILE`; NCCL 2.28 src/graph/search.cc
//! `ncclTopoGetXmlFromGraphs`; internals §3.6), written with NCCL's number formats: integers as
//! `%d`, bandwidths and latency as `%g`, device ids as `%#lx` (a GPU's `dev` carries its host
//! index in the top byte, `NCCL_TOPO_ID(systemId, dev)`); and the dump itself
//! ([`write_graph_dump`]), for the engine and `rnccl rings` alike.

use std::path::PathBuf;

use super::Channels;
use super::types::{Graph, Pattern};
use crate::config::Config;
use crate::topo::system::build::topo_id;
use crate::topo::xml::{XmlDoc, write};
use crate::topo::{NodeType, PathType, System, TopoError};

/// C's `%g`: 6 significant digits, trailing zeros dropped, exponent form below 1e-4 or from 1e6.
pub fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let sci = format!("{v:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        trim(&format!("{:.*}", (5 - exp) as usize, v))
    }
}

/// C's `%#lx`: `0` for zero, else `0x` and lower-case hex.
fn fmt_hex(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// The `typeintra`/`typeinter` name NCCL writes (its table has no C2C; rnccl writes the name).
fn type_name(t: PathType) -> &'static str {
    t.as_str()
}

fn add_graph(doc: &mut XmlDoc, parent: usize, sys: &System, g: &Graph, inter: bool) {
    let x = doc.add(Some(parent), "graph", 0);
    let attrs = [
        ("id", g.id.to_string()),
        ("pattern", g.pattern.code().to_string()),
        ("crossnic", g.cross_nic.to_string()),
        ("nchannels", g.n_channels.to_string()),
        ("speedintra", fmt_g(f64::from(g.bw_intra))),
        ("speedinter", fmt_g(f64::from(g.bw_inter))),
        ("latencyinter", fmt_g(f64::from(g.latency_inter))),
        ("typeintra", type_name(g.type_intra).to_string()),
        ("typeinter", type_name(g.type_inter).to_string()),
        ("samechannels", u8::from(g.same_channels).to_string()),
    ];
    for (k, v) in attrs {
        doc.set_attr(x, k, &v);
    }
    let gpus = sys.nodes(NodeType::Gpu);
    for c in 0..g.n_channels {
        let ch = doc.add(Some(x), "channel", 0);
        let (net_in, net_out) = g.nets(c);
        if inter {
            let n = doc.add(Some(ch), "net", 0);
            doc.set_attr(n, "dev", &fmt_hex(net_in));
        }
        for &rank in g.channel(c) {
            let dev = gpus
                .iter()
                .find_map(|n| {
                    n.gpu()
                        .filter(|x| x.rank == rank)
                        .map(|x| topo_id(n.host(), x.dev as u64))
                })
                .unwrap_or(rank as u64);
            let n = doc.add(Some(ch), "gpu", 0);
            doc.set_attr(n, "dev", &fmt_hex(dev));
            if g.pattern == Pattern::Nvls {
                break;
            }
        }
        if inter {
            let n = doc.add(Some(ch), "net", 0);
            doc.set_attr(n, "dev", &fmt_hex(net_out));
        }
    }
}

/// The graphs file NCCL dumps: ring (id 0), tree (1), then the three graphs rnccl does not
/// search — collnet direct (4, pattern 6), collnet chain (2, pattern 3), NVLS (3, pattern 5) —
/// empty, as NCCL writes them when CollNet and NVLS are off.
pub fn graphs_xml(sys: &System, ring: &Graph, tree: &Graph, inter: bool) -> String {
    let mut doc = XmlDoc::new("graphs");
    let root = doc.add(None, "graphs", 0);
    doc.set_attr(root, "version", "1");
    let ngpus = sys.count(NodeType::Gpu);
    add_graph(&mut doc, root, sys, ring, inter);
    add_graph(&mut doc, root, sys, tree, inter);
    for (id, p) in [
        (4, Pattern::CollnetDirect),
        (2, Pattern::Tree),
        (3, Pattern::Nvls),
    ] {
        add_graph(&mut doc, root, sys, &Graph::new(id, p, ngpus, 0, 0), inter);
    }
    write::to_string(&doc)
}

/// Writes the graphs of `channels` (searched on `system`) to `NCCL_GRAPH_DUMP_FILE` in NCCL's
/// format, as NCCL does once it has built its channels (src/init.cc): only on the rank named by
/// `NCCL_GRAPH_DUMP_FILE_RANK` (default 0). Returns the file written, `None` when the knob is
/// unset or `rank` is not the dumping rank.
///
/// Errors: [`TopoError::Config`] for a bad `NCCL_GRAPH_DUMP_FILE_RANK`; [`TopoError::Io`] when the
/// file cannot be written.
pub fn write_graph_dump(
    cfg: &Config,
    rank: usize,
    system: &System,
    channels: &Channels,
) -> Result<Option<PathBuf>, TopoError> {
    let Some(path) = cfg.text("NCCL_GRAPH_DUMP_FILE")? else {
        return Ok(None);
    };
    if usize::try_from(cfg.int("NCCL_GRAPH_DUMP_FILE_RANK")?).ok() != Some(rank) {
        return Ok(None);
    }
    let path = PathBuf::from(path);
    let text = graphs_xml(system, &channels.ring, &channels.tree, channels.inter);
    std::fs::write(&path, text).map_err(|error| TopoError::Io {
        action: "write",
        path: path.clone(),
        error,
    })?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g_like_c() {
        for (v, s) in [
            (30.0, "30"),
            (1.2f32 as f64, "1.2"),
            (2.4f32 as f64, "2.4"),
            (0.1, "0.1"),
            (0.0, "0"),
            (45.1f32 as f64, "45.1"),
            (370.8f32 as f64, "370.8"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.00001, "1e-05"),
            (0.5, "0.5"),
        ] {
            assert_eq!(fmt_g(v), s, "{v}");
        }
        assert_eq!(fmt_hex(0), "0");
        assert_eq!(fmt_hex(1), "0x1");
    }

    #[test]
    fn dump_file_is_written_by_the_dumping_rank_only() {
        let sys =
            System::from_xml_str(include_str!("../../tests/fixtures/anchors/h200x2/topo.xml"))
                .unwrap();
        let ch =
            crate::graph::search_and_connect(&sys, &[vec![0, 1]], &Default::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("graph.xml");
        let mut cfg = Config::defaults();
        assert_eq!(write_graph_dump(&cfg, 0, &sys, &ch).unwrap(), None);
        cfg.set(
            "NCCL_GRAPH_DUMP_FILE",
            file.to_str().unwrap(),
            crate::config::Source::Env,
        );
        assert_eq!(write_graph_dump(&cfg, 1, &sys, &ch).unwrap(), None);
        assert_eq!(
            write_graph_dump(&cfg, 0, &sys, &ch).unwrap(),
            Some(file.clone())
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, graphs_xml(&sys, &ch.ring, &ch.tree, ch.inter));
        cfg.set("NCCL_GRAPH_DUMP_FILE_RANK", "1", crate::config::Source::Env);
        assert!(write_graph_dump(&cfg, 1, &sys, &ch).unwrap().is_some());
        cfg.set(
            "NCCL_GRAPH_DUMP_FILE",
            "/nonexistent-dir/g.xml",
            crate::config::Source::Env,
        );
        let e = write_graph_dump(&cfg, 1, &sys, &ch)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent-dir/g.xml"), "{e}");
    }
}
