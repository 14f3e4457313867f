//! What filling a topology file changed, as notes: the attributes the host (or the assumptions
//! standing in for it) supplied, the elements added under the file's own, the file's elements
//! NCCL trims, and the devices that are on one side only — in the file but not on the host, or
//! on the host but not in the file (NCCL 2.28 src/graph/topo.cc `ncclTopoGetSystem`: the file is
//! the starting point, every rank fills its GPU and the network devices into it by bus id and
//! name, then branches without a used device are trimmed).

use std::collections::BTreeMap;

use super::Inventory;
use super::sysfs::basename;
use crate::topo::TopoNote;
use crate::topo::busid::normalize;
use crate::topo::xml::XmlDoc;

/// Attributes NCCL rewrites on every load; reporting them would be noise.
const QUIET: [&str; 2] = ["host_hash", "keep"];

fn head(doc: &XmlDoc, i: usize) -> String {
    let n = doc.node(i);
    let key = ["busid", "numaid", "name", "dev", "target"]
        .iter()
        .find_map(|k| doc.attr(i, k).map(|v| format!(" {k}=\"{v}\"")))
        .unwrap_or_default();
    format!("<{}{key}>", n.name)
}

fn full(doc: &XmlDoc, i: usize) -> String {
    let n = doc.node(i);
    let attrs: String = n
        .attrs
        .iter()
        .filter(|(k, _)| !QUIET.contains(&k.as_str()))
        .map(|(k, v)| format!(" {k}=\"{v}\""))
        .collect();
    format!("<{}{attrs}>", n.name)
}

/// A short account of an added subtree: the element and what it holds.
fn added(doc: &XmlDoc, i: usize) -> String {
    let inner: Vec<String> = doc
        .descendants(i)
        .into_iter()
        .skip(1)
        .filter(|&d| matches!(doc.node(d).name.as_str(), "gpu" | "nvlink" | "c2c" | "net"))
        .map(|d| full(doc, d))
        .collect();
    if inner.is_empty() {
        full(doc, i)
    } else {
        format!("{} holding {}", full(doc, i), inner.join(", "))
    }
}

/// Notes for what turned the file `before` into `after`: per element of the file, the
/// attributes added or changed (`from` says where they came from: `this host`, `the
/// assumptions`); the subtrees added under the file's elements; the file's elements no longer
/// there (trimmed: nothing NCCL uses is below them).
pub fn filled_notes(before: &XmlDoc, after: &XmlDoc, from: &str) -> Vec<TopoNote> {
    let mut notes = Vec::new();
    let (Some(broot), Some(aroot)) = (before.root(), after.root()) else {
        return notes;
    };
    let mut by_line: BTreeMap<(usize, String), Vec<usize>> = BTreeMap::new();
    for b in before.descendants(broot) {
        let n = before.node(b);
        by_line.entry((n.line, n.name.clone())).or_default().push(b);
    }
    let mut matched = vec![false; before.descendants(broot).into_iter().max().unwrap_or(0) + 1];
    let mut changed: Vec<(String, Vec<usize>)> = Vec::new();
    let mut additions = Vec::new();
    for a in after.descendants(aroot) {
        let n = after.node(a);
        if n.line == 0 {
            let parent_from_file = n.parent.is_none_or(|p| after.node(p).line > 0);
            if parent_from_file {
                let under = n
                    .parent
                    .map(|p| format!("line {}: {}: ", after.node(p).line, head(after, p)))
                    .unwrap_or_default();
                additions.push(TopoNote::filled(format!(
                    "{under}added {} from {from}",
                    added(after, a)
                )));
            }
            continue;
        }
        let Some(b) = by_line
            .get_mut(&(n.line, n.name.clone()))
            .and_then(|v| (!v.is_empty()).then(|| v.remove(0)))
        else {
            continue;
        };
        matched[b] = true;
        let mut changes = Vec::new();
        for (k, v) in &n.attrs {
            if QUIET.contains(&k.as_str()) {
                continue;
            }
            match before.attr(b, k) {
                None => changes.push(format!("{k}=\"{v}\"")),
                Some(old) if old != v => changes.push(format!("{k}=\"{v}\" (file: \"{old}\")")),
                Some(_) => {}
            }
        }
        if !changes.is_empty() {
            let text = changes.join(", ");
            match changed.iter_mut().find(|(t, _)| *t == text) {
                Some((_, at)) => at.push(b),
                None => changed.push((text, vec![b])),
            }
        }
    }
    for (text, at) in changed {
        let whom = match at.as_slice() {
            [b] => format!("line {}: {}", before.node(*b).line, head(before, *b)),
            many => {
                let lines: Vec<String> = many
                    .iter()
                    .map(|&b| before.node(b).line.to_string())
                    .collect();
                format!(
                    "lines {}: {} <{}> elements",
                    lines.join(", "),
                    many.len(),
                    before.node(many[0]).name
                )
            }
        };
        notes.push(TopoNote::filled(format!("{whom}: {text} from {from}")));
    }
    notes.extend(additions);
    for b in before.descendants(broot) {
        let parent_kept = before.node(b).parent.is_none_or(|p| matched[p]);
        if !matched[b] && parent_kept {
            notes.push(TopoNote::filled(format!(
                "line {}: {} is dropped: no GPU or network device NCCL uses is below it (NCCL trims it)",
                before.node(b).line,
                full(before, b)
            )));
        }
    }
    notes
}

fn class_of(doc: &XmlDoc, p: usize, prefix: &str, child: &str) -> bool {
    doc.sub(p, child).is_some() || doc.attr(p, "class").is_some_and(|c| c.starts_with(prefix))
}

/// Notes for the devices on one side only when the file `file` is applied to the host `inv`:
/// GPUs and network devices the file names (by bus id, or a `<net>` by name) that the host lacks
/// — NCCL leaves them out — and the host's that the file lacks — NCCL places them from sysfs.
pub fn host_notes(file: &XmlDoc, inv: &Inventory) -> Vec<TopoNote> {
    let mut notes = Vec::new();
    let Some(root) = file.root() else {
        return notes;
    };
    let all = file.descendants(root);
    let pcis: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| file.node(i).name == "pci" && file.attr(i, "busid").is_some())
        .collect();
    let bus = |p: usize| normalize(file.attr(p, "busid").unwrap_or(""));
    let file_gpus: Vec<usize> = pcis
        .iter()
        .copied()
        .filter(|&p| class_of(file, p, "0x03", "gpu"))
        .collect();
    for &p in &file_gpus {
        if !inv.gpus.iter().any(|g| normalize(&g.busid) == bus(p)) {
            notes.push(TopoNote::host(format!(
                "line {}: the file names a GPU at {} but this host has none there: NCCL leaves it out",
                file.node(p).line,
                file.attr(p, "busid").unwrap_or("")
            )));
        }
    }
    for g in &inv.gpus {
        if !file_gpus.iter().any(|&p| bus(p) == normalize(&g.busid)) {
            notes.push(TopoNote::host(format!(
                "GPU {} ({}, NVML index {}) on this host is not in the file: NCCL adds it where sysfs places it",
                g.busid, g.name, g.index
            )));
        }
    }
    let net_bus = |n: &super::net::NetDev| {
        n.pci_path
            .as_deref()
            .filter(|_| n.is_pci)
            .map(|p| normalize(basename(p)))
    };
    let file_nets: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| file.node(i).name == "net")
        .collect();
    let file_nics: Vec<usize> = pcis
        .iter()
        .copied()
        .filter(|&p| !class_of(file, p, "0x03", "gpu") && class_of(file, p, "0x02", "nic"))
        .collect();
    for &p in &file_nics {
        let names: Vec<&str> = file
            .descendants(p)
            .into_iter()
            .filter(|&d| file.node(d).name == "net")
            .filter_map(|d| file.attr(d, "name"))
            .collect();
        let present = inv.nets.iter().any(|n| {
            net_bus(n).as_deref() == Some(bus(p).as_str()) || names.contains(&n.name.as_str())
        });
        if !present {
            notes.push(TopoNote::host(format!(
                "line {}: the file names a network device at {} but this host's network plugin lists none there: NCCL leaves it out",
                file.node(p).line,
                file.attr(p, "busid").unwrap_or("")
            )));
        }
    }
    for n in &inv.nets {
        let by_name = file_nets
            .iter()
            .any(|&f| file.attr(f, "name") == Some(&n.name));
        let by_bus = net_bus(n).is_some_and(|b| file_nics.iter().any(|&p| bus(p) == b));
        if !by_name && !by_bus {
            notes.push(TopoNote::host(format!(
                "network device {} ({} plugin{}) on this host is not in the file: NCCL adds it{}",
                n.name,
                n.plugin,
                net_bus(n).map_or(String::new(), |b| format!(", PCI {b}")),
                if n.is_pci {
                    " where sysfs places it"
                } else {
                    " under the first CPU"
                }
            )));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topo::xml::read::{Schema, parse};

    fn doc(s: &str) -> XmlDoc {
        parse(s, "t.xml", Schema::Topology).unwrap().doc
    }

    #[test]
    fn reports_added_changed_and_dropped() {
        let before = doc(
            "<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\"/>\n<pci busid=\"0000:09:00.0\" class=\"0x060400\"/>\n</cpu>\n</system>\n",
        );
        let mut after = before.clone();
        let root = after.root().unwrap();
        let cpu = after.node(root).children[0];
        after.set_attr(cpu, "arch", "x86_64");
        after.set_attr(cpu, "host_hash", "0x1");
        let pci = after.node(cpu).children[0];
        after.set_attr(pci, "class", "0x030000");
        let g = after.add(Some(pci), "gpu", 0);
        after.set_attr(g, "dev", "0");
        let l = after.add(Some(g), "nvlink", 0);
        after.set_attr(l, "count", "18");
        let sw = after.node(cpu).children[1];
        after.remove(sw);
        let notes: Vec<String> = filled_notes(&before, &after, "this host")
            .into_iter()
            .map(|n| n.message)
            .collect();
        assert_eq!(
            notes,
            [
                "line 2: <cpu numaid=\"0\">: arch=\"x86_64\" from this host",
                "line 3: <pci busid=\"0000:01:00.0\">: class=\"0x030000\" (file: \"0x030200\") from this host",
                "line 3: <pci busid=\"0000:01:00.0\">: added <gpu dev=\"0\"> holding <nvlink count=\"18\"> from this host",
                "line 4: <pci busid=\"0000:09:00.0\" class=\"0x060400\"> is dropped: no GPU or network device NCCL uses is below it (NCCL trims it)",
            ]
        );
    }
}
