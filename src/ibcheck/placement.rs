//! Placement checks (diagnostics.md §A.2 IB08, IB21-IB25): each adapter's PCIe link against its
//! maximum and its ports' rate, NUMA and NCCL's path type between GPUs and their network
//! devices, ACS on the bridges between them, GPUDirect RDMA readiness, the memory lock limit.

use super::{Check, Placement, VerbsView, Verdict};
use crate::ib::sysfs::IbHost;
use crate::topo::detect::Inventory;
use crate::topo::detect::pci::gts;
use crate::topo::detect::sysfs::Root;
use crate::topo::diagnose::{diagnose, diagnose_host, pair_busids};
use crate::topo::{NodeRef, NodeType, System};

/// Share of the port rate below which a PCIe link keeps the port from line rate (diagnostics.md
/// §A.2 IB08).
const PCIE_FLOOR: f64 = 0.9;

/// Placement rows and checks.
pub(super) fn check(
    host: &IbHost,
    inv: &Inventory,
    sys: Option<&System>,
    verbs: &VerbsView,
    root: &Root,
) -> (Vec<Placement>, Vec<Check>) {
    let mut out = Vec::new();
    let hca_bus: Vec<(&str, &str)> = host
        .hcas
        .iter()
        .filter_map(|h| h.pci_busid.as_deref().map(|b| (h.name.as_str(), b)))
        .collect();
    // The adapter's PCIe link: the topology rules, then bandwidth against its ports' rate.
    for h in &host.hcas {
        let Some(d) = h.pci_busid.as_deref().and_then(|b| inv.pci_device(b)) else {
            continue;
        };
        let subject = format!("{} (PCI {})", h.name, d.busid);
        let link = crate::topo::diagnose::pcie_link(d);
        for f in &link {
            out.push(Check::from_finding("pcie-link", &subject, f));
        }
        let port_gbps: f64 = h
            .ports
            .iter()
            .filter(|p| p.base.active())
            .filter_map(|p| p.link_rate.as_ref().map(|r| r.gbps))
            .sum();
        let cur = d
            .current_link_speed
            .as_deref()
            .and_then(gts)
            .zip(d.current_link_width)
            .map(|(s, w)| (s, w, crate::ib::rate::pcie_gbps(f64::from(s), w)));
        let Some((s, w, bw)) = cur else {
            continue;
        };
        let ev = vec![format!(
            "current_link_speed = {}, current_link_width = {w}",
            d.current_link_speed.as_deref().unwrap_or("")
        )];
        if port_gbps > 0.0 && bw < port_gbps * PCIE_FLOOR {
            out.push(
                Check::found(
                    "pcie-bandwidth",
                    &subject,
                    Verdict::Error,
                    format!("its PCIe link ({s} GT/s x{w}, {bw:.0} Gb/s) cannot carry its ports' {port_gbps} Gb/s: the adapter cannot reach line rate"),
                    "fix the link training (slot, riser, BIOS PCIe generation) or move the adapter to a full-width slot of its generation",
                )
                .with(ev),
            );
        } else if link.is_empty() {
            out.push(
                Check::ok(
                    "pcie-link",
                    &subject,
                    format!(
                        "PCIe {s} GT/s x{w} ({bw:.0} Gb/s){}",
                        if port_gbps > 0.0 {
                            format!(" for {port_gbps} Gb/s of ports")
                        } else {
                            String::new()
                        }
                    ),
                )
                .with(ev),
            );
        }
    }
    // Whole-host topology rules, kept where they concern an adapter.
    let findings = match sys {
        Some(s) => diagnose(s),
        None => diagnose_host(inv),
    };
    for f in findings
        .iter()
        .filter(|f| matches!(f.code, "acs" | "numa" | "no-gdr" | "vm-flat-pci"))
    {
        let about: Vec<&str> = hca_bus
            .iter()
            .filter(|(_, b)| f.about.iter().any(|a| a == b))
            .map(|(n, _)| *n)
            .collect();
        if about.is_empty() && f.code != "vm-flat-pci" {
            continue;
        }
        let subject = if about.is_empty() {
            "host".to_string()
        } else {
            about.join(", ")
        };
        out.push(Check::from_finding("placement", &subject, f));
    }
    // Pairs with the adapters examined (`--hca` may leave some out).
    let placement: Vec<Placement> = sys
        .map(|s| rows(s, inv))
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            host.hcas
                .iter()
                .any(|h| p.net.split(':').next() == Some(h.name.as_str()))
        })
        .collect();
    if sys.is_none() {
        out.push(Check::found(
            "gdr",
            "host",
            Verdict::Note,
            "no GPU here: GPU placement and GPUDirect RDMA are not checked",
            "",
        ));
    } else {
        for p in &placement {
            out.push(Check::ok(
                "placement",
                &format!("{} - {}", p.gpu, p.net),
                format!(
                    "path {}{}, NUMA {} / {}",
                    p.path,
                    if p.gdr {
                        ", GPUDirect RDMA"
                    } else {
                        ", no GPUDirect RDMA (host staging)"
                    },
                    p.numa.0.map_or("?".into(), |n| n.to_string()),
                    p.numa.1.map_or("?".into(), |n| n.to_string())
                ),
            ));
        }
        out.push(gdr_ready(root, verbs, placement.iter().any(|p| p.gdr)));
    }
    (placement, out)
}

fn rows(sys: &System, inv: &Inventory) -> Vec<Placement> {
    let mut v = Vec::new();
    for g in 0..sys.count(NodeType::Gpu) {
        let Some(n) = sys.local_net(g, 0) else {
            continue;
        };
        let gnode = &sys.nodes(NodeType::Gpu)[g];
        let net = sys.nodes(NodeType::Net)[n].net();
        let path = sys
            .path(
                NodeRef::new(NodeType::Gpu, g),
                NodeRef::new(NodeType::Net, n),
            )
            .map_or("?", |p| p.ty.as_str());
        let busids = pair_busids(sys, g, n);
        let numa = |b: Option<&String>| b.and_then(|b| inv.pci_device(b)).and_then(|d| d.numa_node);
        v.push(Placement {
            gpu: format!(
                "GPU{} {}",
                gnode.gpu().map_or(g as i32, |x| x.dev),
                gnode.busid.as_deref().unwrap_or("?")
            ),
            net: net.map_or_else(|| format!("NET{n}"), |x| format!("{}:{}", x.name, x.port)),
            path: path.to_string(),
            gdr: sys.gdr(g, n),
            numa: (numa(busids.first()), numa(busids.get(1))),
        });
    }
    v
}

/// GPUDirect RDMA readiness (NCCL src/transport/net_ib/gdr.cc: nvidia-peermem's module or
/// memory-peers files; else DMA-BUF: kernel 5.12+, NVIDIA's open kernel modules, and
/// `ibv_reg_dmabuf_mr` in libibverbs).
fn gdr_ready(root: &Root, verbs: &VerbsView, wanted: bool) -> Check {
    let peermem = [
        "/sys/kernel/mm/memory_peers/nv_mem/version",
        "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        "/sys/module/nvidia_peermem/version",
    ]
    .into_iter()
    .find(|p| root.read(p).is_some() || root.at(p).exists());
    if let Some(p) = peermem {
        return Check::ok("gdr", "host", "GPUDirect RDMA through nvidia-peermem")
            .with([format!("{p} present")]);
    }
    let kernel = root.read("/proc/sys/kernel/osrelease");
    let kernel_ok = kernel.as_deref().and_then(|k| {
        let mut it = k.split(['.', '-']).map(|x| x.parse::<u32>().ok());
        Some((it.next()??, it.next()??))
    });
    let kernel_ok = kernel_ok.map(|v| v >= (5, 12));
    let driver = root.read("/proc/driver/nvidia/version");
    let open = driver.as_deref().map(|d| d.contains("Open Kernel Module"));
    let mut ev = vec![
        format!("kernel {}", kernel.as_deref().unwrap_or("unknown")),
        format!(
            "NVIDIA driver: {}",
            match open {
                Some(true) => "open kernel modules",
                Some(false) => "proprietary kernel modules",
                None => "unknown (/proc/driver/nvidia/version unreadable)",
            }
        ),
    ];
    ev.push(format!(
        "libibverbs ibv_reg_dmabuf_mr: {}",
        match verbs.dmabuf {
            Some(true) => "present",
            Some(false) => "absent",
            None => "unknown",
        }
    ));
    let severity = if wanted {
        Verdict::Error
    } else {
        Verdict::Warning
    };
    match (kernel_ok, open, verbs.dmabuf) {
        (Some(true), Some(true), Some(true)) => {
            Check::ok("gdr", "host", "GPUDirect RDMA through DMA-BUF (no nvidia-peermem needed)").with(ev)
        }
        (Some(true), Some(true), None) => Check::found(
            "gdr",
            "host",
            Verdict::Warning,
            "no nvidia-peermem; DMA-BUF looks possible (kernel and open driver) but libibverbs could not be asked for ibv_reg_dmabuf_mr",
            "install rdma-core 34 or later, or load nvidia-peermem",
        )
        .with(ev),
        _ => Check::found(
            "gdr",
            "host",
            severity,
            "no GPUDirect RDMA path: nvidia-peermem is not loaded and DMA-BUF is not available, so NCCL stages network traffic through host memory",
            "load nvidia-peermem (modprobe nvidia-peermem, needs DOCA/MLNX OFED), or use the NVIDIA open kernel modules 515+ with kernel 5.12+ and rdma-core 34+ for DMA-BUF",
        )
        .with(ev),
    }
}

/// The soft memory lock limit from `/proc/self/limits` (under the root): `Some(None)` for
/// unlimited, `None` when unreadable.
pub(super) fn memlock(root: &Root) -> Option<Option<u64>> {
    let text = root.read("/proc/self/limits")?;
    let line = text.lines().find(|l| l.starts_with("Max locked memory"))?;
    let soft = line["Max locked memory".len()..]
        .split_whitespace()
        .next()?;
    Some(if soft == "unlimited" {
        None
    } else {
        Some(soft.parse().ok()?)
    })
}

/// The memory lock check (IB25; nccl-tests#206: `ibv_reg_mr` fails with ENOMEM under a small
/// limit).
pub(super) fn memlock_check(limit: Option<Option<u64>>) -> Option<Check> {
    let limit = limit?;
    let ev = vec![format!(
        "/proc/self/limits Max locked memory = {}",
        limit.map_or("unlimited".into(), |b| b.to_string())
    )];
    Some(match limit {
        None => Check::ok("memlock", "host", "memory lock limit: unlimited").with(ev),
        Some(b) if b <= 8 << 20 => Check::found(
            "memlock",
            "host",
            Verdict::Error,
            format!("memory lock limit {} KiB: registering NCCL's buffers fails (ibv_reg_mr: Cannot allocate memory)", b >> 10),
            "set the limit to unlimited: ulimit -l unlimited, memlock in /etc/security/limits.conf, LimitMEMLOCK=infinity for services, --ulimit memlock=-1 for containers",
        )
        .with(ev),
        Some(b) if b < 64 << 30 => Check::found(
            "memlock",
            "host",
            Verdict::Warning,
            format!("memory lock limit {} MiB: large jobs may fail to register buffers", b >> 20),
            "set the limit to unlimited (ulimit -l unlimited)",
        )
        .with(ev),
        Some(b) => Check::ok("memlock", "host", format!("memory lock limit {} GiB", b >> 30)).with(ev),
    })
}
