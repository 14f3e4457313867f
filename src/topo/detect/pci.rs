//! The PCI tree from sysfs: every PCI function under `/sys/devices/pci*` with its identity,
//! link speed and width (maximum and current), NUMA node, and its ACS control register when the
//! config space shows one (NCCL reads the same files, src/graph/xml.cc `ncclTopoGetXmlFromSys`).

use serde::Serialize;

use super::sysfs::{Root, basename, dirname};
use crate::topo::busid::is_bdf;

/// One PCI function.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PciDevice {
    /// Bus id as the directory names it (`0000:1b:00.0`).
    pub busid: String,
    /// Host sysfs path (`/sys/devices/pci0000:00/0000:00:01.0/0000:1b:00.0`).
    pub path: String,
    /// Bus id of the parent function (bridge or switch port), `None` under a root complex.
    pub parent: Option<String>,
    /// `class` (`0x030200`).
    pub class: Option<String>,
    /// `vendor` (`0x10de`).
    pub vendor: Option<String>,
    /// `device`.
    pub device: Option<String>,
    /// `subsystem_vendor`.
    pub subsystem_vendor: Option<String>,
    /// `subsystem_device`.
    pub subsystem_device: Option<String>,
    /// `max_link_speed` (`32.0 GT/s PCIe`).
    pub max_link_speed: Option<String>,
    /// `max_link_width` (lanes).
    pub max_link_width: Option<u32>,
    /// `current_link_speed`.
    pub current_link_speed: Option<String>,
    /// `current_link_width`.
    pub current_link_width: Option<u32>,
    /// `numa_node` (-1 when the platform does not say).
    pub numa_node: Option<i64>,
    /// `local_cpulist`.
    pub local_cpulist: Option<String>,
    /// A bridge's ACS control register (PCIe extended capability 0x000d, offset 6) when
    /// readable (root); `None` for other functions.
    pub acs_ctl: Option<u16>,
}

impl PciDevice {
    /// Whether this is a PCI-to-PCI bridge (switch port or root port), class 0x0604xx.
    pub fn is_bridge(&self) -> bool {
        self.class.as_deref().is_some_and(is_bridge_class)
    }

    /// Whether ACS redirects peer-to-peer requests on this bridge: Source Validation, P2P
    /// Request Redirect, P2P Completion Redirect or Upstream Forwarding enabled (bits 0, 2, 3,
    /// 4). NCCL's known trap (NVIDIA/nccl#2079): P2P between GPUs below it goes through the root
    /// complex, slowly or not at all.
    pub fn acs_redirects(&self) -> bool {
        self.acs_ctl.is_some_and(|v| v & 0b1_1101 != 0)
    }
}

/// Speed in GT/s of a sysfs link speed string (`32.0 GT/s PCIe`), as NCCL's `sscanf("%f GT/s")`.
pub fn gts(s: &str) -> Option<f32> {
    s.split_whitespace().next()?.parse().ok()
}

/// Walks the PCIe extended capability list (from byte 0x100 of the config space; PCIe base
/// spec §7.6) for ACS (id 0x000d) and returns its control register (bytes 6-7 of the
/// capability). `rd32(offset)` reads the little-endian word at a byte offset, `None` past
/// what can be read (only root reads beyond the first 256 bytes).
pub fn acs_control(rd32: impl Fn(usize) -> Option<u32>) -> Option<u16> {
    let mut off = 0x100usize;
    for _ in 0..64 {
        let h = rd32(off)?;
        if h == 0 || h == 0xffff_ffff {
            return None;
        }
        if h & 0xffff == 0x000d {
            return Some((rd32(off + 4)? >> 16) as u16);
        }
        let next = (h >> 20) as usize & 0xffc;
        if next < 0x100 {
            return None;
        }
        off = next;
    }
    None
}

fn read_device(root: &Root, path: &str) -> PciDevice {
    let a = |f: &str| root.read(&format!("{path}/{f}"));
    let num = |f: &str| a(f).and_then(|s| s.trim().parse::<u32>().ok());
    let parent_dir = basename(dirname(path));
    let class = a("class");
    PciDevice {
        busid: basename(path).to_string(),
        path: path.to_string(),
        parent: is_bdf(parent_dir).then(|| parent_dir.to_string()),
        acs_ctl: acs_ctl(root, path, class.as_deref()),
        class,
        vendor: a("vendor"),
        device: a("device"),
        subsystem_vendor: a("subsystem_vendor"),
        subsystem_device: a("subsystem_device"),
        max_link_speed: a("max_link_speed"),
        max_link_width: num("max_link_width"),
        current_link_speed: a("current_link_speed"),
        current_link_width: num("current_link_width"),
        numa_node: a("numa_node").and_then(|s| s.trim().parse().ok()),
        local_cpulist: a("local_cpulist"),
    }
}

/// A bridge's ACS control register from its `config` file, read 4 bytes at a time along the
/// capability chain: each word the kernel reads there is a config cycle (a trap to the
/// hypervisor in a VM, ~4 µs), so the whole 4096-byte file costs 4-6 ms per function (26 ms
/// for this CI VM's 6 functions, 43 ms for a one-H200 VM's 7, read whole as root on
/// 2026-12-04). Other functions are not read: ACS matters where it redirects peer-to-peer
/// traffic, on switch and root ports.
fn acs_ctl(root: &Root, path: &str, class: Option<&str>) -> Option<u16> {
    use std::os::unix::fs::FileExt;
    if !class.is_some_and(is_bridge_class) {
        return None;
    }
    let config = root.open(&format!("{path}/config"))?;
    acs_control(|o| {
        let mut b = [0u8; 4];
        config.read_exact_at(&mut b, o as u64).ok()?;
        Some(u32::from_le_bytes(b))
    })
}

/// Whether a sysfs `class` (`0x060400`) is a PCI-to-PCI bridge's.
fn is_bridge_class(class: &str) -> bool {
    class.starts_with("0x0604")
}

/// Every PCI function under the root complexes of `root`, depth first in bus id order.
pub fn read_pci(root: &Root) -> Vec<PciDevice> {
    let mut out = Vec::new();
    for top in root.list("/sys/devices") {
        if top.starts_with("pci") && top.contains(':') {
            walk(root, &format!("/sys/devices/{top}"), &mut out);
        }
    }
    out
}

fn walk(root: &Root, dir: &str, out: &mut Vec<PciDevice>) {
    for name in root.list(dir) {
        if !is_bdf(&name) {
            continue;
        }
        let path = format!("{dir}/{name}");
        if std::fs::symlink_metadata(root.at(&path)).is_ok_and(|m| m.is_dir()) {
            out.push(read_device(root, &path));
            walk(root, &path, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_acs_in_the_extended_capability_chain() {
        let mut c = vec![0u8; 4096];
        // AER at 0x100 -> next 0x148; ACS at 0x148, control = 0x001d.
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (1 << 16) | (0x148 << 20)).to_le_bytes());
        c[0x148..0x14c].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&0x001du16.to_le_bytes());
        let image = |c: &[u8]| {
            let c = c.to_vec();
            move |o: usize| {
                c.get(o..o + 4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
        };
        assert_eq!(acs_control(image(&c)), Some(0x1d));
        assert_eq!(acs_control(image(&c[..256])), None);
        assert_eq!(gts("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(gts(""), None);
    }
}
