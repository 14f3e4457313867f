//! `NCCL_GRAPH_FILE`: graphs read from NCCL's graph XML instead of searched (NCCL 2.28
//! src/graph/search.cc `ncclTopoCompute`, `ncclTopoGetGraphFromXml`,
//! `ncclTopoGetGraphFromXmlSub`, `ncclTopoGetChannelFromXml`). For every graph NCCL computes
//! (ring id 0, tree id 1, ...) it reads the `<graph>` with that id, unless it was written with
//! `crossnic="1"` while `NCCL_CROSS_NIC=0`; a graph with channels replaces the search.
//!
//! NCCL's own checks are errors here as there: a missing attribute (`xmlGetAttrInt` fails), a
//! `<gpu dev>` that is no GPU of the topology ("XML Import Channel : dev %ld not found"), a
//! `<net dev>` no network device has (NCCL fails when it connects the channel). rnccl also
//! refuses what NCCL reads without a word but cannot run — a channel that does not hold every
//! GPU once, more channels than NCCL's arrays — and notes what only looks wrong (the
//! `nchannels` attribute against the channels given, paths slower than the graph's types).

use std::path::Path;

use super::types::{Graph, Pattern};
use crate::conn::MAX_CHANNELS;
use crate::topo::system::build::topo_id;
use crate::topo::xml::XmlDoc;
use crate::topo::xml::read::{Schema, parse};
use crate::topo::{NodeRef, NodeType, PathType, System, TopoError, TopoNote};

/// A graph file, parsed.
#[derive(Debug, Clone)]
pub struct GraphFile {
    doc: XmlDoc,
    /// What reading the file noticed (lines NCCL's parser would refuse, elements it skips).
    pub notes: Vec<TopoNote>,
}

/// NCCL's `kvDictLinkType` for `typeintra`/`typeinter`, prefix-matched in order; anything else
/// falls back to LOC (`kvConvertToInt`).
fn path_type(s: &str) -> (PathType, bool) {
    const NAMES: [(&str, PathType); 9] = [
        ("LOC", PathType::Loc),
        ("NVL", PathType::Nvl),
        ("NVB", PathType::Nvb),
        ("PIX", PathType::Pix),
        ("PXB", PathType::Pxb),
        ("P2C", PathType::P2c),
        ("PXN", PathType::Pxn),
        ("PHB", PathType::Phb),
        ("SYS", PathType::Sys),
    ];
    NAMES
        .iter()
        .find(|(k, _)| s.starts_with(k))
        .map_or((PathType::Loc, false), |&(_, t)| (t, true))
}

fn pattern(code: i64) -> Option<Pattern> {
    [
        Pattern::BalancedTree,
        Pattern::SplitTree,
        Pattern::Tree,
        Pattern::Ring,
        Pattern::Nvls,
        Pattern::CollnetDirect,
    ]
    .into_iter()
    .find(|p| i64::from(p.code()) == code)
}

/// C's `strtol(s, NULL, 16)`: optional sign and `0x`, hex digits up to the first other
/// character; 0 when there are none.
fn strtol16(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let end = t.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(t.len());
    let v = u64::from_str_radix(&t[..end.min(16)], 16).unwrap_or(0) as i64;
    if neg { v.wrapping_neg() } else { v }
}

/// A graph loaded from a file, with what rnccl noticed about it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The graph, as NCCL fills its `ncclTopoGraph` from the file.
    pub graph: Graph,
    /// Remarks that do not stop NCCL.
    pub notes: Vec<TopoNote>,
}

impl GraphFile {
    /// Reads `path`.
    ///
    /// Errors: [`TopoError::Io`] when it cannot be read; [`TopoError::Xml`] naming the line when
    /// it is not NCCL graph XML (`<graphs version="1">`).
    pub fn load(path: &Path) -> Result<GraphFile, TopoError> {
        let text = std::fs::read_to_string(path).map_err(|error| TopoError::Io {
            action: "read",
            path: path.to_path_buf(),
            error,
        })?;
        GraphFile::parse(&text, &path.display().to_string())
    }

    /// Parses graph XML `text` named `source` in errors.
    ///
    /// Errors: as [`GraphFile::load`] for malformed text.
    pub fn parse(text: &str, source: &str) -> Result<GraphFile, TopoError> {
        let p = parse(text, source, Schema::Graphs)?;
        Ok(GraphFile {
            doc: p.doc,
            notes: p.notes,
        })
    }

    /// The graph `id` for `sys` as NCCL's `ncclTopoGetGraphFromXml` reads it: the last
    /// `<graph id=…>` that applies (NCCL reads them all in order), skipped when it says
    /// `crossnic="1"` and `cross_nic` (`NCCL_CROSS_NIC`) is 0. `None` when no graph applies or it
    /// has no channels: NCCL then searches. `inter`: whether the communicator spans several
    /// nodes (channels then enter and leave through NETs).
    ///
    /// Errors: [`TopoError::Xml`] naming the line for what NCCL refuses (a missing `id`,
    /// `crossnic`, `pattern`, `nchannels`, `speedintra`, `speedinter`, `typeintra`,
    /// `typeinter` or `samechannels`; a `<gpu>` or `<net>` without `dev`; a GPU `dev` the
    /// topology does not have; a NET `dev` no network device has when `inter`) and for what
    /// cannot run (a pattern NCCL does not know, more than 64 channels, a channel that does not
    /// hold every GPU exactly once).
    pub fn graph(
        &self,
        sys: &System,
        id: u32,
        cross_nic: u8,
        inter: bool,
    ) -> Result<Option<Loaded>, TopoError> {
        let d = &self.doc;
        let Some(root) = d.root() else {
            return Ok(None);
        };
        let mut found = None;
        for &x in &d.node(root).children {
            let gid = int(d, x, "id")?;
            if gid != i64::from(id) {
                continue;
            }
            let crossnic = int(d, x, "crossnic")?;
            if cross_nic == 0 && crossnic == 1 {
                continue;
            }
            found = Some(self.read_graph(sys, x, id, crossnic, inter)?);
        }
        Ok(found.filter(|l| l.graph.n_channels > 0))
    }

    fn read_graph(
        &self,
        sys: &System,
        x: usize,
        id: u32,
        crossnic: i64,
        inter: bool,
    ) -> Result<Loaded, TopoError> {
        let d = &self.doc;
        let ngpus = sys.count(NodeType::Gpu);
        let code = int(d, x, "pattern")?;
        let pat = pattern(code).ok_or_else(|| {
            d.error(
                x,
                format!(
                    "<graph pattern=\"{code}\">: NCCL's patterns are 1 to 6 (4 ring, 1-3 trees)"
                ),
            )
        })?;
        let nchannels = int(d, x, "nchannels")?;
        let mut g = Graph::new(id, pat, ngpus, 0, MAX_CHANNELS);
        g.cross_nic = crossnic.clamp(0, 2) as u8;
        g.bw_intra = float(d, x, "speedintra")?;
        g.bw_inter = float(d, x, "speedinter")?;
        g.latency_inter = d
            .attr(x, "latencyinter")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0);
        let mut notes = Vec::new();
        for key in ["typeintra", "typeinter"] {
            let v = required(d, x, key)?;
            let (t, known) = path_type(v);
            if !known {
                notes.push(TopoNote::note(format!(
                    "line {}: <graph {key}=\"{v}\">: not a path type NCCL's graph reader knows (LOC NVL NVB PIX PXB P2C PXN PHB SYS): it reads LOC",
                    d.node(x).line
                )));
            }
            match key {
                "typeintra" => g.type_intra = t,
                _ => g.type_inter = t,
            }
        }
        g.same_channels = int(d, x, "samechannels")? != 0;
        let channels: Vec<usize> = d.node(x).children.clone();
        if channels.len() > MAX_CHANNELS {
            return Err(d.error(
                x,
                format!(
                    "{} channels: NCCL holds at most {MAX_CHANNELS} (more overflow its arrays)",
                    channels.len()
                ),
            ));
        }
        if usize::try_from(nchannels).ok() != Some(channels.len()) {
            notes.push(TopoNote::note(format!(
                "line {}: <graph nchannels=\"{nchannels}\"> but {} <channel> elements: NCCL takes the attribute as the channel count (channels past those given would hold only rank 0); rnccl uses the channels given, up to that count",
                d.node(x).line,
                channels.len()
            )));
        }
        for (c, &ch) in channels.iter().enumerate() {
            self.read_channel(sys, &mut g, c, ch, inter, &mut notes)?;
        }
        g.n_channels = usize::try_from(nchannels).unwrap_or(0).min(channels.len());
        Ok(Loaded { graph: g, notes })
    }

    fn read_channel(
        &self,
        sys: &System,
        g: &mut Graph,
        c: usize,
        ch: usize,
        inter: bool,
        notes: &mut Vec<TopoNote>,
    ) -> Result<(), TopoError> {
        let d = &self.doc;
        let ngpus = g.ngpus;
        let (mut nets, mut ranks) = (Vec::new(), Vec::new());
        for &s in &d.node(ch).children {
            let dev = strtol16(required(d, s, "dev")?);
            match d.node(s).name.as_str() {
                "net" => {
                    if inter && !sys.nodes(NodeType::Net).iter().any(|n| n.id == dev as u64) {
                        return Err(d.error(
                            s,
                            format!(
                                "<net dev=\"{}\">: this topology has no network device {dev:#x}; NCCL fails when it connects the channel",
                                d.attr(s, "dev").unwrap_or("")
                            ),
                        ));
                    }
                    nets.push(dev as u64);
                }
                _ => {
                    let rank = sys
                        .nodes(NodeType::Gpu)
                        .iter()
                        .find(|n| {
                            n.gpu()
                                .is_some_and(|x| topo_id(n.host(), x.dev as u64) == dev as u64)
                        })
                        .and_then(|n| n.gpu().map(|x| x.rank))
                        .ok_or_else(|| {
                            d.error(
                                s,
                                format!(
                                    "<gpu dev=\"{}\">: no GPU of this topology has dev {dev} (NCCL: \"XML Import Channel : dev {dev} not found\"); dev is read as hexadecimal",
                                    d.attr(s, "dev").unwrap_or("")
                                ),
                            )
                        })?;
                    ranks.push(rank);
                }
            }
        }
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let whole = g.pattern == Pattern::Nvls || (sorted.len() == ngpus && ranks.len() == ngpus);
        if !whole {
            return Err(d.error(
                ch,
                format!(
                    "channel {c} holds ranks {ranks:?}; every channel holds each of the {ngpus} GPUs once (NCCL does not check, and would build a broken ring or tree)"
                ),
            ));
        }
        if inter && nets.len() != 2 {
            notes.push(TopoNote::note(format!(
                "line {}: channel {c} has {} <net> element(s); across nodes NCCL reads the first as the NET the channel enters by and the second as the one it leaves by (missing ones read as NET 0)",
                d.node(ch).line,
                nets.len()
            )));
        }
        for (i, &n) in nets.iter().take(2).enumerate() {
            g.inter[2 * c + i] = n;
        }
        for (i, &r) in ranks.iter().take(ngpus).enumerate() {
            g.intra[c * ngpus + i] = r;
        }
        let slow: Vec<String> = ranks
            .windows(2)
            .filter_map(|w| {
                let a = sys.gpu_of_rank(w[0])?;
                let b = sys.gpu_of_rank(w[1])?;
                let p = sys.path(
                    NodeRef::new(NodeType::Gpu, a),
                    NodeRef::new(NodeType::Gpu, b),
                )?;
                (p.ty > g.type_intra).then(|| format!("{}->{} {}", w[0], w[1], p.ty.as_str()))
            })
            .collect();
        if !slow.is_empty() {
            notes.push(TopoNote::note(format!(
                "line {}: channel {c}: ranks {} are farther apart than typeintra {}: the graph claims bandwidth the topology may not carry",
                d.node(ch).line,
                slow.join(", "),
                g.type_intra.as_str()
            )));
        }
        Ok(())
    }
}

fn required<'d>(d: &'d XmlDoc, i: usize, key: &str) -> Result<&'d str, TopoError> {
    d.attr(i, key).ok_or_else(|| {
        d.error(
            i,
            format!(
                "<{}> needs attribute {key} (NCCL: \"Attribute {key} of node {} not found\")",
                d.node(i).name,
                d.node(i).name
            ),
        )
    })
}

fn int(d: &XmlDoc, i: usize, key: &str) -> Result<i64, TopoError> {
    let v = required(d, i, key)?;
    Ok(crate::config::c_strtoll(v).value)
}

fn float(d: &XmlDoc, i: usize, key: &str) -> Result<f32, TopoError> {
    let v = required(d, i, key)?;
    let t = v.trim();
    let end = t
        .char_indices()
        .find(|&(k, c)| !(c.is_ascii_digit() || c == '.' || (k == 0 && (c == '-' || c == '+'))))
        .map_or(t.len(), |(k, _)| k);
    Ok(t[..end].parse().unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> System {
        System::from_xml_str(include_str!("../../tests/fixtures/anchors/h200x2/topo.xml")).unwrap()
    }

    #[test]
    fn reads_nccls_own_dump() {
        let f = GraphFile::parse(
            include_str!("../../tests/fixtures/anchors/h200x2/graph.xml"),
            "graph.xml",
        )
        .unwrap();
        let sys = h200();
        let ring = f.graph(&sys, 0, 2, false).unwrap().unwrap();
        assert_eq!(ring.graph.pattern, Pattern::Ring);
        assert!(ring.graph.n_channels > 0);
        assert!(ring.notes.is_empty(), "{:?}", ring.notes);
        assert!(f.graph(&sys, 2, 2, false).unwrap().is_none(), "no channels");
    }

    #[test]
    fn checks_as_nccl_does() {
        let sys = h200();
        let g = |body: &str| {
            GraphFile::parse(
                &format!("<graphs version=\"1\">\n{body}\n</graphs>\n"),
                "g.xml",
            )
            .unwrap()
            .graph(&sys, 0, 2, false)
        };
        let head = "<graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"1\" speedintra=\"20\" speedinter=\"20\" latencyinter=\"0\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\">";
        let ok = g(&format!(
            "{head}<channel><gpu dev=\"1\"/><gpu dev=\"0\"/></channel></graph>"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(ok.graph.channel(0), &[1, 0]);
        let e = g(&format!(
            "{head}<channel><gpu dev=\"2\"/><gpu dev=\"0\"/></channel></graph>"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("dev 2 not found") && e.starts_with("g.xml:2:"),
            "{e}"
        );
        let e = g(&format!(
            "{head}<channel><gpu dev=\"0\"/><gpu dev=\"0\"/></channel></graph>"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("each of the 2 GPUs once"), "{e}");
        let e = g("<graph id=\"0\" pattern=\"4\" crossnic=\"0\"><channel/></graph>")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Attribute nchannels of node graph not found"),
            "{e}"
        );
        let cross = head.replace("crossnic=\"0\"", "crossnic=\"1\"");
        let f = GraphFile::parse(
            &format!("<graphs version=\"1\">{cross}<channel><gpu dev=\"0\"/><gpu dev=\"1\"/></channel></graph></graphs>"),
            "g.xml",
        )
        .unwrap();
        assert!(
            f.graph(&sys, 0, 0, false).unwrap().is_none(),
            "crossnic=1 skipped under NCCL_CROSS_NIC=0"
        );
        assert!(f.graph(&sys, 0, 2, false).unwrap().is_some());
        let odd = head
            .replace("nchannels=\"1\"", "nchannels=\"3\"")
            .replace("NVL", "SYX")
            .replace("speedintra=\"20\"", "speedintra=\"20.5x\"");
        let two = g(&format!(
            "{odd}<channel><gpu dev=\"0\"/><gpu dev=\"0x1\"/></channel></graph>"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(two.graph.n_channels, 1);
        assert_eq!(two.graph.bw_intra, 20.5);
        let said: Vec<&str> = two.notes.iter().map(|n| n.message.as_str()).collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[0].contains("typeintra=\"SYX\"") && said[0].ends_with("it reads LOC"));
        assert!(said[1].contains("nchannels=\"3\"> but 1 <channel>"));
        assert!(said[2].contains("0->1 NVL are farther apart than typeintra LOC"));
        assert_eq!(strtol16("10"), 16);
        assert_eq!(strtol16("0x100000000000001"), 0x100000000000001);
    }
}
