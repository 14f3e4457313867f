//! NCCL's bandwidth constants and the link bandwidths derived from them, in GB/s (1e9 B/s),
//! as `f32` like NCCL so that searches round exactly as NCCL's do (NCCL 2.28 src/graph/topo.h,
//! src/graph/topo.cc; internals §2.5).

/// Local (same device) links (`LOC_BW`).
pub const LOC_BW: f32 = 5000.0;
/// NVLink per link, sm 60..69 (`SM60_NVLINK_BW`).
pub const SM60_NVLINK_BW: f32 = 18.0;
/// NVLink per link, sm 70..79 (`SM70_NVLINK_BW`).
pub const SM70_NVLINK_BW: f32 = 20.0;
/// NVLink per link, sm 80..89 except 86, and the fallback (`SM80_NVLINK_BW`).
pub const SM80_NVLINK_BW: f32 = 20.0;
/// NVLink per link, sm 86 (`SM86_NVLINK_BW`).
pub const SM86_NVLINK_BW: f32 = 12.0;
/// NVLink per link, sm 90..99 (`SM90_NVLINK_BW`).
pub const SM90_NVLINK_BW: f32 = 20.6;
/// NVLink per link, sm 100 and up (`SM100_NVLINK_BW`).
pub const SM100_NVLINK_BW: f32 = 40.1;
/// "PCIe Gen3 x16" reference used by the tuning thresholds (`PCI_BW`).
pub const PCI_BW: f32 = 12.0;
/// Inter-socket bandwidth, AMD x86 (`AMD_BW`).
pub const AMD_BW: f32 = 16.0;
/// Inter-socket bandwidth, Intel Broadwell and older (`BDW_QPI_BW`).
pub const BDW_QPI_BW: f32 = 6.0;
/// Inter-socket bandwidth, Intel Skylake (`SKL_QPI_BW`).
pub const SKL_QPI_BW: f32 = 10.0;
/// Inter-socket bandwidth, Intel Sapphire Rapids (`SRP_QPI_BW`).
pub const SRP_QPI_BW: f32 = 22.0;
/// Inter-socket bandwidth, Intel Emerald Rapids (`ERP_QPI_BW`).
pub const ERP_QPI_BW: f32 = 40.0;
/// Inter-socket bandwidth, Zhaoxin (`ZPI_BW`).
pub const ZPI_BW: f32 = 6.0;
/// Inter-socket bandwidth, Zhaoxin Yongfeng (`YONGFENG_ZPI_BW`).
pub const YONGFENG_ZPI_BW: f32 = 9.0;
/// Inter-socket bandwidth, POWER9 (`P9_BW`).
pub const P9_BW: f32 = 32.0;
/// Inter-socket bandwidth, ARM (`ARM_BW`).
pub const ARM_BW: f32 = 6.0;

/// Per-link NVLink bandwidth for a GPU of compute capability `sm` (major*10+minor), GB/s
/// (NCCL src/graph/topo.h `ncclTopoNVLinkBw`).
pub fn nvlink_bw(sm: u32) -> f32 {
    match sm {
        100.. => SM100_NVLINK_BW,
        90..=99 => SM90_NVLINK_BW,
        86 => SM86_NVLINK_BW,
        80..=89 => SM80_NVLINK_BW,
        70..=79 => SM70_NVLINK_BW,
        60..=69 => SM60_NVLINK_BW,
        _ => SM80_NVLINK_BW,
    }
}

/// Per-lane PCIe rate in units of 100 Mb/s for a sysfs `link_speed` string, by NCCL's prefix
/// match in NCCL's table order; unknown or empty strings give the Gen3 fallback 60 (NCCL
/// src/graph/topo.cc `kvDictPciGen`, src/graph/xml.h `kvConvertToInt`).
pub fn pci_lane_rate(link_speed: &str) -> u32 {
    const TABLE: [(&str, u32); 11] = [
        ("2.5 GT/s", 15),
        ("5 GT/s", 30),
        ("8 GT/s", 60),
        ("16 GT/s", 120),
        ("32 GT/s", 240),
        ("2.5 GT/s PCIe", 15),
        ("5.0 GT/s PCIe", 30),
        ("8.0 GT/s PCIe", 60),
        ("16.0 GT/s PCIe", 120),
        ("32.0 GT/s PCIe", 240),
        ("64.0 GT/s PCIe", 480),
    ];
    TABLE
        .iter()
        .find(|(k, _)| link_speed.starts_with(k))
        .map_or(60, |&(_, v)| v)
}

/// Bandwidth of a PCIe link in GB/s: `width * lane_rate / 80`, a width of 0 counting as 16
/// (NCCL src/graph/topo.cc `ncclTopoAddPci`). x16 Gen3 = 12, Gen4 = 24, Gen5 = 48.
pub fn pci_link_bw(link_speed: &str, width: u32) -> f32 {
    let width = if width == 0 { 16 } else { width };
    (f64::from(width) * f64::from(pci_lane_rate(link_speed)) / 80.0) as f32
}

/// Bandwidth of a network port in GB/s from its speed in Mb/s; a speed <= 0 counts as 10000
/// (NCCL src/graph/topo.cc `ncclTopoAddNet`).
pub fn net_bw(speed_mbps: i64) -> f32 {
    let mbps = if speed_mbps <= 0 { 10000 } else { speed_mbps };
    (mbps as f64 / 8000.0) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvlink_and_pci_match_nccl() {
        assert!((18.0 * nvlink_bw(90) - 370.8).abs() < 1e-3);
        assert_eq!(nvlink_bw(86), 12.0);
        assert_eq!(nvlink_bw(52), 20.0);
        assert_eq!(pci_link_bw("32.0 GT/s PCIe", 0), 48.0);
        assert_eq!(pci_link_bw("16.0 GT/s PCIe", 16), 24.0);
        assert_eq!(pci_link_bw("", 16), 12.0);
        assert_eq!(pci_link_bw("8 GT/s", 8), 6.0);
        assert_eq!(net_bw(10000), 1.25);
        assert_eq!(net_bw(-1), 1.25);
        assert_eq!(net_bw(400_000), 50.0);
    }
}
