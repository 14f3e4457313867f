//! The host as detection read it: summary lines, network devices, and the raw PCI tree (shown
//! when there is no GPU, hence no NCCL topology).

use rnccl::topo::detect::Inventory;
use rnccl::topo::detect::nvml::GpuSource;
use rnccl::topo::detect::pci::PciDevice;

use crate::render::{Table, mask_to_list};

/// Where NCCL attaches a network device that is not itself a PCI function: NCCL 2.28
/// `ncclTopoFillNet` reads the subsystem of the device path (`virtio` for a virtio NIC even when
/// the virtio device sits on a PCI function) and attaches anything but `pci` to the first CPU.
fn placement(inv: &Inventory, n: &rnccl::topo::detect::net::NetDev) -> String {
    if n.is_pci {
        return String::new();
    }
    let attrs = inv.ifs.iter().find(|i| i.name == n.name);
    match attrs.map(|i| (&i.device_bus, &i.pci_busid)) {
        Some((Some(bus), Some(pci))) => format!(
            " ({bus} device on PCI {pci}: NCCL sees the {bus} device, not the PCI function, and attaches it to the first CPU)"
        ),
        Some((Some(bus), None)) => {
            format!(" ({bus} device, not PCI: NCCL attaches it to the first CPU)")
        }
        _ => " (virtual, no device: NCCL attaches it to the first CPU)".into(),
    }
}

/// Host, CPU, NUMA, GPU and network summary lines.
pub fn summary(inv: &Inventory) -> Vec<String> {
    let mut out = Vec::new();
    let mut host = Vec::new();
    if let Some(h) = &inv.host.hostname {
        host.push(h.clone());
    }
    if let Some(m) = &inv.cpu.model_name {
        host.push(m.clone());
    }
    if let Some(n) = inv.host.logical_cpus {
        host.push(format!("{n} logical CPUs"));
    }
    if let Some(b) = inv.host.memory_bytes {
        host.push(format!(
            "{:.1} GiB memory",
            b as f64 / f64::from(1u32 << 30)
        ));
    }
    out.push(format!(
        "Host: {}",
        if host.is_empty() {
            "-".into()
        } else {
            host.join(", ")
        }
    ));
    if let Some(v) = &inv.host.virtualization {
        out.push(format!("  virtual machine ({v})"));
    }
    let numa: Vec<String> = inv
        .numa
        .iter()
        .map(|n| {
            let cpus = n
                .cpulist
                .clone()
                .or_else(|| n.cpumap.as_deref().map(mask_to_list))
                .unwrap_or_else(|| "?".into());
            format!("node {} CPUs {cpus}", n.id)
        })
        .collect();
    out.push(format!(
        "NUMA: {}",
        if numa.is_empty() {
            "not reported".into()
        } else {
            numa.join("; ")
        }
    ));
    match (&inv.gpu_source, inv.gpus.is_empty()) {
        (GpuSource::Unavailable(why), _) => out.push(format!("GPUs: none ({why})")),
        (src, true) => out.push(format!("GPUs: none ({})", source_word(src))),
        (src, false) => {
            let names: Vec<String> = inv
                .gpus
                .iter()
                .map(|g| format!("{} {} sm {}", g.busid, g.name, g.sm))
                .collect();
            out.push(format!("GPUs ({}): {}", source_word(src), names.join("; ")));
        }
    }
    let plugin = inv
        .nets
        .first()
        .map_or("no network plugin device", |n| n.plugin);
    let nets: Vec<String> = inv
        .nets
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                "[{i}] {} port {} {} Mb/s{}",
                n.name,
                n.port,
                n.speed_mbps,
                placement(inv, n)
            )
        })
        .collect();
    out.push(format!(
        "Network devices NCCL would use ({plugin}): {}",
        if nets.is_empty() {
            "none".into()
        } else {
            nets.join(", ")
        }
    ));
    if !inv.ifs.is_empty() {
        out.push("Interfaces:".into());
        let mut t = Table::new(["name", "state", "speed", "mtu", "device"]);
        for i in &inv.ifs {
            t.row([
                i.name.clone(),
                i.operstate.clone().unwrap_or_else(|| "?".into()),
                i.speed_mbps
                    .filter(|&s| s > 0)
                    .map_or("?".into(), |s| format!("{s} Mb/s")),
                i.mtu.map_or("?".into(), |m| m.to_string()),
                match (&i.pci_busid, &i.device_bus) {
                    (Some(b), Some(bus)) if bus != "pci" => format!("{bus} on PCI {b}"),
                    (Some(b), _) => format!("PCI {b}"),
                    (None, Some(bus)) => bus.clone(),
                    (None, None) => "virtual".into(),
                },
            ]);
        }
        out.extend(t.lines(2));
    }
    for h in &inv.hcas {
        let ports: Vec<String> = h
            .ports
            .iter()
            .map(|p| {
                format!(
                    "port {} {} {} {}",
                    p.port,
                    p.state.as_deref().unwrap_or("?"),
                    p.rate.as_deref().unwrap_or("?"),
                    p.link_layer.as_deref().unwrap_or("?")
                )
            })
            .collect();
        out.push(format!(
            "RDMA {} (PCI {}): {}",
            h.name,
            h.pci_busid.as_deref().unwrap_or("?"),
            ports.join("; ")
        ));
    }
    out
}

fn source_word(s: &GpuSource) -> String {
    match s {
        GpuSource::Nvml(v) => format!("NVML, driver {v}"),
        GpuSource::Facts(f) => format!("captured NVML facts {f}"),
        GpuSource::Unavailable(w) => w.clone(),
    }
}

fn describe(d: &PciDevice) -> String {
    let class = match d.class.as_deref().unwrap_or("") {
        c if c.starts_with("0x0604") => "bridge",
        c if c.starts_with("0x0600") => "host bridge",
        c if c.starts_with("0x03") => "display/GPU",
        c if c.starts_with("0x02") => "network",
        c if c.starts_with("0x01") => "storage",
        c if c.starts_with("0x068") => "NVSwitch/bridge",
        _ => "device",
    };
    let link = match (&d.max_link_speed, d.max_link_width) {
        (Some(s), Some(w)) => format!(
            "  link {} x{} (now {} x{})",
            s,
            w,
            d.current_link_speed.as_deref().unwrap_or("?"),
            d.current_link_width.map_or("?".into(), |w| w.to_string())
        ),
        _ => String::new(),
    };
    format!(
        "{} {class} {}:{}{link}{}",
        d.busid,
        d.vendor.as_deref().unwrap_or("?"),
        d.device.as_deref().unwrap_or("?"),
        if d.acs_redirects() { "  ACS on" } else { "" }
    )
}

/// The PCI functions as a tree under their root complexes.
pub fn pci_tree(inv: &Inventory) -> Vec<String> {
    let mut out = vec!["PCI devices".to_string()];
    let roots: Vec<&PciDevice> = inv.pci.iter().filter(|d| d.parent.is_none()).collect();
    for (i, r) in roots.iter().enumerate() {
        rec(inv, r, "  ", i + 1 == roots.len(), &mut out);
    }
    out
}

fn rec(inv: &Inventory, d: &PciDevice, prefix: &str, last: bool, out: &mut Vec<String>) {
    out.push(format!(
        "{prefix}{}{}",
        if last { "└─ " } else { "├─ " },
        describe(d)
    ));
    let kids: Vec<&PciDevice> = inv
        .pci
        .iter()
        .filter(|c| c.parent.as_deref() == Some(d.busid.as_str()))
        .collect();
    let next = format!("{prefix}{}", if last { "   " } else { "│  " });
    for (i, k) in kids.iter().enumerate() {
        rec(inv, k, &next, i + 1 == kids.len(), out);
    }
}
