//! The search's mutable state: the bandwidth left on every link, on every NET and the GPUs used
//! by the channel being built, with NCCL's bandwidth accounting along a path
//! (NCCL 2.28 src/graph/search.cc `followPath`, `ncclTopoFollowPath`).

use crate::graph::types::Graph;
use crate::topo::system::{CpuArch, CpuVendor, LinkId, NodeRef, Path};
use crate::topo::{LinkType, NodeType, PathType, System};

pub(crate) struct State<'a> {
    pub sys: &'a System,
    pub inter: bool,
    pub params: super::SearchParams,
    link_base: Vec<Vec<usize>>,
    link_bw: Vec<f32>,
    pub net_bw: Vec<f32>,
    pub used: Vec<u64>,
}

static NO_PATH: Path = Path {
    links: Vec::new(),
    bw: 0.0,
    ty: PathType::Dis,
};

/// NCCL's `SUB_ROUND`: subtract and round to 1/1000 to contain float drift.
fn sub_round(a: f32, b: f32) -> f32 {
    ((a - b) * 1000.0).round() / 1000.0
}

impl<'a> State<'a> {
    pub(super) fn new(sys: &'a System, inter: bool, params: super::SearchParams) -> State<'a> {
        let mut link_base = Vec::new();
        let mut link_bw = Vec::new();
        for ty in NodeType::ALL {
            let mut v = Vec::new();
            for n in sys.nodes(ty) {
                v.push(link_bw.len());
                link_bw.extend(n.links.iter().map(|l| l.bw));
            }
            link_base.push(v);
        }
        let net_bw = sys
            .nodes(NodeType::Net)
            .iter()
            .map(|n| n.net().map_or(0.0, |x| x.bw))
            .collect();
        State {
            sys,
            inter,
            params,
            link_base,
            link_bw,
            net_bw,
            used: vec![0; sys.count(NodeType::Gpu)],
        }
    }

    fn slot(&self, l: LinkId) -> usize {
        self.link_base[l.from.ty.index()][l.from.idx] + l.link
    }

    pub(super) fn path(&self, from: NodeRef, to: NodeRef) -> &'a Path {
        self.sys.path(from, to).unwrap_or(&NO_PATH)
    }

    fn rev_link(&self, from: NodeRef, to: NodeRef, ty: LinkType) -> Option<LinkId> {
        self.sys
            .node(to)
            .links
            .iter()
            .position(|l| l.rem == from && l.ty == ty)
            .map(|link| LinkId { from: to, link })
    }

    /// Takes `bw` off the first `max_steps` links of `path` from `start` (gives it back when
    /// negative); returns how many links had enough (NCCL `followPath`).
    fn follow(&mut self, path: &Path, start: NodeRef, max_steps: usize, bw: f32) -> usize {
        let sys = self.sys;
        let mut pci_bw = bw;
        for l in &path.links {
            let n = sys.node(sys.link(*l).rem);
            if let Some(c) = n.cpu()
                && path.ty == PathType::Phb
                && start.ty == NodeType::Gpu
                && c.arch == CpuArch::X86
                && c.vendor == CpuVendor::Intel
            {
                pci_bw = bw * 6.0 / 5.0;
            }
        }
        let mut node = start;
        for step in 0..max_steps {
            let lid = path.links[step];
            let link = *sys.link(lid);
            let fw = if link.ty == LinkType::Pci { pci_bw } else { bw };
            let mut rev = None;
            let mut rev_bw = 0.0f32;
            let rem = sys.node(link.rem);
            if rem.gpu().is_some_and(|g| g.sm < 80) && start.ty != NodeType::Gpu {
                rev = self.rev_link(node, link.rem, link.ty);
                rev_bw += fw / 8.0;
            }
            if rem.cpu().is_some_and(|c| c.arch == CpuArch::Power) && link.ty == LinkType::Nvl {
                rev = rev.or_else(|| self.rev_link(node, link.rem, link.ty));
                rev_bw += fw;
            }
            let s = self.slot(lid);
            let rev_short =
                rev_bw != 0.0 && rev.is_some_and(|r| self.link_bw[self.slot(r)] < rev_bw);
            if self.link_bw[s] < fw || rev_short {
                return step;
            }
            self.link_bw[s] = sub_round(self.link_bw[s], fw);
            if rev_bw != 0.0
                && let Some(r) = rev
            {
                let rs = self.slot(r);
                self.link_bw[rs] = sub_round(self.link_bw[rs], rev_bw);
            }
            node = link.rem;
        }
        max_steps
    }

    /// Moves a channel from `from` (none: start of the search) to node `to`, taking its
    /// bandwidth (`mult` = 1) or giving it back (`mult` = -1); `None` when the path's type is
    /// beyond the graph's limits or bandwidth is short (NCCL `ncclTopoFollowPath`).
    pub(super) fn follow_path(
        &mut self,
        g: &mut Graph,
        from: Option<NodeRef>,
        to: NodeRef,
        mult: f32,
    ) -> Option<NodeRef> {
        let Some(from) = from else { return Some(to) };
        let path = self.path(from, to);
        let rev_path = self.path(to, from);
        let intra = matches!(from.ty, NodeType::Gpu | NodeType::Nvs)
            && matches!(to.ty, NodeType::Gpu | NodeType::Nvs);
        let (bw, ty) = if intra {
            (g.bw_intra, g.type_intra)
        } else {
            (g.bw_inter, g.type_inter)
        };
        if path.ty >= PathType::Dis {
            return None;
        }
        if mult == 1.0 && path.ty > ty {
            return None;
        }
        if mult == 1.0 && g.pattern.is_tree() && rev_path.ty > ty {
            return None;
        }
        let bw = bw * mult;
        let n = path.links.len();
        let step = self.follow(path, from, n, bw);
        if step < n {
            self.follow(path, from, step, -bw);
            return None;
        }
        g.n_hops += (mult * n as f32) as i64;
        Some(to)
    }

    /// Index of the GPU owning `rank`.
    pub(super) fn gpu_of_rank(&self, rank: usize) -> usize {
        self.sys.gpu_of_rank(rank).unwrap_or(0)
    }

    /// The rank of GPU `g`.
    pub(super) fn rank(&self, g: usize) -> usize {
        self.sys.nodes(NodeType::Gpu)[g].gpu().map_or(g, |x| x.rank)
    }

    /// Index of the NET with id `id`.
    pub(super) fn net_index(&self, id: u64) -> usize {
        self.sys
            .nodes(NodeType::Net)
            .iter()
            .position(|n| n.id == id)
            .unwrap_or(0)
    }
}
