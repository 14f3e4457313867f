//! Merging and trimming topology documents as NCCL does when it builds one node's view from
//! the ranks' own detections (NCCL src/graph/xml.cc `ncclTopoFuseXml`, `ncclTopoTrimXml`).

use super::XmlDoc;

/// Merges `src` into `dst`: every element of `src` whose parent matched is looked up among the
/// matching parent's children in `dst` by name and identical attribute set; found elements are
/// merged recursively, others are copied (appended) with their subtree. An empty `dst` takes a
/// copy of `src`.
pub fn fuse(dst: &mut XmlDoc, src: &XmlDoc) {
    let Some(src_root) = src.root() else { return };
    match dst.root() {
        None => {
            dst.add_tree(None, src, src_root);
        }
        Some(dst_root) => fuse_rec(dst, dst_root, src, src_root),
    }
}

fn fuse_rec(dst: &mut XmlDoc, dst_parent: usize, src: &XmlDoc, src_parent: usize) {
    for &s in &src.node(src_parent).children {
        match find_same(dst, dst_parent, src, s) {
            Some(d) => fuse_rec(dst, d, src, s),
            None => {
                dst.add_tree(Some(dst_parent), src, s);
            }
        }
    }
}

fn find_same(dst: &XmlDoc, parent: usize, src: &XmlDoc, s: usize) -> Option<usize> {
    let sn = src.node(s);
    dst.node(parent).children.iter().copied().find(|&c| {
        let cn = dst.node(c);
        cn.name == sn.name
            && cn.attrs.len() == sn.attrs.len()
            && sn
                .attrs
                .iter()
                .all(|(k, v)| dst.attr(c, k) == Some(v.as_str()))
    })
}

/// Removes the `pci`, `cpu`, `nic` and `net` branches that hold no element with `keep="1"`, and
/// drops the `keep` attributes of the elements that have it.
pub fn trim(doc: &mut XmlDoc) {
    if let Some(root) = doc.root() {
        trim_rec(doc, root);
    }
}

fn trim_rec(doc: &mut XmlDoc, i: usize) -> bool {
    if doc.attr(i, "keep") == Some("1") {
        doc.unset_attr(i, "keep");
        return true;
    }
    let children = doc.node(i).children.clone();
    let mut keep = false;
    for c in children {
        keep |= trim_rec(doc, c);
    }
    if !keep && matches!(doc.node(i).name.as_str(), "pci" | "cpu" | "nic" | "net") {
        doc.remove(i);
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::super::read::{Schema, parse};
    use super::super::write::to_string;
    use super::*;

    fn doc(s: &str) -> XmlDoc {
        parse(s, "t", Schema::Topology).unwrap().doc
    }

    #[test]
    fn fuse_appends_new_and_merges_equal_elements() {
        let mut a = doc(
            "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"a\"><gpu dev=\"0\"/></pci><nic><net name=\"e\"/></nic></cpu></system>",
        );
        let b = doc(
            "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"b\"><gpu dev=\"1\"/></pci><nic><net name=\"e\"/></nic></cpu></system>",
        );
        fuse(&mut a, &b);
        assert_eq!(
            to_string(&a),
            "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"a\">\n      <gpu dev=\"0\"/>\n    </pci>\n    <nic>\n      <net name=\"e\"/>\n    </nic>\n    <pci busid=\"b\">\n      <gpu dev=\"1\"/>\n    </pci>\n  </cpu>\n</system>\n"
        );
        let mut empty = XmlDoc::new("e");
        fuse(&mut empty, &b);
        assert_eq!(to_string(&empty), to_string(&b));
    }

    #[test]
    fn trim_keeps_only_branches_with_keep() {
        let mut d = doc(
            "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"s\"><pci busid=\"a\"><gpu dev=\"0\" keep=\"1\"/></pci><pci busid=\"b\"><gpu dev=\"1\"/></pci></pci></cpu><cpu numaid=\"1\"/></system>",
        );
        trim(&mut d);
        assert_eq!(
            to_string(&d),
            "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"s\">\n      <pci busid=\"a\">\n        <gpu dev=\"0\"/>\n      </pci>\n    </pci>\n  </cpu>\n</system>\n"
        );
    }
}
