//! Whether two GPUs of a host may reach each other's memory directly (NCCL's
//! `ncclTopoCheckP2p`, src/graph/paths.cc): the path between them must be no farther than the
//! P2P level — `NCCL_P2P_LEVEL`, LOC under `NCCL_P2P_DISABLE`, else PXB (SYS on AMD x86 hosts
//! with at most two GPUs). GPU connections beyond it are staged through host memory.

use super::busid::busid_to_u64;
use super::kinds::NodeType;
use super::paths::p2p_level;
use super::system::{NodeRef, System};

impl System {
    /// Whether the GPUs at PCI bus ids `a` and `b` (any case, e.g. `0000:07:00.0`) may use
    /// P2P; `None` when either GPU is not in this topology (the caller decides without it).
    pub fn p2p_allowed(&self, a: &str, b: &str) -> Option<bool> {
        let find = |bus: &str| {
            let id = busid_to_u64(bus);
            self.nodes(NodeType::Gpu)
                .iter()
                .position(|n| n.busid.as_deref().map(busid_to_u64) == Some(id))
        };
        let (ga, gb) = (find(a)?, find(b)?);
        if ga == gb {
            return Some(true);
        }
        let (arch, vendor, _) = self.cpu_type();
        let level = p2p_level(arch, vendor, self.count(NodeType::Gpu), &self.params);
        let path = self.path(
            NodeRef::new(NodeType::Gpu, ga),
            NodeRef::new(NodeType::Gpu, gb),
        )?;
        Some(path.ty <= level)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Source};
    use crate::topo::system::System;

    fn system(file: &str, pairs: &[(&str, &str)]) -> System {
        let mut c = Config::defaults();
        let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
        c.set("NCCL_TOPO_FILE", &path, Source::Env);
        for (k, v) in pairs {
            c.set(k, *v, Source::Env);
        }
        System::load(&c, std::path::Path::new("/nonexistent"))
            .expect("loads")
            .expect("a topology")
    }

    #[test]
    fn nvlink_pairs_use_p2p_unless_the_level_or_the_knob_says_no() {
        let (a, b) = ("0000:00:06.0", "0000:00:07.0");
        let h200 = "anchors/h200x2/topo.xml";
        assert_eq!(system(h200, &[]).p2p_allowed(a, b), Some(true));
        assert_eq!(system(h200, &[]).p2p_allowed(b, a), Some(true));
        assert_eq!(system(h200, &[]).p2p_allowed(a, a), Some(true));
        let upper = a.to_uppercase();
        assert_eq!(system(h200, &[]).p2p_allowed(&upper, b), Some(true));
        let nvl = [("NCCL_P2P_LEVEL", "NVL")];
        assert_eq!(system(h200, &nvl).p2p_allowed(a, b), Some(true));
        let loc = [("NCCL_P2P_LEVEL", "LOC")];
        assert_eq!(system(h200, &loc).p2p_allowed(a, b), Some(false));
        let off = [("NCCL_P2P_DISABLE", "1")];
        assert_eq!(system(h200, &off).p2p_allowed(a, b), Some(false));
        assert_eq!(system(h200, &[]).p2p_allowed(a, "0000:99:00.0"), None);
    }
}
