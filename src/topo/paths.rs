//! Paths between nodes, as NCCL computes them (NCCL 2.28 src/graph/paths.cc): a breadth-first
//! search from every CPU, GPU, NET and NVSwitch node that keeps, for each node, the path toward
//! the base with the best bandwidth (then fewest hops), typed by the worst hop; then the
//! post-processing of `ncclTopoComputePaths` for a whole-node view: GPU pairs that may not use
//! P2P go through the CPU, C2C+PHB becomes P2C, GPU→NIC traffic relays through an
//! NVLink-connected GPU (PXN) where that GPU is closer to the NIC, and pairs without GPUDirect
//! RDMA go through the CPU. NVML's P2P status is not consulted (P2P counts as allowed when the
//! path type permits it).

use super::TopoError;
use super::bw::LOC_BW;
use super::kinds::{LinkType, NodeType, PathType};
use super::params::{NetDevsPolicy, TopoParams};
use super::system::build::Nodes;
use super::system::{CpuArch, CpuVendor, LinkId, NodeRef, Path, System};

/// The farthest path type over which two GPUs use P2P (NCCL's `ncclTopoCheckP2p`):
/// `NCCL_P2P_LEVEL` (LOC under `NCCL_P2P_DISABLE`), else PXB, or SYS on AMD x86 hosts with at
/// most two GPUs.
pub(crate) fn p2p_level(
    arch: CpuArch,
    vendor: CpuVendor,
    ngpus: usize,
    params: &TopoParams,
) -> PathType {
    let auto = if arch == CpuArch::X86 && vendor == CpuVendor::Amd && ngpus <= 2 {
        PathType::Sys
    } else {
        PathType::Pxb
    };
    params.p2p_level.unwrap_or(auto)
}

/// Computes every path of `nodes` (replacing any computed before).
///
/// Errors: [`TopoError::Unusable`] when a link has no link back (an `<nvlink>` or `<pcilink>`
/// given on one side only), as NCCL fails then.
pub(crate) fn compute(nodes: &mut Nodes, params: &TopoParams) -> Result<(), TopoError> {
    for v in nodes.iter_mut() {
        for n in v.iter_mut() {
            n.paths = Default::default();
        }
    }
    for ty in [NodeType::Cpu, NodeType::Gpu, NodeType::Net, NodeType::Nvs] {
        for i in 0..nodes[ty.index()].len() {
            set_paths(nodes, NodeRef::new(ty, i), params)?;
        }
    }
    let ngpus = nodes[NodeType::Gpu.index()].len();
    let (arch, vendor) = nodes[NodeType::Cpu.index()]
        .first()
        .and_then(|n| n.cpu())
        .map_or((CpuArch::Unknown, CpuVendor::Unknown), |c| {
            (c.arch, c.vendor)
        });
    let level = p2p_level(arch, vendor, ngpus, params);
    for g in 0..ngpus {
        for p in 0..ngpus {
            let ty = path_of(
                nodes,
                NodeRef::new(NodeType::Gpu, p),
                NodeRef::new(NodeType::Gpu, g),
            )
            .ty;
            if ty > level
                && let Some(cpu) = local_cpu(nodes, g)
            {
                add_inter_step(
                    nodes,
                    NodeRef::new(NodeType::Cpu, cpu),
                    NodeRef::new(NodeType::Gpu, p),
                    NodeRef::new(NodeType::Gpu, g),
                );
            }
        }
    }
    let nnets = nodes[NodeType::Net.index()].len();
    for n in 0..nnets {
        for g in 0..ngpus {
            let Some(c) = local_cpu(nodes, g) else {
                continue;
            };
            let gpu_cpu = path_of(nodes, gpu(g), cpu(c)).ty;
            let net_cpu = path_of(nodes, net(n), cpu(c)).ty;
            if merge_path_type(gpu_cpu, net_cpu) == PathType::P2c {
                for (a, b) in [(gpu(g), net(n)), (net(n), gpu(g))] {
                    if let Some(p) = path_mut(nodes, a, b) {
                        p.ty = p.ty.min(PathType::P2c);
                    }
                }
            }
        }
    }
    for n in 0..nnets {
        for g in 0..ngpus {
            if !params.pxn_disable
                && let Some(lg) = local_gpu(nodes, n, params.netdevs)
                && lg != g
            {
                let peer_net = path_of(nodes, gpu(lg), net(n)).clone();
                let peer_gpu = path_of(nodes, gpu(lg), gpu(g)).ty;
                let mine = path_of(nodes, gpu(g), net(n)).clone();
                let same_host = nodes[NodeType::Gpu.index()][lg].host()
                    == nodes[NodeType::Gpu.index()][g].host();
                if peer_net.ty <= PathType::P2c
                    && peer_gpu <= PathType::Nvl
                    && same_host
                    && (peer_net.bw > mine.bw || mine.ty > PathType::Pxn)
                {
                    add_inter_step(nodes, gpu(lg), gpu(g), net(n));
                }
            }
            if path_of(nodes, gpu(g), net(n)).ty < PathType::Phb
                && !gdr_ok(nodes, g, n, params)
                && let Some(c) = local_cpu(nodes, g)
            {
                add_inter_step(nodes, cpu(c), net(n), gpu(g));
                add_inter_step(nodes, cpu(c), gpu(g), net(n));
            }
        }
    }
    for n in 0..nnets {
        let lg = local_gpu(nodes, n, params.netdevs);
        if let super::system::NodeInfo::Net(x) = &mut nodes[NodeType::Net.index()][n].info {
            x.local_gpu = lg;
        }
    }
    Ok(())
}

fn gpu(i: usize) -> NodeRef {
    NodeRef::new(NodeType::Gpu, i)
}
fn net(i: usize) -> NodeRef {
    NodeRef::new(NodeType::Net, i)
}
fn cpu(i: usize) -> NodeRef {
    NodeRef::new(NodeType::Cpu, i)
}

static NO_PATH: Path = Path {
    links: Vec::new(),
    bw: 0.0,
    ty: PathType::Dis,
};

/// The path `from → to`, disconnected when none was set (NCCL leaves such paths unallocated).
fn path_of(nodes: &Nodes, from: NodeRef, to: NodeRef) -> &Path {
    nodes[from.ty.index()][from.idx].paths[to.ty.index()]
        .get(to.idx)
        .unwrap_or(&NO_PATH)
}

fn path_mut(nodes: &mut Nodes, from: NodeRef, to: NodeRef) -> Option<&mut Path> {
    nodes[from.ty.index()][from.idx].paths[to.ty.index()].get_mut(to.idx)
}

/// NCCL `ncclTopoSetPaths`: breadth-first from `base`, filling every node's path to `base`.
fn set_paths(nodes: &mut Nodes, base: NodeRef, params: &TopoParams) -> Result<(), TopoError> {
    let bt = base.ty.index();
    let nb = nodes[bt].len();
    let alloc = |nodes: &mut Nodes, r: NodeRef| {
        let n = &mut nodes[r.ty.index()][r.idx];
        if n.paths[bt].is_empty() {
            n.paths[bt] = vec![Path::disconnected(); nb];
        }
    };
    alloc(nodes, base);
    nodes[bt][base.idx].paths[bt][base.idx] = Path::local();
    let mut list = vec![base];
    while !list.is_empty() {
        let mut next: Vec<NodeRef> = Vec::new();
        for &node in &list {
            let path = nodes[node.ty.index()][node.idx].paths[bt][base.idx].clone();
            let links = nodes[node.ty.index()][node.idx].links.clone();
            for link in links {
                let rem = link.rem;
                alloc(nodes, rem);
                let bw = path.bw.min(link.bw);
                if node != base
                    && node.ty == NodeType::Gpu
                    && (params.nvb_disable
                        || link.ty != LinkType::Nvl
                        || rem.ty != NodeType::Gpu
                        || path.hops() > 1)
                {
                    continue;
                }
                let rem_path = &nodes[rem.ty.index()][rem.idx].paths[bt][base.idx];
                if !((rem_path.bw == 0.0 || rem_path.hops() > path.hops()) && rem_path.bw < bw) {
                    continue;
                }
                let rev = nodes[rem.ty.index()][rem.idx]
                    .links
                    .iter()
                    .position(|l| l.rem == node && l.ty == link.ty)
                    .ok_or_else(|| {
                        TopoError::Unusable(format!(
                            "{} has a {} link to {} but none back; describe the link on both sides",
                            nodes[node.ty.index()][node.idx].label(),
                            link.ty.as_str(),
                            nodes[rem.ty.index()][rem.idx].label()
                        ))
                    })?;
                let mut links = Vec::with_capacity(path.links.len() + 1);
                links.push(LinkId {
                    from: rem,
                    link: rev,
                });
                links.extend_from_slice(&path.links);
                let mut ty = link.ty.path_type();
                if node.ty == NodeType::Pci && rem.ty == NodeType::Pci {
                    ty = PathType::Pxb;
                }
                if link.ty == LinkType::Pci && (node.ty == NodeType::Cpu || rem.ty == NodeType::Cpu)
                {
                    ty = PathType::Phb;
                }
                if node.ty == NodeType::Gpu
                    && path.ty == PathType::Nvl
                    && ty == PathType::Nvl
                    && links.len() > 1
                {
                    ty = PathType::Nvb;
                }
                nodes[rem.ty.index()][rem.idx].paths[bt][base.idx] = Path {
                    links,
                    bw,
                    ty: path.ty.max(ty),
                };
                if !next.contains(&rem) {
                    next.push(rem);
                }
            }
        }
        list = next;
    }
    Ok(())
}

/// NCCL `mergePathType`: C2C then PHB is P2C, otherwise the worse of the two.
fn merge_path_type(a: PathType, b: PathType) -> PathType {
    let (lo, hi) = (a.min(b), a.max(b));
    if hi == PathType::Phb && lo == PathType::C2c {
        PathType::P2c
    } else {
        hi
    }
}

/// NCCL `addInterStep`: the path `src → dst` becomes `src → via → dst`.
fn add_inter_step(nodes: &mut Nodes, via: NodeRef, src: NodeRef, dst: NodeRef) {
    let first = path_of(nodes, src, via).clone();
    let second = path_of(nodes, via, dst).clone();
    let mut links = first.links;
    links.extend_from_slice(&second.links);
    let ty = if via.ty == NodeType::Gpu {
        PathType::Pxn
    } else {
        merge_path_type(first.ty, second.ty)
    };
    if let Some(p) = path_mut(nodes, src, dst) {
        *p = Path {
            links,
            bw: first.bw.min(second.bw),
            ty,
        };
    }
}

/// The CPU with the fewest hops from GPU `g` (NCCL `ncclGetLocalCpu`).
fn local_cpu(nodes: &Nodes, g: usize) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (c, p) in nodes[NodeType::Gpu.index()][g].paths[NodeType::Cpu.index()]
        .iter()
        .enumerate()
    {
        if p.hops() > 0 && best.is_none_or(|(_, h)| p.hops() < h) {
            best = Some((c, p.hops()));
        }
    }
    best.map(|(c, _)| c)
}

/// NCCL `ncclTopoGetLocal`: the nodes of type `to` with the best bandwidth (then best type) from
/// `from`, and that type; `None` type when no path was set.
pub(crate) fn locals(nodes: &Nodes, from: NodeRef, to: NodeType) -> (Vec<usize>, Option<PathType>) {
    let paths = &nodes[from.ty.index()][from.idx].paths[to.index()];
    let (mut min_ty, mut max_bw) = (PathType::Dis, 0.0f32);
    let mut ty = None;
    let mut out = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        if p.bw > max_bw || (p.bw == max_bw && p.ty < min_ty) {
            max_bw = p.bw;
            min_ty = p.ty;
            ty = Some(min_ty);
            out.clear();
        }
        if p.bw == max_bw && p.ty == min_ty {
            out.push(i);
        }
    }
    (out, ty)
}

/// NCCL's `mirrorBits`: `val`'s bits below `pow2` in reverse order.
fn mirror_bits(val: usize, pow2: usize) -> usize {
    let (mut mirror, mut b, mut mb) = (0, 1, pow2 >> 1);
    while b < pow2 {
        if val & b != 0 {
            mirror |= mb;
        }
        b <<= 1;
        mb >>= 1;
    }
    mirror
}

/// The NET index GPU `g` uses on channel `channel` (NCCL `ncclTopoGetLocalNet`): among its
/// closest NETs, picked by its NVML index (bit-mirrored when the count is a power of two) plus
/// the channel modulo the NETs per GPU that `NCCL_NETDEVS_POLICY` allows.
pub(crate) fn local_net(
    nodes: &Nodes,
    g: usize,
    channel: usize,
    policy: NetDevsPolicy,
) -> Option<usize> {
    let (nets, _) = locals(nodes, gpu(g), NodeType::Net);
    if nets.is_empty() {
        return None;
    }
    let (gpus, _) = locals(nodes, net(nets[0]), NodeType::Gpu);
    let per_gpu = policy.nets_per_gpu(nets.len(), gpus.len());
    let dev = nodes[NodeType::Gpu.index()][g]
        .gpu()
        .map_or(0, |x| x.dev.max(0) as usize);
    let mut n = dev;
    if nets.len() & (nets.len() - 1) == 0 {
        n = mirror_bits(n, nets.len());
    }
    n += channel % per_gpu.max(1);
    Some(nets[n % nets.len()])
}

/// The GPU NCCL associates with NET `n` (NCCL `ncclTopoGetLocalGpu`).
pub(crate) fn local_gpu(nodes: &Nodes, n: usize, policy: NetDevsPolicy) -> Option<usize> {
    let (gpus, _) = locals(nodes, net(n), NodeType::Gpu);
    for c in 0..64 {
        for &g in &gpus {
            if local_net(nodes, g, c, policy) == Some(n) {
                return Some(g);
            }
        }
    }
    None
}

/// The GPU a PXN path from GPU `g` to NET `n` relays through (NCCL
/// `ncclTopoGetIntermediateRank`), or `g` itself for other paths.
pub(crate) fn intermediate_gpu(nodes: &Nodes, g: usize, n: usize) -> usize {
    let p = path_of(nodes, gpu(g), net(n));
    if p.ty != PathType::Pxn {
        return g;
    }
    p.links
        .iter()
        .map(|l| nodes[l.from.ty.index()][l.from.idx].links[l.link].rem)
        .find(|r| r.ty != NodeType::Nvs)
        .filter(|r| r.ty == NodeType::Gpu)
        .map_or(g, |r| r.idx)
}

/// Whether GPU `g` and NET `n` use GPUDirect RDMA for receives (NCCL `ncclTopoCheckGdr` with
/// read = 0): both support it and the GPU (or its PXN relay) is within `NCCL_NET_GDR_LEVEL`
/// (default PXB; P2C counts as C2C, `NCCL_NET_GDR_C2C`).
pub(crate) fn gdr_ok(nodes: &Nodes, g: usize, n: usize, params: &TopoParams) -> bool {
    let net_gdr = nodes[NodeType::Net.index()][n].net().is_some_and(|x| x.gdr);
    let gpu_gdr = nodes[NodeType::Gpu.index()][g].gpu().is_some_and(|x| x.gdr);
    if !net_gdr || !gpu_gdr {
        return false;
    }
    let relay = intermediate_gpu(nodes, g, n);
    let mut distance = path_of(nodes, gpu(relay), net(n)).ty;
    if distance == PathType::P2c {
        distance = PathType::C2c;
    }
    distance <= params.net_gdr_level.unwrap_or(PathType::Pxb)
}

impl System {
    /// Whether GPU `g` and NET `n` would use GPUDirect RDMA (see NCCL `ncclTopoCheckGdr`).
    pub fn gdr(&self, g: usize, n: usize) -> bool {
        gdr_ok(&self.nodes, g, n, &self.params)
    }

    /// The NET GPU `g` uses for channel `channel` when talking to the network.
    pub fn local_net(&self, g: usize, channel: usize) -> Option<usize> {
        local_net(&self.nodes, g, channel, self.params.netdevs)
    }

    /// NCCL's per-channel bandwidth limits for the search (`ncclTopoSearchInit`), GB/s:
    /// `max_bw` = best single path from a GPU to another GPU (to a NET when `inter`), 5000 for a
    /// lone GPU; `total_bw` = largest NVLink total or PCIe bandwidth of one GPU.
    pub fn search_bw(&self, inter: bool) -> (f32, f32) {
        let gpus = self.nodes(NodeType::Gpu);
        if !inter && gpus.len() == 1 {
            return (LOC_BW, LOC_BW);
        }
        let target = if inter { NodeType::Net } else { NodeType::Gpu };
        let (mut max_bw, mut total_bw) = (0.0f32, 0.0f32);
        for g in gpus {
            for p in &g.paths[target.index()] {
                if p.hops() > 0 {
                    max_bw = max_bw.max(p.bw);
                }
            }
            let (mut nvl, mut pci) = (0.0f32, 0.0f32);
            for l in &g.links {
                match l.ty {
                    LinkType::Nvl => nvl += l.bw,
                    LinkType::Pci => pci = l.bw,
                    _ => {}
                }
            }
            total_bw = total_bw.max(pci.max(nvl));
        }
        (max_bw, total_bw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_and_merge() {
        assert_eq!(mirror_bits(1, 8), 4);
        assert_eq!(mirror_bits(3, 8), 6);
        assert_eq!(mirror_bits(0, 1), 0);
        assert_eq!(merge_path_type(PathType::C2c, PathType::Phb), PathType::P2c);
        assert_eq!(merge_path_type(PathType::Pix, PathType::Sys), PathType::Sys);
    }
}
