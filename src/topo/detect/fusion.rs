//! NIC fusion: NCCL's IB plugin lets NCCL merge physical network devices into virtual ones
//! (NCCL 2.28 src/graph/topo.cc `ncclTopoMakeVNics`, `ncclTopoForceMerge`, `ncclTopoAutoMerge`,
//! `ncclTopoGetPath`, `ncclTopoGetVNicParent`, `ncclTopoWidenLinks`, `ncclTopoMakePciParent`;
//! src/transport/net_ib.cc `ncclIbMakeVDeviceInternal`). Groups come first from
//! `NCCL_NET_FORCE_MERGE`, then automatically: every device not yet placed takes along every
//! other one at most `NCCL_NET_MERGE_LEVEL` away (default PORT: the ports of one NIC), up to 4.
//! A group of two or more becomes a virtual device named `a+b`, its speed the sum, numbered after
//! the physical devices; the physical ones are then trimmed. `NCCL_IB_MERGE_NICS=0` refuses
//! groups. Only plugins with `makeVDevice` fuse (NCCL's IB plugin); NCCL skips fusion when it
//! writes `NCCL_TOPO_DUMP_FILE`, so dumps list physical devices.

use super::net::NetDev;
use crate::config::Config;
use crate::topo::TopoError;
use crate::topo::busid::{busid_to_u64, u64_to_busid};
use crate::topo::xml::XmlDoc;

/// NCCL's `NCCL_NET_MAX_DEVS_PER_NIC`.
const MAX_DEVS_PER_NIC: usize = 4;

/// NCCL's path levels for `NCCL_NET_MERGE_LEVEL` (`nicPathKvList`), with their `PATH_*` numbers
/// (PORT is `PATH_NVL`).
const LEVELS: [(&str, u8); 8] = [
    ("LOC", 0),
    ("PORT", 1),
    ("PIX", 4),
    ("PXB", 5),
    ("P2C", 6),
    ("PXN", 7),
    ("PHB", 8),
    ("SYS", 9),
];
const PATH_LOC: u8 = 0;
const PATH_PORT: u8 = 1;
const PATH_PIX: u8 = 4;
const PATH_PXB: u8 = 5;
const PATH_PHB: u8 = 8;
const PATH_SYS: u8 = 9;
const PATH_DIS: u8 = 11;

/// The fusion knobs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fusion {
    /// `NCCL_NET_MERGE_LEVEL` as NCCL's `PATH_*` number (default PORT = 1).
    pub level: u8,
    /// `NCCL_NET_FORCE_MERGE`: groups of device names (`name` or `name:port`).
    pub force: Vec<Vec<String>>,
    /// `NCCL_IB_MERGE_NICS` (default on): the IB plugin accepts groups of several devices.
    pub merge_nics: bool,
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion {
            level: PATH_PORT,
            force: Vec::new(),
            merge_nics: true,
        }
    }
}

impl Fusion {
    /// No fusion at all (what NCCL does while writing `NCCL_TOPO_DUMP_FILE`).
    pub fn none() -> Fusion {
        Fusion {
            level: PATH_LOC,
            force: Vec::new(),
            merge_nics: false,
        }
    }

    /// Reads `NCCL_NET_MERGE_LEVEL` (NCCL's `ncclTopoGetFusionEnv`: the first level name the value
    /// starts with), `NCCL_NET_FORCE_MERGE` and `NCCL_IB_MERGE_NICS`.
    ///
    /// Errors: [`TopoError::Config`] for a value the registry refuses.
    pub fn from_config(cfg: &Config) -> Result<Fusion, TopoError> {
        let level = match cfg.text("NCCL_NET_MERGE_LEVEL")? {
            Some(v) => LEVELS
                .iter()
                .find(|(k, _)| v.starts_with(k))
                .map_or(PATH_LOC, |&(_, l)| l),
            None => PATH_PORT,
        };
        let force = cfg
            .text("NCCL_NET_FORCE_MERGE")?
            .map(|v| {
                v.split(';')
                    .map(|g| {
                        g.split(',')
                            .map(|n| n.trim().to_string())
                            .filter(|n| !n.is_empty())
                            .collect::<Vec<_>>()
                    })
                    .filter(|g| !g.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Fusion {
            level,
            force,
            merge_nics: cfg.flag("NCCL_IB_MERGE_NICS")?,
        })
    }
}

/// The chain from `i` up to the root, `i` first.
fn chain(x: &XmlDoc, i: usize) -> Vec<usize> {
    let mut v = vec![i];
    let mut p = x.node(i).parent;
    while let Some(n) = p {
        v.push(n);
        if x.node(n).name == "system" {
            break;
        }
        p = x.node(n).parent;
    }
    v
}

/// NCCL `ncclTopoCheckPix`: every net's `<pci>` hangs directly under `common`.
fn check_pix(x: &XmlDoc, common: usize, nets: &[usize]) -> bool {
    if x.attr(common, "busid").is_none() {
        return false;
    }
    nets.iter().all(|&n| {
        let Some(nic) = x.node(n).parent.filter(|&p| x.node(p).name == "nic") else {
            return true;
        };
        match x.node(nic).parent {
            Some(pci) if x.node(pci).name == "pci" => x.node(pci).parent == Some(common),
            Some(_) => true,
            None => false,
        }
    })
}

/// NCCL `ncclTopoGetPath` over XML: the path level between `nets` and their closest common
/// ancestor (the first `<pci>` at or above it, or the element itself).
fn xml_path(x: &XmlDoc, nets: &[usize]) -> (u8, Option<usize>) {
    let first_pci = |mut c: usize| -> usize {
        let start = c;
        while x.node(c).name != "pci" {
            match x.node(c).parent {
                Some(p) if x.node(p).name != "system" => c = p,
                _ => return start,
            }
        }
        c
    };
    if nets.len() == 1 {
        return (PATH_LOC, Some(first_pci(nets[0])));
    }
    let mut stacks: Vec<Vec<usize>> = nets.iter().map(|&n| chain(x, n)).collect();
    let mut common = None;
    while let Some(&top) = stacks[0].last() {
        let same = stacks[1..].iter().all(|s| s.last() == Some(&top));
        if !same {
            let port = x.attr(top, "busid").is_some_and(|b| {
                stacks[1..].iter().all(|s| {
                    s.last().and_then(|&o| x.attr(o, "busid")).is_some_and(|o| {
                        o.len() == b.len()
                            && o[..o.len().saturating_sub(1)] == b[..b.len().saturating_sub(1)]
                    })
                })
            });
            if port {
                return (PATH_PORT, common.map(first_pci));
            }
            break;
        }
        common = Some(top);
        for s in &mut stacks {
            s.pop();
        }
    }
    let level = match common.map(|c| x.node(c).name.as_str()) {
        None => PATH_DIS,
        Some("system") => PATH_SYS,
        Some("cpu") => PATH_PHB,
        Some("nic") | Some("net") => PATH_PORT,
        Some(_) if check_pix(x, common.unwrap_or(0), nets) => PATH_PIX,
        Some(_) => PATH_PXB,
    };
    (level, common.map(first_pci))
}

/// NCCL `ncclTopoFindLinkWidthRec`: the lanes below `i` that lead to one of `nets`.
fn link_width_rec(x: &XmlDoc, i: usize, nets: &[usize]) -> (bool, i64) {
    let mine = if x.node(i).name == "pci" {
        x.attr(i, "link_width")
            .map_or(0, |w| crate::config::c_strtoll(w).value)
    } else {
        0
    };
    let mut found = nets.contains(&i);
    let mut total = 0;
    for &c in &x.node(i).children {
        let (f, w) = link_width_rec(x, c, nets);
        if f {
            found = true;
            total += w;
        }
    }
    let width = match (found, total) {
        (false, _) => 0,
        (true, 0) => mine,
        (true, t) if mine > 0 => mine.min(t),
        (true, t) => t,
    };
    (found, width)
}

/// NCCL `ncclTopoWidenLinks`: every `<pci>` between the nets and `parent` (and `parent` itself)
/// gets the lanes of all the nets' branches together.
fn widen_links(x: &mut XmlDoc, nets: &[usize], parent: usize) {
    let sum: i64 = x
        .node(parent)
        .children
        .clone()
        .into_iter()
        .map(|c| link_width_rec(x, c, nets))
        .filter(|(f, _)| *f)
        .map(|(_, w)| w)
        .sum();
    for &n in nets {
        let mut t = n;
        while t != parent {
            if x.node(t).name == "pci" {
                x.set_attr(t, "link_width", &sum.to_string());
            }
            match x.node(t).parent {
                Some(p) => t = p,
                None => break,
            }
        }
    }
    if x.node(parent).name == "pci" {
        x.set_attr(parent, "link_width", &sum.to_string());
    }
}

/// NCCL `ncclTopoGetVNicParent` and `ncclTopoMakePciParent`: where the virtual device hangs —
/// the common `<pci>` of the physical ones, or, when that is a PCI bridge or a CPU, a new
/// `<pci>` copied from the first device's, with the next free bus id.
fn vnic_parent(x: &mut XmlDoc, nets: &[usize]) -> Option<usize> {
    let (level, parent) = xml_path(x, nets);
    let parent = parent?;
    if matches!(level, PATH_PHB | PATH_PXB | PATH_PIX) {
        widen_links(x, nets, parent);
    }
    let bridge = match x.node(parent).name.as_str() {
        "pci" => x.attr(parent, "class") == Some("0x060400"),
        "cpu" => true,
        _ => false,
    };
    if !bridge {
        return Some(parent);
    }
    let nic_pci = x
        .node(nets[0])
        .parent
        .and_then(|nic| x.node(nic).parent)
        .filter(|&p| x.node(p).name == "pci")?;
    let mut id = busid_to_u64(x.attr(nic_pci, "busid").unwrap_or(""));
    for _ in 0..100 {
        id += 1;
        let busid = u64_to_busid(id);
        if x.find_tag_kv("pci", "busid", &busid).is_none() {
            let attrs = x.node(nic_pci).attrs.clone();
            let p = x.add(Some(parent), "pci", 0);
            for (k, v) in attrs {
                x.set_attr(p, &k, &v);
            }
            x.set_attr(p, "busid", &busid);
            return Some(p);
        }
    }
    None
}

/// Fuses the physical devices `nets` (devices 0..n of this rank's view `x`, already filled) as
/// NCCL's `ncclTopoMakeVNics` does and adds the virtual devices to `x` with `dev` from `n` on.
/// Returns the virtual devices made (empty when nothing fused).
///
/// Errors: [`TopoError::Unusable`] when an `NCCL_NET_FORCE_MERGE` group does not name existing
/// devices exactly (NCCL: "Only matched %d devices, %d requested"), has more than 4, or the
/// plugin refuses it.
pub(crate) fn make_vnics(
    x: &mut XmlDoc,
    nets: &[NetDev],
    fusion: &Fusion,
) -> Result<Vec<NetDev>, TopoError> {
    if nets.is_empty() || nets.iter().any(|n| n.plugin != "IB") {
        return Ok(Vec::new());
    }
    let phys: Vec<Option<usize>> = nets
        .iter()
        .map(|n| x.find_tag_kv("net", "name", &n.name))
        .collect();
    let n = nets.len();
    let mut placed = vec![false; n];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for g in &fusion.force {
        let devs: Vec<usize> = (0..n)
            .filter(|&d| {
                g.iter().any(|want| match want.split_once(':') {
                    Some((name, port)) => nets[d].name == name && port.parse() == Ok(nets[d].port),
                    None => nets[d].name == *want,
                })
            })
            .collect();
        if devs.len() != g.len() || devs.len() > MAX_DEVS_PER_NIC || !fusion.merge_nics {
            return Err(TopoError::Unusable(format!(
                "NCCL_NET_FORCE_MERGE group {}: {} of {} devices matched{} (NCCL fails initialisation: \"Only matched {} devices, {} requested\")",
                g.join(","),
                devs.len(),
                g.len(),
                if fusion.merge_nics {
                    ""
                } else {
                    ", and NCCL_IB_MERGE_NICS=0 refuses groups"
                },
                devs.len(),
                g.len()
            )));
        }
        for &d in &devs {
            placed[d] = true;
        }
        groups.push(devs);
    }
    let mut path = vec![vec![PATH_DIS; n]; n];
    for i in 0..n {
        for j in 0..n {
            if let (Some(a), Some(b)) = (phys[i], phys[j]) {
                path[i][j] = xml_path(x, &[a, b]).0;
            }
        }
    }
    let mut i = 0;
    while i < n {
        if placed[i] {
            i += 1;
            continue;
        }
        let mut g = vec![i];
        placed[i] = true;
        for j in 0..n {
            if g.len() == MAX_DEVS_PER_NIC {
                break;
            }
            if j != i && !placed[j] && path[i][j] <= fusion.level {
                g.push(j);
                placed[j] = true;
            }
        }
        if g.len() > 1 && !fusion.merge_nics {
            placed[i] = false;
            for &d in &g[1..] {
                placed[d] = false;
                path[i][d] = PATH_DIS;
                path[d][i] = PATH_DIS;
            }
            i = 0;
            continue;
        }
        groups.push(g);
        i += 1;
    }
    let mut made = Vec::new();
    for g in groups.into_iter().filter(|g| g.len() > 1) {
        let members: Vec<usize> = g.iter().filter_map(|&d| phys[d]).collect();
        for &m in &members {
            x.set_attr(m, "keep", "0");
        }
        let first = &nets[g[0]];
        let v = NetDev {
            name: g
                .iter()
                .map(|&d| nets[d].name.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            speed_mbps: g.iter().map(|&d| nets[d].speed_mbps).sum(),
            ..first.clone()
        };
        let Some(parent) = vnic_parent(x, &members) else {
            continue;
        };
        let nic = match x.sub(parent, "nic") {
            Some(nic) => nic,
            None => x.add(Some(parent), "nic", 0),
        };
        let node = x.add(Some(nic), "net", 0);
        x.set_attr(node, "name", &v.name);
        x.set_attr(node, "keep", "1");
        x.set_attr(node, "dev", &(n + made.len()).to_string());
        for (k, val) in [
            ("latency", "0".to_string()),
            ("speed", v.speed_mbps.to_string()),
            ("port", v.port.to_string()),
            ("guid", format!("0x{:x}", v.guid)),
            ("maxconn", v.max_comms.to_string()),
            ("gdr", u8::from(v.gdr).to_string()),
        ] {
            x.set_attr_if_unset(node, k, &val);
        }
        made.push(v);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topo::xml::read::{Schema, parse};
    use crate::topo::xml::write::to_string;

    fn dev(name: &str) -> NetDev {
        NetDev {
            name: name.into(),
            pci_path: None,
            is_pci: true,
            speed_mbps: 200_000,
            port: 1,
            guid: 7,
            max_comms: 131_072,
            gdr: true,
            plugin: "IB",
        }
    }

    const TWO_PORTS: &str = r#"<system version="1"><cpu numaid="0"><pci busid="0000:16:00.0" class="0x060400" link_width="16"><pci busid="0000:17:00.0" class="0x020700" link_width="16"><nic><net name="mlx5_0" dev="0"/></nic></pci><pci busid="0000:17:00.1" class="0x020700" link_width="16"><nic><net name="mlx5_1" dev="1"/></nic></pci></pci><pci busid="0000:18:00.0" class="0x020700" link_width="16"><nic><net name="mlx5_2" dev="2"/></nic></pci></cpu></system>"#;

    #[test]
    fn ports_of_one_nic_fuse_by_default() {
        let mut x = parse(TWO_PORTS, "t", Schema::Topology).unwrap().doc;
        let nets = [dev("mlx5_0"), dev("mlx5_1"), dev("mlx5_2")];
        let made = make_vnics(&mut x, &nets, &Fusion::default()).unwrap();
        assert_eq!(made.len(), 1);
        assert_eq!(
            (made[0].name.as_str(), made[0].speed_mbps),
            ("mlx5_0+mlx5_1", 400_000)
        );
        let out = to_string(&x);
        assert!(
            out.contains("<pci busid=\"0000:17:00.2\" class=\"0x020700\" link_width=\"16\">\n        <nic>\n          <net name=\"mlx5_0+mlx5_1\" keep=\"1\" dev=\"3\" latency=\"0\" speed=\"400000\""),
            "{out}"
        );
        assert!(
            out.contains("<net name=\"mlx5_0\" dev=\"0\" keep=\"0\"/>"),
            "{out}"
        );
    }

    #[test]
    fn levels_force_and_refusal() {
        let nets = [dev("mlx5_0"), dev("mlx5_1"), dev("mlx5_2")];
        let mut x = parse(TWO_PORTS, "t", Schema::Topology).unwrap().doc;
        let phb = Fusion {
            level: PATH_PHB,
            ..Fusion::default()
        };
        let made = make_vnics(&mut x, &nets, &phb).unwrap();
        assert_eq!(made[0].name, "mlx5_0+mlx5_1+mlx5_2");
        let mut x = parse(TWO_PORTS, "t", Schema::Topology).unwrap().doc;
        assert!(
            make_vnics(&mut x, &nets, &Fusion::none())
                .unwrap()
                .is_empty()
        );
        let mut x = parse(TWO_PORTS, "t", Schema::Topology).unwrap().doc;
        let force = Fusion {
            level: PATH_LOC,
            force: vec![vec!["mlx5_0".into(), "mlx5_2:1".into()]],
            merge_nics: true,
        };
        let made = make_vnics(&mut x, &nets, &force).unwrap();
        assert_eq!(made[0].name, "mlx5_0+mlx5_2");
        let mut x = parse(TWO_PORTS, "t", Schema::Topology).unwrap().doc;
        let bad = Fusion {
            force: vec![vec!["mlx5_0".into(), "mlx5_9".into()]],
            ..force
        };
        let e = make_vnics(&mut x, &nets, &bad).unwrap_err().to_string();
        assert!(e.contains("1 of 2 devices matched"), "{e}");
        let x = parse(TWO_PORTS, "t", Schema::Topology).unwrap().doc;
        let n0 = x.find_tag_kv("net", "name", "mlx5_0").unwrap();
        let n2 = x.find_tag_kv("net", "name", "mlx5_2").unwrap();
        let n1 = x.find_tag_kv("net", "name", "mlx5_1").unwrap();
        assert_eq!(xml_path(&x, &[n0, n1]).0, PATH_PORT);
        assert_eq!(xml_path(&x, &[n0, n2]).0, PATH_PHB);
        assert_eq!(xml_path(&x, &[n0, n0]).0, PATH_PORT);
    }
}
