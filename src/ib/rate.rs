//! Link rates: a port's sysfs `rate` decoded into width and per-lane speed, the verbs' width
//! and speed codes (NCCL 2.30 src/transport/net_ib/init.cc `ibvSpeeds`/`ibvWidths`), what
//! the adapter could do at best (known NVIDIA/Mellanox parts by PCI device id), and what its
//! PCIe link can carry.

use serde::Serialize;

/// A port's rate as sysfs `rate` states it: `400 Gb/sec (4X NDR)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortRate {
    /// The total, Gb/s.
    pub gbps: f64,
    /// Lanes (`4X` → 4), when the string names them.
    pub width: Option<u32>,
    /// The per-lane speed name (`NDR`), when named (RoCE drivers map Ethernet speeds onto these
    /// names, or leave them out).
    pub speed: Option<String>,
}

impl PortRate {
    /// Decodes `"<G> Gb/sec (<W>X <SPEED>)"`; `None` when the leading number is missing.
    pub fn parse(s: &str) -> Option<PortRate> {
        let gbps: f64 = s.split_whitespace().next()?.parse().ok()?;
        let inner = s
            .split_once('(')
            .and_then(|(_, r)| r.split_once(')'))
            .map(|(i, _)| i.trim());
        let (width, speed) = match inner {
            Some(i) => {
                let mut parts = i.split_whitespace();
                let w = parts
                    .next()
                    .and_then(|w| w.strip_suffix(['X', 'x']))
                    .and_then(|w| w.parse().ok());
                (w, parts.next().map(str::to_string))
            }
            None => (None, None),
        };
        Some(PortRate { gbps, width, speed })
    }
}

/// What an adapter model can do at best per port.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Part {
    /// Marketing name (`ConnectX-7`).
    pub name: &'static str,
    /// Highest port rate, Gb/s.
    pub max_gbps: f64,
    /// Lanes of that rate (4 on every part listed).
    pub width: u32,
    /// The InfiniBand lane speed of that rate, for parts that speak InfiniBand.
    pub ib_speed: Option<&'static str>,
}

/// NVIDIA (Mellanox, PCI vendor 0x15b3) adapters by PCI device id, with their best port rate
/// (vendor_part_id in `ibv_devinfo` is the same number; product briefs of each family).
pub const PARTS: &[(u16, Part)] = &[
    (
        0x1013,
        Part {
            name: "ConnectX-4",
            max_gbps: 100.0,
            width: 4,
            ib_speed: Some("EDR"),
        },
    ),
    (
        0x1015,
        Part {
            name: "ConnectX-4 Lx",
            max_gbps: 50.0,
            width: 4,
            ib_speed: None,
        },
    ),
    (
        0x1017,
        Part {
            name: "ConnectX-5",
            max_gbps: 100.0,
            width: 4,
            ib_speed: Some("EDR"),
        },
    ),
    (
        0x1019,
        Part {
            name: "ConnectX-5 Ex",
            max_gbps: 100.0,
            width: 4,
            ib_speed: Some("EDR"),
        },
    ),
    (
        0x101b,
        Part {
            name: "ConnectX-6",
            max_gbps: 200.0,
            width: 4,
            ib_speed: Some("HDR"),
        },
    ),
    (
        0x101d,
        Part {
            name: "ConnectX-6 Dx",
            max_gbps: 200.0,
            width: 4,
            ib_speed: None,
        },
    ),
    (
        0x101f,
        Part {
            name: "ConnectX-6 Lx",
            max_gbps: 50.0,
            width: 4,
            ib_speed: None,
        },
    ),
    (
        0x1021,
        Part {
            name: "ConnectX-7",
            max_gbps: 400.0,
            width: 4,
            ib_speed: Some("NDR"),
        },
    ),
    (
        0x1023,
        Part {
            name: "ConnectX-8",
            max_gbps: 800.0,
            width: 4,
            ib_speed: Some("XDR"),
        },
    ),
    (
        0xa2d6,
        Part {
            name: "BlueField-2",
            max_gbps: 200.0,
            width: 4,
            ib_speed: Some("HDR"),
        },
    ),
    (
        0xa2dc,
        Part {
            name: "BlueField-3",
            max_gbps: 400.0,
            width: 4,
            ib_speed: Some("NDR"),
        },
    ),
];

/// The part with PCI `vendor`/`device` ids as sysfs writes them (`0x15b3`, `0x1021`).
pub fn part(vendor: Option<&str>, device: Option<&str>) -> Option<&'static Part> {
    let hex = |s: &str| u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
    if vendor.and_then(hex)? != 0x15b3 {
        return None;
    }
    let d = device.and_then(hex)?;
    PARTS.iter().find(|(id, _)| *id == d).map(|(_, p)| p)
}

/// Usable PCIe bandwidth in Gb/s of a link at `gts` GT/s per lane over `width` lanes, after
/// line coding: 8b/10b up to 5 GT/s (Gen1-2), 128b/130b for 8-32 GT/s (Gen3-5), FLIT mode
/// 242/256 at 64 GT/s (Gen6) (PCI Express Base Specification 6.0, §4.2 and §2.2). Gen4 x16 =
/// 252 Gb/s, Gen5 x16 = 504 Gb/s, before protocol overhead (TLP headers cost another 10-20 %).
pub fn pcie_gbps(gts: f64, width: u32) -> f64 {
    let coding = if gts <= 5.0 {
        8.0 / 10.0
    } else if gts <= 32.0 {
        128.0 / 130.0
    } else {
        242.0 / 256.0
    };
    gts * f64::from(width) * coding
}

/// A port's rate in Gb/s from `ibv_query_port`'s `active_width` and `active_speed` codes
/// (NCCL src/transport/net_ib/init.cc `ibvWidths`, `ibvSpeeds`); `None` for unknown codes.
pub fn verbs_rate_gbps(width: u8, speed: u8) -> Option<f64> {
    let lanes = match width {
        1 => 1.0,
        2 => 4.0,
        4 => 8.0,
        8 => 12.0,
        16 => 2.0,
        _ => return None,
    };
    let lane = match speed {
        1 => 2.5,
        2 => 5.0,
        4 | 8 => 10.0,
        16 => 14.0,
        32 => 25.0,
        64 => 50.0,
        128 => 100.0,
        _ => return None,
    };
    Some(lanes * lane)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_rates_parts_and_pcie() {
        let r = PortRate::parse("400 Gb/sec (4X NDR)").unwrap();
        assert_eq!(
            (r.gbps, r.width, r.speed.as_deref()),
            (400.0, Some(4), Some("NDR"))
        );
        let r = PortRate::parse("2.5 Gb/sec (1X SDR)").unwrap();
        assert_eq!((r.gbps, r.width), (2.5, Some(1)));
        let r = PortRate::parse("100 Gb/sec").unwrap();
        assert_eq!((r.width, r.speed), (None, None));
        assert_eq!(PortRate::parse("garbage"), None);
        assert_eq!(
            part(Some("0x15b3"), Some("0x1021")).map(|p| p.name),
            Some("ConnectX-7")
        );
        assert_eq!(part(Some("0x8086"), Some("0x1021")), None);
        assert!((pcie_gbps(16.0, 16) - 252.06).abs() < 0.1);
        assert!((pcie_gbps(32.0, 16) - 504.1).abs() < 0.1);
        assert!((pcie_gbps(5.0, 8) - 32.0).abs() < 1e-9);
        assert_eq!(verbs_rate_gbps(2, 128), Some(400.0));
        assert_eq!(verbs_rate_gbps(16, 64), Some(100.0));
        assert_eq!(verbs_rate_gbps(3, 64), None);
    }
}
