//! NCCL's topology and graph XML: an element tree with attributes in insertion order (NCCL
//! src/graph/xml.h), read leniently from files ([`read`]), written byte-for-byte as NCCL writes
//! dumps ([`write`](mod@write)), and fused and trimmed as NCCL does when it merges per-rank views ([`fuse`]).

pub mod fuse;
pub mod read;
pub mod write;

/// One element: its name, attributes in order, children (indices into the document arena),
/// parent, and the 1-based line it was read from (0 when created by detection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlNode {
    /// Element name (`system`, `cpu`, `pci`, ...).
    pub name: String,
    /// Attributes as `(key, value)` in the order NCCL writes them.
    pub attrs: Vec<(String, String)>,
    /// Children, in order.
    pub children: Vec<usize>,
    /// The parent element, `None` for the root and for elements not yet attached.
    pub parent: Option<usize>,
    /// 1-based source line, 0 for elements made by detection.
    pub line: usize,
    removed: bool,
}

/// An XML document as an arena of elements, like NCCL's `struct ncclXml`. Element indices stay
/// valid for the document's life; removed elements stay in the arena, detached.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XmlDoc {
    nodes: Vec<XmlNode>,
    root: Option<usize>,
    /// Where the document came from (file path or `<string>`), for error messages.
    pub source: String,
}

impl XmlDoc {
    /// An empty document named `source` (no root yet).
    pub fn new(source: impl Into<String>) -> XmlDoc {
        XmlDoc {
            nodes: Vec::new(),
            root: None,
            source: source.into(),
        }
    }

    /// A document holding only `<system version="1">`, as NCCL starts one when there is no file.
    pub fn new_system(source: impl Into<String>) -> XmlDoc {
        let mut d = XmlDoc::new(source);
        let s = d.add(None, "system", 0);
        d.set_attr(s, "version", "1");
        d
    }

    /// The root element, if any.
    pub fn root(&self) -> Option<usize> {
        self.root
    }

    /// The element at `i`.
    pub fn node(&self, i: usize) -> &XmlNode {
        &self.nodes[i]
    }

    /// Adds element `name` as the last child of `parent` (or as the root when `parent` is `None`
    /// and there is no root yet; otherwise detached) and returns its index.
    pub fn add(&mut self, parent: Option<usize>, name: &str, line: usize) -> usize {
        let i = self.nodes.len();
        self.nodes.push(XmlNode {
            name: name.to_string(),
            attrs: Vec::new(),
            children: Vec::new(),
            parent,
            line,
            removed: false,
        });
        match parent {
            Some(p) => self.nodes[p].children.push(i),
            None if self.root.is_none() => self.root = Some(i),
            None => {}
        }
        i
    }

    /// Attaches the detached element `child` under `parent` at child position `pos`.
    pub fn attach(&mut self, parent: usize, child: usize, pos: usize) {
        self.nodes[child].parent = Some(parent);
        let pos = pos.min(self.nodes[parent].children.len());
        self.nodes[parent].children.insert(pos, child);
    }

    /// The value of attribute `key` of element `i`.
    pub fn attr(&self, i: usize, key: &str) -> Option<&str> {
        self.nodes[i]
            .attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Sets attribute `key` of element `i`, in place if present, else appended.
    pub fn set_attr(&mut self, i: usize, key: &str, value: &str) {
        let attrs = &mut self.nodes[i].attrs;
        match attrs.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value.to_string(),
            None => attrs.push((key.to_string(), value.to_string())),
        }
    }

    /// Sets attribute `key` only if element `i` does not have it (NCCL `xmlSetAttrIfUnset`,
    /// `xmlInitAttr*`).
    pub fn set_attr_if_unset(&mut self, i: usize, key: &str, value: &str) {
        if self.attr(i, key).is_none() {
            self.set_attr(i, key, value);
        }
    }

    /// Removes attribute `key` of element `i`, keeping the others' order.
    pub fn unset_attr(&mut self, i: usize, key: &str) {
        self.nodes[i].attrs.retain(|(k, _)| k != key);
    }

    /// Detaches element `i` from its parent; it and its subtree leave the document.
    pub fn remove(&mut self, i: usize) {
        self.nodes[i].removed = true;
        if let Some(p) = self.nodes[i].parent {
            self.nodes[p].children.retain(|&c| c != i);
        }
    }

    fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| !self.nodes[i].removed)
    }

    /// The first live element named `name`, in creation order (NCCL `xmlFindTag`).
    pub fn find_tag(&self, name: &str) -> Option<usize> {
        self.live().find(|&i| self.nodes[i].name == name)
    }

    /// The first live element named `name` whose attribute `key` equals `value`
    /// (NCCL `xmlFindTagKv`).
    pub fn find_tag_kv(&self, name: &str, key: &str, value: &str) -> Option<usize> {
        self.live()
            .find(|&i| self.nodes[i].name == name && self.attr(i, key) == Some(value))
    }

    /// The first child of `i` named `name` (NCCL `xmlGetSub`).
    pub fn sub(&self, i: usize, name: &str) -> Option<usize> {
        self.nodes[i]
            .children
            .iter()
            .copied()
            .find(|&c| self.nodes[c].name == name)
    }

    /// The first child of `i` named `name` with attribute `key` equal to `value`
    /// (NCCL `xmlGetSubKv`).
    pub fn sub_kv(&self, i: usize, name: &str, key: &str, value: &str) -> Option<usize> {
        self.nodes[i]
            .children
            .iter()
            .copied()
            .find(|&c| self.nodes[c].name == name && self.attr(c, key) == Some(value))
    }

    /// Every element of the tree under (and including) `i`, depth first in document order.
    pub fn descendants(&self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![i];
        while let Some(n) = stack.pop() {
            out.push(n);
            stack.extend(self.nodes[n].children.iter().rev());
        }
        out
    }

    /// The nearest ancestor of `i` (excluding `i`) named `name`.
    pub fn ancestor(&self, i: usize, name: &str) -> Option<usize> {
        let mut p = self.nodes[i].parent;
        while let Some(n) = p {
            if self.nodes[n].name == name {
                return Some(n);
            }
            p = self.nodes[n].parent;
        }
        None
    }

    /// Copies the subtree of `src` rooted at `node` under `parent` (NCCL `xmlAddTree`) and
    /// returns the new element.
    pub fn add_tree(&mut self, parent: Option<usize>, src: &XmlDoc, node: usize) -> usize {
        let s = src.node(node);
        let i = self.add(parent, &s.name, s.line);
        self.nodes[i].attrs = s.attrs.clone();
        for &c in &s.children {
            self.add_tree(Some(i), src, c);
        }
        i
    }

    /// An error about element `i`, naming the source and the element's line.
    pub fn error(&self, i: usize, message: impl Into<String>) -> crate::topo::TopoError {
        crate::topo::TopoError::Xml {
            file: self.source.clone(),
            line: self.nodes[i].line,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_keep_order_and_find_follows_creation_order() {
        let mut d = XmlDoc::new_system("t");
        let root = d.root().unwrap();
        let cpu = d.add(Some(root), "cpu", 0);
        d.set_attr(cpu, "numaid", "0");
        d.set_attr(cpu, "arch", "x86_64");
        d.set_attr_if_unset(cpu, "numaid", "1");
        d.set_attr(cpu, "numaid", "2");
        assert_eq!(d.node(cpu).attrs[0], ("numaid".into(), "2".into()));
        let p1 = d.add(Some(cpu), "pci", 0);
        d.set_attr(p1, "busid", "0000:01:00.0");
        let p0 = d.add(None, "pci", 0);
        d.set_attr(p0, "busid", "0000:00:01.0");
        d.attach(cpu, p0, 0);
        assert_eq!(d.node(cpu).children, vec![p0, p1]);
        assert_eq!(d.find_tag_kv("pci", "busid", "0000:00:01.0"), Some(p0));
        d.remove(p1);
        assert_eq!(d.find_tag_kv("pci", "busid", "0000:01:00.0"), None);
        assert_eq!(d.ancestor(p0, "system"), Some(root));
        d.unset_attr(cpu, "numaid");
        assert_eq!(d.attr(cpu, "numaid"), None);
    }
}
