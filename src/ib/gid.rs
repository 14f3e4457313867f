//! GIDs (the 128-bit port addresses of InfiniBand and RoCE) and the GID index NCCL picks for a
//! port: the rule of NCCL 2.30 src/transport/net_ib/connect.cc `ncclIbGetGidIndex` and
//! `ncclUpdateGidIndex`, over any [`GidTable`] (sysfs for `ibcheck`, the verbs query for the
//! transport), so both report the index NCCL would use.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Serialize, Serializer};

use crate::config::{Config, ConfigError};

/// One GID, in network byte order (`union ibv_gid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

/// The address family of a GID (`getGidAddrFamily`): IPv4 for IPv4-mapped GIDs
/// (`::ffff:a.b.c.d`, also the mapped multicast form `ff0e::ffff:a.b.c.d`), IPv6 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AddrFamily {
    /// `AF_INET`.
    #[serde(rename = "AF_INET")]
    Inet,
    /// `AF_INET6`.
    #[serde(rename = "AF_INET6")]
    Inet6,
}

impl Gid {
    /// Parses the sysfs form, eight colon-separated groups of four hex digits
    /// (`fe80:0000:0000:0000:0c42:a1ff:fe0b:1234`); the compressed IPv6 form (`::ffff:10.0.0.1`)
    /// is accepted too. `None` for anything else.
    pub fn parse(s: &str) -> Option<Gid> {
        let s = s.trim();
        let groups: Vec<&str> = s.split(':').collect();
        if groups.len() == 8 && groups.iter().all(|g| g.len() == 4) {
            let mut b = [0u8; 16];
            for (i, g) in groups.iter().enumerate() {
                let v = u16::from_str_radix(g, 16).ok()?;
                b[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
            }
            return Some(Gid(b));
        }
        s.parse::<Ipv6Addr>().ok().map(|a| Gid(a.octets()))
    }

    fn word(&self, i: usize) -> u32 {
        u32::from_be_bytes([
            self.0[4 * i],
            self.0[4 * i + 1],
            self.0[4 * i + 2],
            self.0[4 * i + 3],
        ])
    }

    /// All zero: an empty slot.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// Configured (`configuredGid`): neither all zero nor the bare `fe80::` prefix.
    pub fn is_configured(&self) -> bool {
        let trailer = self.word(1) | self.word(2) | self.word(3);
        !((self.word(0) | trailer) == 0 || (self.word(0) == 0xfe80_0000 && trailer == 0))
    }

    /// Link-local (`linkLocalGid`): `fe80::/64`. On RoCE such a GID is derived from the MAC and
    /// does not route.
    pub fn is_link_local(&self) -> bool {
        self.word(0) == 0xfe80_0000 && self.word(1) == 0
    }

    /// Usable for NCCL's automatic choice (`validGid`): configured and not link-local.
    pub fn is_valid(&self) -> bool {
        self.is_configured() && !self.is_link_local()
    }

    /// The address family (`getGidAddrFamily`).
    pub fn family(&self) -> AddrFamily {
        let mapped = (self.word(0) | self.word(1) | (self.word(2) ^ 0x0000_ffff)) == 0;
        let mapped_mc =
            self.word(0) == 0xff0e_0000 && (self.word(1) | (self.word(2) ^ 0xffff)) == 0;
        if mapped || mapped_mc {
            AddrFamily::Inet
        } else {
            AddrFamily::Inet6
        }
    }

    /// The IP address the GID carries: the IPv4 address of an IPv4-mapped GID, else the IPv6
    /// address.
    pub fn ip(&self) -> IpAddr {
        match self.family() {
            AddrFamily::Inet => IpAddr::V4(Ipv4Addr::new(
                self.0[12], self.0[13], self.0[14], self.0[15],
            )),
            AddrFamily::Inet6 => IpAddr::V6(Ipv6Addr::from(self.0)),
        }
    }

    /// The FLID of an InfiniBand GID (bytes 4..6, `ncclIbExtractFlid`): non-zero when the
    /// subnet's router gave the port a routable GID.
    pub fn flid(&self) -> u16 {
        u16::from_be_bytes([self.0[4], self.0[5]])
    }
}

impl fmt::Display for Gid {
    /// The sysfs form: eight groups of four hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for i in 0..8 {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", self.0[2 * i], self.0[2 * i + 1])?;
        }
        Ok(())
    }
}

impl Serialize for Gid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The RoCE version of a GID as sysfs `gid_attrs/types/<i>` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GidType {
    /// `IB/RoCE v1` (also an InfiniBand port's GIDs) or `RoCE v1`.
    #[serde(rename = "IB/RoCE v1")]
    V1,
    /// `RoCE v2` (routable over UDP/IP).
    #[serde(rename = "RoCE v2")]
    V2,
}

impl GidType {
    /// Reads a `types` file's content as NCCL does (`ncclIbRoceGetVersionNum`: a prefix match
    /// on `IB/RoCE v1`, `RoCE v1`, `RoCE v2`); `None` for anything else.
    pub fn parse(s: &str) -> Option<GidType> {
        let s = s.trim_start();
        if s.starts_with("IB/RoCE v1") || s.starts_with("RoCE v1") {
            Some(GidType::V1)
        } else if s.starts_with("RoCE v2") {
            Some(GidType::V2)
        } else {
            None
        }
    }

    /// The version number (1 or 2), as `NCCL_IB_ROCE_VERSION_NUM` counts.
    pub fn version(self) -> i64 {
        match self {
            GidType::V1 => 1,
            GidType::V2 => 2,
        }
    }

    /// The sysfs name.
    pub fn as_str(self) -> &'static str {
        match self {
            GidType::V1 => "IB/RoCE v1",
            GidType::V2 => "RoCE v2",
        }
    }
}

/// A port's GID table as NCCL reads it: `gid(i)` from the verbs query (or sysfs `gids/<i>`),
/// the RoCE version of entry `i` from sysfs `gid_attrs/types/<i>` (`None` when that file
/// cannot be read or names no version, which NCCL treats as "no match").
pub trait GidTable {
    /// `gid_tbl_len`.
    fn len(&self) -> usize;
    /// Entry `i` (all zero when empty or unreadable).
    fn gid(&self, i: usize) -> Gid;
    /// The RoCE version of entry `i`.
    fn gid_type(&self, i: usize) -> Option<GidType>;
    /// True when the table has no entry.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The knobs behind NCCL's GID choice, read once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GidPrefs {
    /// `NCCL_IB_GID_INDEX` (-1: automatic).
    pub gid_index: i64,
    /// `NCCL_IB_ROUTABLE_FLID_GID_INDEX` (1).
    pub routable_flid_index: i64,
    /// `NCCL_IB_ROCE_VERSION_NUM` (2).
    pub roce_version: i64,
    /// `NCCL_IB_ADDR_FAMILY` (AF_INET).
    pub family: AddrFamily,
    /// `NCCL_IB_ADDR_RANGE` as NCCL reads it: the network and its prefix length; `None` when
    /// unset or when NCCL ignores it (no `/`, an address not of `family`, a prefix too long).
    pub range: Option<(IpAddr, u8)>,
}

impl Default for GidPrefs {
    /// NCCL's defaults.
    fn default() -> GidPrefs {
        GidPrefs {
            gid_index: -1,
            routable_flid_index: 1,
            roce_version: 2,
            family: AddrFamily::Inet,
            range: None,
        }
    }
}

impl GidPrefs {
    /// Reads the knobs through the registry.
    ///
    /// Errors: a knob value the registry refuses ([`ConfigError::BadValue`]).
    pub fn from_config(cfg: &Config) -> Result<GidPrefs, ConfigError> {
        let family = match cfg.text("NCCL_IB_ADDR_FAMILY")? {
            Some("AF_INET6") => AddrFamily::Inet6,
            _ => AddrFamily::Inet,
        };
        Ok(GidPrefs {
            gid_index: cfg.int("NCCL_IB_GID_INDEX")?,
            routable_flid_index: cfg.int("NCCL_IB_ROUTABLE_FLID_GID_INDEX")?,
            roce_version: cfg.int("NCCL_IB_ROCE_VERSION_NUM")?,
            range: cfg
                .text("NCCL_IB_ADDR_RANGE")?
                .and_then(|r| parse_range(r, family)),
            family,
        })
    }
}

/// `NCCL_IB_ADDR_RANGE` as NCCL's `envIbAddrRange` reads it for `family`: `addr/len`, where an
/// address of the other family, a missing `/` or a length beyond 32 (IPv4) or 128 (IPv6) makes
/// NCCL ignore the whole setting (`None`).
pub fn parse_range(s: &str, family: AddrFamily) -> Option<(IpAddr, u8)> {
    let (addr, len) = s.trim().split_once('/')?;
    let addr: IpAddr = match family {
        AddrFamily::Inet => IpAddr::V4(addr.parse().ok()?),
        AddrFamily::Inet6 => IpAddr::V6(addr.parse().ok()?),
    };
    let digits: String = len.chars().take_while(char::is_ascii_digit).collect();
    let len: u32 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let max = if family == AddrFamily::Inet { 32 } else { 128 };
    (len <= max).then_some((addr, len as u8))
}

/// Whether `gid` lies in `range` (`matchGidAddrPrefix`; no range matches everything). IPv4
/// compares the last word of the GID, IPv6 the whole address.
pub fn in_range(gid: &Gid, range: Option<(IpAddr, u8)>) -> bool {
    let Some((net, len)) = range else {
        return true;
    };
    let (a, b): (u128, u128) = match net {
        IpAddr::V4(v4) => (
            u128::from(u32::from(v4)) << 96,
            u128::from(gid.word(3)) << 96,
        ),
        IpAddr::V6(v6) => (u128::from(v6), u128::from_be_bytes(gid.0)),
    };
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    a & mask == b & mask
}

/// The link layer of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LinkLayer {
    /// InfiniBand: LID routing, GID 0 unless a routable FLID GID exists.
    InfiniBand,
    /// Ethernet: RoCE, addressed by a GID from the table.
    Ethernet,
}

impl LinkLayer {
    /// Reads sysfs `link_layer` (`InfiniBand`, `Ethernet`).
    pub fn parse(s: &str) -> Option<LinkLayer> {
        match s.trim() {
            "InfiniBand" => Some(LinkLayer::InfiniBand),
            "Ethernet" => Some(LinkLayer::Ethernet),
            _ => None,
        }
    }

    /// NCCL's short name (`IB`, `RoCE`; `NCCL_IB_LLSTR`).
    pub fn nccl_name(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "IB",
            LinkLayer::Ethernet => "RoCE",
        }
    }
}

/// The GID index NCCL uses on a port (`ncclIbGetGidIndex`).
///
/// InfiniBand: `NCCL_IB_ROUTABLE_FLID_GID_INDEX` when that entry carries a non-zero FLID, else 0.
/// RoCE: `NCCL_IB_GID_INDEX` when set (≥ 0); otherwise start at 0 and walk entries 1.. with
/// `ncclUpdateGidIndex`: a candidate of the wanted family whose current pick is of the other
/// family wins at once (when in range); otherwise it must be of the wanted family, valid and in
/// range, and wins when its RoCE version is the wanted one and the current pick's version
/// differs or the current pick is not valid.
pub fn nccl_gid_index(link: LinkLayer, table: &dyn GidTable, prefs: &GidPrefs) -> usize {
    let len = table.len();
    if link == LinkLayer::InfiniBand {
        let r = prefs.routable_flid_index;
        if r >= 0 && (r as usize) < len && table.gid(r as usize).flid() != 0 {
            return r as usize;
        }
        return 0;
    }
    if prefs.gid_index >= 0 {
        return prefs.gid_index as usize;
    }
    let mut pick = 0usize;
    for cand in 1..len {
        let (g, c) = (table.gid(pick), table.gid(cand));
        let c_in = in_range(&c, prefs.range);
        if c.family() != g.family() && c.family() == prefs.family && c_in {
            pick = cand;
            continue;
        }
        if c.family() != prefs.family || !c.is_valid() || !c_in {
            continue;
        }
        let cur_v = table.gid_type(pick).map(GidType::version);
        let cand_v = table.gid_type(cand).map(GidType::version);
        if (cur_v != cand_v || !g.is_valid()) && cand_v == Some(prefs.roce_version) {
            pick = cand;
        }
    }
    pick
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T(Vec<(&'static str, Option<GidType>)>);
    impl GidTable for T {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn gid(&self, i: usize) -> Gid {
            self.0
                .get(i)
                .and_then(|(g, _)| Gid::parse(g))
                .unwrap_or_default()
        }
        fn gid_type(&self, i: usize) -> Option<GidType> {
            self.0.get(i).and_then(|(_, t)| *t)
        }
    }

    const LL: &str = "fe80:0000:0000:0000:0c42:a1ff:fe0b:1234";
    const V4: &str = "0000:0000:0000:0000:0000:ffff:0a00:0005";
    const V6: &str = "fd00:0000:0000:0001:0c42:a1ff:fe0b:1234";
    const ZERO: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

    fn roce() -> T {
        T(vec![
            (LL, Some(GidType::V1)),
            (LL, Some(GidType::V2)),
            (V4, Some(GidType::V1)),
            (V4, Some(GidType::V2)),
            (V6, Some(GidType::V1)),
            (V6, Some(GidType::V2)),
        ])
    }

    #[test]
    fn parses_classifies_and_prints() {
        let g = Gid::parse(V4).unwrap();
        assert_eq!(g.family(), AddrFamily::Inet);
        assert_eq!(g.ip().to_string(), "10.0.0.5");
        assert!(g.is_valid());
        assert_eq!(g.to_string(), V4);
        assert_eq!(Gid::parse("::ffff:10.0.0.5"), Some(g));
        let ll = Gid::parse(LL).unwrap();
        assert!(ll.is_link_local() && ll.is_configured() && !ll.is_valid());
        assert_eq!(ll.family(), AddrFamily::Inet6);
        assert!(!Gid::parse(ZERO).unwrap().is_configured());
        assert!(!Gid::parse("fe80::").unwrap().is_configured());
        assert_eq!(Gid::parse("nonsense"), None);
        assert_eq!(GidType::parse("RoCE v2\n"), Some(GidType::V2));
        assert_eq!(GidType::parse("IB/RoCE v1"), Some(GidType::V1));
        assert_eq!(GidType::parse(""), None);
    }

    #[test]
    fn roce_prefers_v2_ipv4_as_nccl() {
        let p = GidPrefs::default();
        assert_eq!(nccl_gid_index(LinkLayer::Ethernet, &roce(), &p), 3);
        let v1 = GidPrefs {
            roce_version: 1,
            ..GidPrefs::default()
        };
        assert_eq!(nccl_gid_index(LinkLayer::Ethernet, &roce(), &v1), 2);
        let six = GidPrefs {
            family: AddrFamily::Inet6,
            ..GidPrefs::default()
        };
        assert_eq!(nccl_gid_index(LinkLayer::Ethernet, &roce(), &six), 5);
        let forced = GidPrefs {
            gid_index: 1,
            ..GidPrefs::default()
        };
        assert_eq!(nccl_gid_index(LinkLayer::Ethernet, &roce(), &forced), 1);
    }

    #[test]
    fn no_candidate_falls_back_to_index_0_and_ranges_filter() {
        let only_ll = T(vec![(LL, Some(GidType::V1)), (LL, Some(GidType::V2))]);
        assert_eq!(
            nccl_gid_index(LinkLayer::Ethernet, &only_ll, &GidPrefs::default()),
            0
        );
        let out = GidPrefs {
            range: parse_range("192.168.0.0/16", AddrFamily::Inet),
            ..GidPrefs::default()
        };
        assert_eq!(nccl_gid_index(LinkLayer::Ethernet, &roce(), &out), 0);
        let inside = GidPrefs {
            range: parse_range("10.0.0.0/8", AddrFamily::Inet),
            ..GidPrefs::default()
        };
        assert_eq!(nccl_gid_index(LinkLayer::Ethernet, &roce(), &inside), 3);
        // Unreadable types (a container's sysfs): no candidate has the wanted version.
        let untyped = T(vec![(LL, None), (V4, None)]);
        assert_eq!(
            nccl_gid_index(LinkLayer::Ethernet, &untyped, &GidPrefs::default()),
            1
        );
        assert_eq!(parse_range("10.0.0.0", AddrFamily::Inet), None);
        assert_eq!(parse_range("10.0.0.0/33", AddrFamily::Inet), None);
        assert_eq!(parse_range("fd00::/64", AddrFamily::Inet), None);
        assert!(parse_range("fd00::/64", AddrFamily::Inet6).is_some());
    }

    #[test]
    fn infiniband_uses_a_routable_flid_gid_or_0() {
        let plain = T(vec![(LL, Some(GidType::V1)), (LL, Some(GidType::V1))]);
        assert_eq!(
            nccl_gid_index(LinkLayer::InfiniBand, &plain, &GidPrefs::default()),
            0
        );
        let flid = T(vec![
            (LL, Some(GidType::V1)),
            ("fe80:0000:0012:0000:0c42:a1ff:fe0b:1234", Some(GidType::V1)),
        ]);
        assert_eq!(
            nccl_gid_index(LinkLayer::InfiniBand, &flid, &GidPrefs::default()),
            1
        );
        let forced = GidPrefs {
            gid_index: 3,
            ..GidPrefs::default()
        };
        assert_eq!(nccl_gid_index(LinkLayer::InfiniBand, &plain, &forced), 0);
    }
}
