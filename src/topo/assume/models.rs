//! What a live host would tell NCCL about its devices, per product: GPU models (compute
//! capability, NVLinks and their fabric, PCIe link, C2C), NIC models (speed, network plugin,
//! GPUDirect RDMA) and CPU generations (what CPUID gives NCCL), with the PCI ids that name them.
//!
//! NVLink counts are what NVML reports per GPU (NCCL probes 12 links below sm 90, 18 from sm 90:
//! src/graph/xml.cc `ncclTopoGetXmlFromGpu`); NIC speeds are the port rates the IB plugin reads
//! (`ncclIbGetPhysProperties`), in Mb/s as NCCL's XML writes them. The C2C figures of Grace
//! systems are those a public GB300 NCCL dump shows (`<c2c bw="44712" count="5"/>`) and the
//! GH200 fixture's (`count="10"`).

use serde::Serialize;

/// How the GPUs' NVLinks are wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fabric {
    /// Every GPU's NVLinks go to NVSwitches (HGX/DGX boards, NVL racks): NCCL sees one NVS node.
    NvSwitch,
    /// GPUs bridged in pairs in bus order (0-1, 2-3, ...): H100 NVL, A100 PCIe with bridges.
    Pairs,
    /// No NVLink: PCIe only.
    None,
}

impl Fabric {
    /// The `--assume fabric=` words.
    pub const WORDS: [(&'static str, Fabric); 3] = [
        ("nvswitch", Fabric::NvSwitch),
        ("pairs", Fabric::Pairs),
        ("none", Fabric::None),
    ];

    /// The word for this fabric.
    pub fn word(self) -> &'static str {
        Fabric::WORDS
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("none", |(w, _)| w)
    }
}

/// A GPU product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GpuModel {
    /// The `--assume gpu=` word.
    pub key: &'static str,
    /// Product name.
    pub name: &'static str,
    /// PCI device ids (vendor 0x10de) of this product.
    pub device_ids: &'static [u16],
    /// Compute capability, major*10+minor (NCCL's `sm`).
    pub sm: u32,
    /// NVLinks per GPU NVML reports active when the fabric is there.
    pub nvlinks: u32,
    /// The usual fabric of the product.
    pub fabric: Fabric,
    /// PCIe link speed as sysfs writes `max_link_speed`.
    pub link_speed: &'static str,
    /// PCIe lanes.
    pub link_width: u32,
    /// C2C links to a Grace CPU: (per-link bandwidth in MB/s, link count), as NVML reports them.
    pub c2c: Option<(u32, u32)>,
    /// Whether the GPU sits on an arm64 Grace CPU.
    pub grace: bool,
}

const GEN3: &str = "8.0 GT/s PCIe";
const GEN4: &str = "16.0 GT/s PCIe";
const GEN5: &str = "32.0 GT/s PCIe";
const GEN6: &str = "64.0 GT/s PCIe";

const fn gpu(
    key: &'static str,
    name: &'static str,
    device_ids: &'static [u16],
    sm: u32,
    nvlinks: u32,
    fabric: Fabric,
    link_speed: &'static str,
) -> GpuModel {
    GpuModel {
        key,
        name,
        device_ids,
        sm,
        nvlinks,
        fabric,
        link_speed,
        link_width: 16,
        c2c: None,
        grace: false,
    }
}

/// The GPU products rnccl knows, most common cloud parts first.
pub const GPUS: &[GpuModel] = &[
    gpu(
        "h100-sxm",
        "H100 SXM5",
        &[0x2330, 0x2324, 0x2329],
        90,
        18,
        Fabric::NvSwitch,
        GEN5,
    ),
    gpu(
        "h200-sxm",
        "H200 SXM",
        &[0x2335],
        90,
        18,
        Fabric::NvSwitch,
        GEN5,
    ),
    gpu(
        "b200",
        "B200 (HGX)",
        &[0x2901],
        100,
        18,
        Fabric::NvSwitch,
        GEN5,
    ),
    gpu(
        "a100-sxm",
        "A100 SXM4",
        &[0x20b0, 0x20b2, 0x20b3, 0x20f3],
        80,
        12,
        Fabric::NvSwitch,
        GEN4,
    ),
    gpu(
        "h100-nvl",
        "H100 NVL",
        &[0x2321],
        90,
        12,
        Fabric::Pairs,
        GEN5,
    ),
    gpu(
        "h100-pcie",
        "H100 PCIe",
        &[0x2331],
        90,
        12,
        Fabric::None,
        GEN5,
    ),
    gpu(
        "a100-pcie",
        "A100 PCIe",
        &[0x20b5, 0x20f1],
        80,
        12,
        Fabric::None,
        GEN4,
    ),
    gpu(
        "v100-sxm",
        "V100 SXM2",
        &[0x1db1, 0x1db5],
        70,
        6,
        Fabric::None,
        GEN3,
    ),
    gpu("l40s", "L40S", &[0x26b9], 89, 0, Fabric::None, GEN4),
    gpu("l4", "L4", &[0x27b8], 89, 0, Fabric::None, GEN4),
    gpu("a10g", "A10G", &[0x2237], 86, 0, Fabric::None, GEN4),
    gpu("a10", "A10", &[0x2236], 86, 0, Fabric::None, GEN4),
    gpu("t4", "T4", &[0x1eb8], 75, 0, Fabric::None, GEN3),
    GpuModel {
        c2c: Some((44712, 10)),
        grace: true,
        ..gpu(
            "gh200",
            "GH200 (Grace Hopper)",
            &[0x2342],
            90,
            18,
            Fabric::None,
            GEN5,
        )
    },
    GpuModel {
        c2c: Some((44712, 5)),
        grace: true,
        ..gpu(
            "gb200",
            "B200 in GB200 NVL",
            &[0x2941],
            100,
            18,
            Fabric::NvSwitch,
            GEN6,
        )
    },
    GpuModel {
        c2c: Some((44712, 5)),
        grace: true,
        ..gpu(
            "gb300",
            "B300 in GB300 NVL",
            &[0x31c2],
            103,
            18,
            Fabric::NvSwitch,
            GEN6,
        )
    },
];

/// Which NCCL network plugin lists a NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NetPlugin {
    /// NCCL's InfiniBand/RoCE plugin (fuses ports, `NCCL_NET_MERGE_LEVEL`).
    Ib,
    /// aws-ofi-nccl (libfabric; EFA).
    Ofi,
    /// NCCL's socket plugin (no GPUDirect RDMA).
    Socket,
}

impl NetPlugin {
    /// The plugin's name as rnccl's detection names it.
    pub fn name(self) -> &'static str {
        match self {
            NetPlugin::Ib => "IB",
            NetPlugin::Ofi => "OFI",
            NetPlugin::Socket => "Socket",
        }
    }
}

/// A NIC product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NicModel {
    /// The `--assume nic=` word.
    pub key: &'static str,
    /// Product name.
    pub name: &'static str,
    /// PCI vendor id.
    pub vendor: u16,
    /// PCI device ids of this product.
    pub device_ids: &'static [u16],
    /// Port speed, Gb/s.
    pub speed_gbps: u32,
    /// The plugin that lists it.
    pub plugin: NetPlugin,
    /// GPUDirect RDMA (nvidia-peermem / DMA-BUF, or EFA's FI_HMEM).
    pub gdr: bool,
    /// `maxComms` the plugin reports.
    pub max_comms: i64,
    /// PCIe link speed as sysfs writes it.
    pub link_speed: &'static str,
}

const fn nic(
    key: &'static str,
    name: &'static str,
    device_ids: &'static [u16],
    speed_gbps: u32,
    link_speed: &'static str,
) -> NicModel {
    NicModel {
        key,
        name,
        vendor: 0x15b3,
        device_ids,
        speed_gbps,
        plugin: NetPlugin::Ib,
        gdr: true,
        max_comms: 131_072,
        link_speed,
    }
}

/// The NIC products rnccl knows.
pub const NICS: &[NicModel] = &[
    nic("cx7", "ConnectX-7 (NDR)", &[0x1021], 400, GEN5),
    nic("cx6", "ConnectX-6 (HDR)", &[0x101b, 0x101c], 200, GEN4),
    nic("cx6dx", "ConnectX-6 Dx", &[0x101d, 0x101e], 100, GEN4),
    nic(
        "cx5",
        "ConnectX-5 (EDR)",
        &[0x1017, 0x1018, 0x1019, 0x101a],
        100,
        GEN3,
    ),
    nic("cx8", "ConnectX-8 (XDR)", &[0x1023], 800, GEN6),
    nic("bf3", "BlueField-3", &[0xa2dc], 400, GEN5),
    NicModel {
        vendor: 0x1d0f,
        plugin: NetPlugin::Ofi,
        max_comms: 1024,
        ..nic(
            "efa",
            "AWS EFA",
            &[0xefa0, 0xefa1, 0xefa2, 0xefa3],
            100,
            GEN4,
        )
    },
    NicModel {
        vendor: 0,
        plugin: NetPlugin::Socket,
        gdr: false,
        max_comms: 65536,
        ..nic("eth", "Ethernet NIC (sockets)", &[], 100, GEN4)
    },
];

/// A CPU generation as NCCL reads it (`arch`, CPUID `vendor`, `familyid`, `modelid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CpuPreset {
    /// The `--assume cpu=` word.
    pub key: &'static str,
    /// Product line.
    pub name: &'static str,
    /// `arch`.
    pub arch: &'static str,
    /// `vendor` (x86 only).
    pub vendor: Option<&'static str>,
    /// `familyid` and `modelid` (x86 only).
    pub family_model: Option<(u32, u32)>,
}

const fn intel(key: &'static str, name: &'static str, model: u32) -> CpuPreset {
    CpuPreset {
        key,
        name,
        arch: "x86_64",
        vendor: Some("GenuineIntel"),
        family_model: Some((6, model)),
    }
}

const fn amd(key: &'static str, name: &'static str, family: u32, model: u32) -> CpuPreset {
    CpuPreset {
        key,
        name,
        arch: "x86_64",
        vendor: Some("AuthenticAMD"),
        family_model: Some((family, model)),
    }
}

/// The CPU generations rnccl knows.
pub const CPUS: &[CpuPreset] = &[
    intel("spr", "Intel Sapphire Rapids", 143),
    intel("emr", "Intel Emerald Rapids", 207),
    intel("icx", "Intel Ice Lake", 106),
    intel("skx", "Intel Skylake/Cascade Lake", 85),
    amd("genoa", "AMD Genoa (Zen 4)", 25, 17),
    amd("milan", "AMD Milan (Zen 3)", 25, 1),
    amd("rome", "AMD Rome (Zen 2)", 23, 49),
    CpuPreset {
        key: "grace",
        name: "NVIDIA Grace",
        arch: "arm64",
        vendor: None,
        family_model: None,
    },
];

/// The model whose key is `key` (case-insensitive, `_` read as `-`).
pub fn find<'a, T>(table: &'a [T], key: &str, key_of: impl Fn(&T) -> &str) -> Option<&'a T> {
    let k = key.trim().to_ascii_lowercase().replace('_', "-");
    table.iter().find(|m| key_of(m) == k)
}

/// The GPU model with PCI device id `device` (vendor 0x10de).
pub fn gpu_by_id(device: u16) -> Option<&'static GpuModel> {
    GPUS.iter().find(|m| m.device_ids.contains(&device))
}

/// The NIC model with these PCI ids.
pub fn nic_by_id(vendor: u16, device: u16) -> Option<&'static NicModel> {
    NICS.iter()
        .find(|m| m.vendor == vendor && m.device_ids.contains(&device))
}

/// The keys of a table, for help and error messages.
pub fn keys<T>(table: &[T], key_of: impl Fn(&T) -> &str) -> String {
    table.iter().map(key_of).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_ids_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for g in GPUS {
            assert!(seen.insert(g.key), "{}", g.key);
            for id in g.device_ids {
                assert_eq!(gpu_by_id(*id).map(|m| m.key), Some(g.key));
            }
        }
        for n in NICS {
            assert!(seen.insert(n.key), "{}", n.key);
        }
        for c in CPUS {
            assert!(seen.insert(c.key), "{}", c.key);
        }
        assert_eq!(find(GPUS, "H100_SXM", |m| m.key).map(|m| m.sm), Some(90));
        assert_eq!(nic_by_id(0x1d0f, 0xefa0).map(|m| m.key), Some("efa"));
        assert_eq!(nic_by_id(0x15b3, 0x1021).map(|m| m.speed_gbps), Some(400));
        assert_eq!(Fabric::Pairs.word(), "pairs");
    }
}
