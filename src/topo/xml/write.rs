//! Writing XML exactly as NCCL writes its dumps (NCCL src/graph/xml.cc `ncclTopoDumpXmlRec`):
//! two spaces of indent per level, attributes in insertion order as `key="value"` with no
//! escaping, childless elements as `<name .../>`, no prolog, a newline after every line.

use super::XmlDoc;

/// The document as NCCL's writer prints it; empty when the document has no root.
pub fn to_string(doc: &XmlDoc) -> String {
    let mut out = String::new();
    if let Some(root) = doc.root() {
        write_node(doc, root, 0, &mut out);
    }
    out
}

fn write_node(doc: &XmlDoc, i: usize, indent: usize, out: &mut String) {
    let n = doc.node(i);
    out.extend(std::iter::repeat_n(' ', indent));
    out.push('<');
    out.push_str(&n.name);
    for (k, v) in &n.attrs {
        out.push(' ');
        out.push_str(k);
        out.push_str("=\"");
        out.push_str(v);
        out.push('"');
    }
    if n.children.is_empty() {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    for &c in &n.children {
        write_node(doc, c, indent + 2, out);
    }
    out.extend(std::iter::repeat_n(' ', indent));
    out.push_str("</");
    out.push_str(&n.name);
    out.push_str(">\n");
}

#[cfg(test)]
mod tests {
    use super::super::read::{Schema, parse};
    use super::*;

    #[test]
    fn nccl_layout() {
        let mut d = XmlDoc::new_system("t");
        let r = d.root().unwrap();
        let c = d.add(Some(r), "cpu", 0);
        d.set_attr(c, "numaid", "0");
        d.add(Some(c), "nic", 0);
        assert_eq!(
            to_string(&d),
            "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <nic/>\n  </cpu>\n</system>\n"
        );
    }

    #[test]
    fn round_trips_what_it_reads() {
        let text = "<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"ff\">\n    <pci busid=\"0000:01:00.0\" class=\"0x060400\" link_speed=\"\" link_width=\"16\"/>\n  </cpu>\n</system>\n";
        let p = parse(text, "t", Schema::Topology).unwrap();
        assert_eq!(to_string(&p.doc), text);
    }
}
