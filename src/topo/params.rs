//! The knobs that change how NCCL computes paths, read once from [`Config`].

use serde::Serialize;

use crate::config::Config;
use crate::topo::TopoError;
use crate::topo::detect::fusion::Fusion;
use crate::topo::kinds::PathType;

/// Knobs of the path computation (NCCL 2.28 src/graph/paths.cc).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TopoParams {
    /// Farthest path type over which GPUs use P2P: `NCCL_P2P_LEVEL` (name such as `PXB`, or
    /// NCCL's old numbers 0..5), or `LOC` when `NCCL_P2P_DISABLE=1`; `None` = NCCL's default
    /// (PXB, SYS on AMD with at most 2 GPUs).
    pub p2p_level: Option<PathType>,
    /// `NCCL_NVB_DISABLE`: no NVLink paths through an intermediate GPU.
    pub nvb_disable: bool,
    /// `NCCL_PXN_DISABLE`: no GPU→NIC paths through an NVLink-connected GPU.
    pub pxn_disable: bool,
    /// `NCCL_NET_GDR_LEVEL`: farthest GPU–NIC path type that uses GPUDirect RDMA; `None` = PXB.
    pub net_gdr_level: Option<PathType>,
    /// `NCCL_NETDEVS_POLICY`: how many of its closest NICs each GPU uses.
    pub netdevs: NetDevsPolicy,
    /// NIC fusion: `NCCL_NET_MERGE_LEVEL`, `NCCL_NET_FORCE_MERGE`, `NCCL_IB_MERGE_NICS`.
    pub fusion: Fusion,
}

/// `NCCL_NETDEVS_POLICY` (NCCL 2.28 src/graph/topo.cc `getNetDevsPolicyOnce`,
/// `ncclTopoGetLocalNet`): how many of its closest NETs a GPU spreads its channels over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum NetDevsPolicy {
    /// `AUTO` (default): the closest NETs shared out among the GPUs that are equally close to
    /// them, `ceil(nets / gpus)` each.
    #[default]
    Auto,
    /// `ALL`: every closest NET.
    All,
    /// `MAX:n`: at most `n` (n > 0) of the closest NETs; the search also tries at most `n`
    /// NETs per GPU beyond them (`ncclTopoSelectNets`).
    Max(usize),
}

impl NetDevsPolicy {
    /// Parses a value as NCCL does: `AUTO`, `ALL` or `MAX:<n>` with `n > 0` (`atoi`), any case.
    /// `None` for anything else (NCCL then falls back to AUTO; rnccl's registry refuses it).
    pub fn parse(v: &str) -> Option<NetDevsPolicy> {
        let v = v.trim();
        if v.eq_ignore_ascii_case("AUTO") {
            return Some(NetDevsPolicy::Auto);
        }
        if v.eq_ignore_ascii_case("ALL") {
            return Some(NetDevsPolicy::All);
        }
        let n = v.get(..4).filter(|p| p.eq_ignore_ascii_case("MAX:"))?;
        let digits: String = v[n.len()..]
            .trim_start()
            .chars()
            .enumerate()
            .take_while(|&(i, c)| c.is_ascii_digit() || (i == 0 && (c == '+' || c == '-')))
            .map(|(_, c)| c)
            .collect();
        match digits.parse::<i64>() {
            Ok(n) if n > 0 => Some(NetDevsPolicy::Max(n as usize)),
            _ => None,
        }
    }

    /// The NETs per GPU among `local` closest NETs shared by `gpus` equally close GPUs.
    pub fn nets_per_gpu(self, local: usize, gpus: usize) -> usize {
        match self {
            NetDevsPolicy::Auto => local.div_ceil(gpus.max(1)),
            NetDevsPolicy::All => local,
            NetDevsPolicy::Max(n) => n.min(local),
        }
    }
}

impl std::fmt::Display for NetDevsPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetDevsPolicy::Auto => f.write_str("AUTO"),
            NetDevsPolicy::All => f.write_str("ALL"),
            NetDevsPolicy::Max(n) => write!(f, "MAX:{n}"),
        }
    }
}

/// NCCL's old numeric levels (src/graph/paths.cc `levelsOldToNew`).
const OLD_LEVELS: [PathType; 6] = [
    PathType::Loc,
    PathType::Pix,
    PathType::Pxb,
    PathType::Phb,
    PathType::Sys,
    PathType::Sys,
];

impl TopoParams {
    /// Reads the knobs from `cfg`.
    ///
    /// Errors: [`TopoError::Config`] naming the knob when a value is not a level NCCL knows
    /// (NCCL would silently ignore it), or `NCCL_NETDEVS_POLICY` is not `AUTO`, `ALL` or
    /// `MAX:<n>` (NCCL would use AUTO).
    pub fn from_config(cfg: &Config) -> Result<TopoParams, TopoError> {
        let p2p_level = if cfg.flag("NCCL_P2P_DISABLE")? {
            Some(PathType::Loc)
        } else {
            level(cfg, "NCCL_P2P_LEVEL")?
        };
        Ok(TopoParams {
            p2p_level,
            nvb_disable: cfg.flag("NCCL_NVB_DISABLE")?,
            pxn_disable: cfg.flag("NCCL_PXN_DISABLE")?,
            net_gdr_level: level(cfg, "NCCL_NET_GDR_LEVEL")?,
            netdevs: match cfg.text("NCCL_NETDEVS_POLICY")? {
                None => NetDevsPolicy::Auto,
                Some(v) => NetDevsPolicy::parse(v).ok_or_else(|| {
                    TopoError::from(cfg.refuse(
                        "NCCL_NETDEVS_POLICY",
                        format!("{v:?} is not AUTO, ALL or MAX:<n>"),
                        "write AUTO, ALL or e.g. MAX:2".into(),
                    ))
                })?,
            },
            fusion: Fusion::from_config(cfg)?,
        })
    }
}

/// Parses a path level knob as NCCL's `ncclGetLevel`: an exact name `LOC`..`SYS`, or a number
/// (old style, values above 5 mean SYS).
fn level(cfg: &Config, name: &str) -> Result<Option<PathType>, TopoError> {
    let Some(v) = cfg.text(name)? else {
        return Ok(None);
    };
    if let Some(t) = PathType::from_name(v).filter(|&t| t <= PathType::Sys) {
        return Ok(Some(t));
    }
    if v.starts_with(|c: char| c.is_ascii_digit()) {
        let n = crate::config::c_strtoll(v).value;
        return Ok(Some(OLD_LEVELS[n.clamp(0, 5) as usize]));
    }
    Err(TopoError::from(cfg.refuse(
        name,
        format!("{v:?} is not a path type"),
        "use one of LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS (or NCCL's old numbers 0-5)".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_by_name_number_and_disable() {
        assert_eq!(
            TopoParams::from_config(&Config::from_pairs(&[]).unwrap()).unwrap(),
            TopoParams::default()
        );
        let p = TopoParams::from_config(
            &Config::from_pairs(&[("NCCL_P2P_LEVEL", "PHB"), ("NCCL_NET_GDR_LEVEL", "2")]).unwrap(),
        )
        .unwrap();
        assert_eq!(p.p2p_level, Some(PathType::Phb));
        assert_eq!(p.net_gdr_level, Some(PathType::Pxb));
        let p = TopoParams::from_config(
            &Config::from_pairs(&[("NCCL_P2P_LEVEL", "PHB"), ("NCCL_P2P_DISABLE", "1")]).unwrap(),
        )
        .unwrap();
        assert_eq!(p.p2p_level, Some(PathType::Loc));
        assert_eq!(
            TopoParams::from_config(&Config::from_pairs(&[("NCCL_P2P_LEVEL", "9")]).unwrap())
                .unwrap()
                .p2p_level,
            Some(PathType::Sys)
        );
        let e =
            TopoParams::from_config(&Config::from_pairs(&[("NCCL_P2P_LEVEL", "nvlink")]).unwrap())
                .unwrap_err()
                .to_string();
        assert!(e.contains("NCCL_P2P_LEVEL") && e.contains("nvlink"), "{e}");
    }

    #[test]
    fn netdevs_policy_as_nccl_reads_it() {
        for (v, want) in [
            ("auto", Some(NetDevsPolicy::Auto)),
            ("ALL", Some(NetDevsPolicy::All)),
            ("max:2", Some(NetDevsPolicy::Max(2))),
            ("MAX:3x", Some(NetDevsPolicy::Max(3))),
            ("MAX:0", None),
            ("MAX:", None),
            ("most", None),
        ] {
            assert_eq!(NetDevsPolicy::parse(v), want, "{v}");
        }
        assert_eq!(NetDevsPolicy::Auto.nets_per_gpu(4, 2), 2);
        assert_eq!(NetDevsPolicy::Auto.nets_per_gpu(1, 2), 1);
        assert_eq!(NetDevsPolicy::All.nets_per_gpu(4, 2), 4);
        assert_eq!(NetDevsPolicy::Max(3).nets_per_gpu(4, 2), 3);
        assert_eq!(NetDevsPolicy::Max(8).nets_per_gpu(4, 2), 4);
        let p = TopoParams::from_config(
            &Config::from_pairs(&[("NCCL_NETDEVS_POLICY", "MAX:2")]).unwrap(),
        )
        .unwrap();
        assert_eq!(p.netdevs, NetDevsPolicy::Max(2));
        assert!(
            TopoParams::from_config(
                &Config::from_pairs(&[("NCCL_NETDEVS_POLICY", "some")]).unwrap()
            )
            .is_err()
        );
    }
}
