//! Reading NCCL topology and graph XML.
//!
//! Tokenising is quick-xml's; on top of it this applies NCCL's element hierarchy
//! (src/graph/xml.cc handlers): `system > cpu > (pci|nic)`, `pci > (pci|gpu|nic|pcilink)`,
//! `gpu > (nvlink|c2c)`, `nic > net` for topologies and `graphs > graph > channel > (net|gpu)`
//! for graphs. Elements elsewhere are skipped with their subtree, as NCCL skips them. rnccl is
//! more lenient than NCCL's hand-written parser (it accepts an `<?xml?>` prolog and tabs) but
//! records, in [`Parsed::notes`], everything NCCL itself would reject (flagged
//! [`TopoNote::nccl_rejects`]) or drop, so a file can be
//! checked before it is given to NCCL. Malformed input is an error naming the line.

use quick_xml::events::{BytesStart, Event};

use super::XmlDoc;
use crate::topo::{TopoError, TopoNote};

/// Which element hierarchy a document follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// `NCCL_TOPO_FILE` / `NCCL_TOPO_DUMP_FILE`: root `<system version="1">`.
    Topology,
    /// `NCCL_GRAPH_FILE` / `NCCL_GRAPH_DUMP_FILE`: root `<graphs version="1">`.
    Graphs,
}

impl Schema {
    fn root(self) -> &'static str {
        match self {
            Schema::Topology => "system",
            Schema::Graphs => "graphs",
        }
    }

    fn allowed(self, parent: Option<&str>) -> &'static [&'static str] {
        match (self, parent) {
            (Schema::Topology, None) => &["system"],
            (Schema::Topology, Some("system")) => &["cpu"],
            (Schema::Topology, Some("cpu")) => &["pci", "nic"],
            (Schema::Topology, Some("pci")) => &["pci", "gpu", "nic", "pcilink"],
            (Schema::Topology, Some("gpu")) => &["nvlink", "c2c"],
            (Schema::Topology, Some("nic")) => &["net"],
            (Schema::Graphs, None) => &["graphs"],
            (Schema::Graphs, Some("graphs")) => &["graph"],
            (Schema::Graphs, Some("graph")) => &["channel"],
            (Schema::Graphs, Some("channel")) => &["net", "gpu"],
            _ => &[],
        }
    }
}

/// A parsed document and the notes about what NCCL would do differently with the same text.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The elements NCCL keeps.
    pub doc: XmlDoc,
    /// One line per compatibility issue, each starting with `line N:`.
    pub notes: Vec<TopoNote>,
}

/// NCCL's limits (src/graph/xml.h): string length, attributes per element, elements per file.
const MAX_STR_LEN: usize = 255;
const MAX_ATTR_COUNT: usize = 16;
const TOPO_XML_MAX_NODES: usize = 256;
/// Deepest nesting rnccl accepts (real topologies are under 10 levels; this bounds recursion).
const MAX_DEPTH: usize = 64;

enum Frame {
    Kept(usize),
    Skipped(String),
}

struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { starts }
    }

    fn at(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

/// Parses `text` (named `source` in errors) as a document of `schema`.
///
/// Errors: [`TopoError::Xml`] naming the line for malformed XML (unclosed or mismatched tags,
/// unquoted or duplicate attributes, stray text), a missing or wrong root element, or a root
/// `version` other than `1`.
pub fn parse(text: &str, source: &str, schema: Schema) -> Result<Parsed, TopoError> {
    let lines = Lines::new(text);
    let err = |offset: usize, message: String| TopoError::Xml {
        file: source.to_string(),
        line: lines.at(offset),
        message,
    };
    let mut reader = quick_xml::Reader::from_str(text);
    reader.config_mut().trim_text(true);
    let mut doc = XmlDoc::new(source);
    let mut notes = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut first_top: Option<(String, usize)> = None;
    let mut kept = 0usize;
    loop {
        let before = reader.buffer_position() as usize;
        let start = before
            + text[before.min(text.len())..]
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(0);
        let event = reader.read_event().map_err(|e| {
            err(
                reader.error_position() as usize,
                format!("malformed XML: {e}"),
            )
        })?;
        let end = reader.buffer_position() as usize;
        let line = lines.at(start);
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                let name = element_name(e, |m| err(start, m))?;
                if stack.len() >= MAX_DEPTH {
                    return Err(err(start, format!("<{name}> is nested more than {MAX_DEPTH} levels deep")));
                }
                if text[start..end].contains('\t') {
                    notes.push(TopoNote::rejected(format!(
                        "line {line}: a tab inside <{name}>: NCCL's parser only accepts spaces and newlines between attributes"
                    )));
                }
                let parent = match stack.last() {
                    Some(Frame::Kept(p)) => Some(doc.node(*p).name.clone()),
                    Some(Frame::Skipped(_)) => None,
                    None => None,
                };
                let skipping = matches!(stack.last(), Some(Frame::Skipped(_)));
                if stack.is_empty() && first_top.is_none() {
                    first_top = Some((name.clone(), line));
                }
                let allowed = !skipping && schema.allowed(parent.as_deref()).contains(&name.as_str());
                let frame = if allowed && (stack.is_empty() && doc.root().is_some()) {
                    notes.push(TopoNote::note(format!("line {line}: a second <{name}> at top level is ignored, as NCCL ignores it")));
                    Frame::Skipped(name.clone())
                } else if allowed {
                    let parent_idx = match stack.last() {
                        Some(Frame::Kept(p)) => Some(*p),
                        _ => None,
                    };
                    let i = doc.add(parent_idx, &name, line);
                    kept += 1;
                    read_attrs(e, &mut doc, i, &mut notes, line, |m| err(start, m))?;
                    if parent_idx.is_some() && doc.node(parent_idx.unwrap()).children.len() > 640 {
                        return Err(err(start, format!("<{}> has more than 640 children (NCCL's limit)", parent.unwrap_or_default())));
                    }
                    Frame::Kept(i)
                } else {
                    if !skipping {
                        notes.push(TopoNote::note(format!(
                            "line {line}: element <{name}> is not allowed {}; NCCL ignores it and everything inside",
                            match &parent {
                                Some(p) => format!("inside <{p}>"),
                                None => "at top level".to_string(),
                            }
                        )));
                    }
                    Frame::Skipped(name.clone())
                };
                if !empty {
                    stack.push(frame);
                }
            }
            Event::End(_) => {
                stack.pop();
            }
            Event::Text(t) => {
                let s = t.as_ref().trim().to_string();
                if !s.is_empty() {
                    return Err(err(
                        start,
                        format!("unexpected text {s:?}: NCCL XML holds only elements and attributes"),
                    ));
                }
            }
            Event::GeneralRef(_) | Event::CData(_) => {
                return Err(err(start, "unexpected text: NCCL XML holds only elements and attributes".into()));
            }
            Event::Decl(_) => notes.push(TopoNote::rejected(format!(
                "line {line}: NCCL's parser rejects the <?xml ...?> declaration (\"expected >, got '?'\"); remove it before giving the file to NCCL"
            ))),
            Event::PI(_) | Event::DocType(_) => notes.push(TopoNote::rejected(format!(
                "line {line}: NCCL's parser rejects <? ?> and <! > constructs other than comments"
            ))),
            Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if let Some(f) = stack.last() {
        let name = match f {
            Frame::Kept(i) => doc.node(*i).name.clone(),
            Frame::Skipped(n) => n.clone(),
        };
        return Err(err(
            text.len(),
            format!("unterminated element <{name}> (missing </{name}>)"),
        ));
    }
    let root_name = schema.root();
    let Some(root) = doc.root() else {
        let message = match &first_top {
            Some((n, _)) if n == "graphs" => {
                "this is an NCCL graph file (<graphs>), not a topology file".to_string()
            }
            Some((n, _)) if n == "system" => {
                "this is an NCCL topology file (<system>), not a graph file".to_string()
            }
            Some((n, _)) => format!(
                "the top element is <{n}>; an NCCL {} file starts with <{root_name} version=\"1\">",
                schema_word(schema)
            ),
            None => format!(
                "no elements: an NCCL {} file starts with <{root_name} version=\"1\">",
                schema_word(schema)
            ),
        };
        return Err(TopoError::Xml {
            file: source.to_string(),
            line: first_top.as_ref().map_or(1, |(_, l)| *l),
            message,
        });
    };
    match doc.attr(root, "version") {
        Some("1") => {}
        Some(v) => {
            return Err(doc.error(
                root,
                format!("<{root_name} version=\"{v}\">: NCCL reads only version 1"),
            ));
        }
        None => return Err(doc.error(root, format!("<{root_name}> needs version=\"1\""))),
    }
    if schema == Schema::Topology && kept > TOPO_XML_MAX_NODES {
        notes.push(TopoNote::rejected(format!(
            "the file has {kept} elements; NCCL's topology parser stops at {TOPO_XML_MAX_NODES} (\"XML parser is limited to 256 nodes\") and fails"
        )));
    }
    Ok(Parsed { doc, notes })
}

fn schema_word(s: Schema) -> &'static str {
    match s {
        Schema::Topology => "topology",
        Schema::Graphs => "graph",
    }
}

fn element_name(
    e: &BytesStart<'_>,
    err: impl Fn(String) -> TopoError,
) -> Result<String, TopoError> {
    let name = e.name().as_ref().to_string();
    if name.len() > MAX_STR_LEN {
        return Err(err(format!(
            "element name longer than {MAX_STR_LEN} characters"
        )));
    }
    Ok(name)
}

fn read_attrs(
    e: &BytesStart<'_>,
    doc: &mut XmlDoc,
    i: usize,
    notes: &mut Vec<TopoNote>,
    line: usize,
    err: impl Fn(String) -> TopoError,
) -> Result<(), TopoError> {
    let name = doc.node(i).name.clone();
    let mut n = 0;
    for a in e.attributes().with_checks(true) {
        let a = a.map_err(|x| err(format!("<{name}>: bad attribute: {x}")))?;
        let key: &str = a.key.as_ref();
        let value: &str = &a.value;
        if key.len() > MAX_STR_LEN || value.len() > MAX_STR_LEN {
            notes.push(TopoNote::rejected(format!(
                "line {line}: <{name} {key}=...> is longer than {MAX_STR_LEN} characters; NCCL rejects the file"
            )));
        }
        n += 1;
        if n == MAX_ATTR_COUNT + 1 {
            notes.push(TopoNote::note(format!(
                "line {line}: <{name}> has more than {MAX_ATTR_COUNT} attributes; NCCL ignores the extra ones"
            )));
        }
        doc.set_attr(i, key, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(s: &str) -> Result<Parsed, TopoError> {
        parse(s, "t.xml", Schema::Topology)
    }

    #[test]
    fn keeps_known_elements_and_skips_others_with_a_note() {
        let p = topo(
            "<?xml version=\"1.0\"?>\n<system version=\"1\">\n  <cpu numaid=\"0\">\n    <foo a=\"1\"><pci/></foo>\n    <!-- c -->\n    <nic><net name=\"ib0\"/></nic>\n  </cpu>\n</system>\n",
        )
        .unwrap();
        let d = &p.doc;
        let root = d.root().unwrap();
        let cpu = d.node(root).children[0];
        assert_eq!(d.node(cpu).line, 3);
        assert_eq!(d.node(cpu).children.len(), 1);
        let nic = d.node(cpu).children[0];
        assert_eq!(d.node(nic).name, "nic");
        assert_eq!(d.node(d.node(nic).children[0]).line, 6);
        assert!(p.notes.iter().any(|n| n.nccl_rejects
            && n.message.starts_with("line 1:")
            && n.message.contains("declaration")));
        assert!(p.notes.iter().any(|n| !n.nccl_rejects
            && n.message.starts_with("line 4:")
            && n.message.contains("<foo>")));
    }

    #[test]
    fn errors_name_the_line() {
        let e = topo("<system version=\"1\">\n  <cpu numaid=0>\n</system>\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.xml:2:"), "{e}");
        let e = topo("<system version=\"1\">\n  <cpu numaid=\"0\">\n  </pci>\n</system>\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.xml:3:") && e.contains("malformed"), "{e}");
        let e = topo("<system version=\"1\">\n  <cpu numaid=\"0\">\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unterminated") || e.contains("malformed"), "{e}");
        let e = topo("<system version=\"2\">\n</system>\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.xml:1:") && e.contains("version 1"), "{e}");
        let e = topo("\n<graphs version=\"1\"/>\n").unwrap_err().to_string();
        assert!(e.starts_with("t.xml:2:") && e.contains("graph file"), "{e}");
        let e = topo("<system version=\"1\">\n hello\n</system>")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("t.xml:2:") && e.contains("unexpected text"),
            "{e}"
        );
        let e = topo("").unwrap_err().to_string();
        assert!(e.contains("no elements"), "{e}");
        let e = topo("<system version=\"1\" a=\"1\" a=\"2\"/>")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad attribute"), "{e}");
    }

    #[test]
    fn graphs_schema() {
        let p = parse(
            "<graphs version=\"1\">\n  <graph id=\"0\">\n    <channel><gpu dev=\"0\"/><net dev=\"1\"/></channel>\n  </graph>\n</graphs>\n",
            "g.xml",
            Schema::Graphs,
        )
        .unwrap();
        let root = p.doc.root().unwrap();
        let g = p.doc.node(root).children[0];
        let c = p.doc.node(g).children[0];
        assert_eq!(p.doc.node(c).children.len(), 2);
    }
}
