//! The structured knob syntaxes: device lists (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`) and
//! algorithm/protocol lists (`NCCL_ALGO`, `NCCL_PROTO`), parsed with NCCL's rules
//! (`src/misc/utils.cc:parseStringList`, `src/graph/tuning.cc:parseList`).

/// One entry of a device list: `name[:port[:rail[:plane]]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// Interface or HCA name (a prefix unless the list is exact).
    pub name: String,
    /// Port number; `None` matches any port.
    pub port: Option<u32>,
    /// Rail id (NCCL_IB_HCA third field).
    pub rail: Option<u32>,
    /// Plane id (NCCL_IB_HCA fourth field).
    pub plane: Option<u32>,
}

/// A parsed device list: optional leading `^` (exclude), then optional `=` (exact names; prefix
/// match otherwise), then comma-separated entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFilter {
    /// `^`: the listed devices are excluded, every other one is used.
    pub exclude: bool,
    /// `=`: names match exactly; otherwise an entry matches every name it prefixes.
    pub exact: bool,
    /// The entries, in order.
    pub entries: Vec<DeviceEntry>,
}

impl DeviceFilter {
    /// Parses a device list. Empty entries are skipped; numeric fields that do not parse are
    /// errors (NCCL reads them as -1).
    ///
    /// Errors: a message naming the bad field.
    pub fn parse(s: &str) -> Result<DeviceFilter, String> {
        let (exclude, rest) = match s.strip_prefix('^') {
            Some(r) => (true, r),
            None => (false, s),
        };
        let (exact, rest) = match rest.strip_prefix('=') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let mut entries = Vec::new();
        for item in rest.split(',').filter(|e| !e.is_empty()) {
            let mut fields = item.split(':');
            let name = fields.next().unwrap_or_default().to_string();
            let mut num = |what: &str| -> Result<Option<u32>, String> {
                match fields.next() {
                    None | Some("") => Ok(None),
                    Some(v) => v.parse::<u32>().map(Some).map_err(|_| {
                        format!("{what} '{v}' in device entry '{item}' is not a number")
                    }),
                }
            };
            let port = num("port")?;
            let rail = num("rail")?;
            let plane = num("plane")?;
            entries.push(DeviceEntry {
                name,
                port,
                rail,
                plane,
            });
        }
        Ok(DeviceFilter {
            exclude,
            exact,
            entries,
        })
    }

    /// True if device `name` (with `port`, when it has ports) passes the filter.
    pub fn matches(&self, name: &str, port: Option<u32>) -> bool {
        let hit = self.entries.iter().any(|e| {
            let name_ok = if self.exact {
                e.name == name
            } else {
                name.starts_with(&e.name)
            };
            let port_ok = match (e.port, port) {
                (Some(want), Some(have)) => want == have,
                _ => true,
            };
            name_ok && port_ok
        });
        hit != self.exclude
    }
}

/// NCCL's algorithms (`NCCL_ALGO` names), in NCCL's index order.
pub const ALGORITHMS: [&str; 7] = [
    "Tree",
    "Ring",
    "CollNetDirect",
    "CollNetChain",
    "NVLS",
    "NVLSTree",
    "PAT",
];
/// NCCL's protocols (`NCCL_PROTO` names), in NCCL's index order.
pub const PROTOCOLS: [&str; 3] = ["LL", "LL128", "Simple"];
/// The collective functions `NCCL_ALGO`/`NCCL_PROTO` entries may name (defined with the
/// functions themselves).
pub use crate::func::FUNCTIONS;

/// A parsed `NCCL_ALGO` or `NCCL_PROTO` value: `entry (';' entry)*`, `entry = [func ':'] ['^']
/// name (',' name)*`. Only the first entry may omit the function (it then applies to all five);
/// later entries override per function. Names are case-insensitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlgoProtoList {
    /// `enabled[f][i]`: whether name `i` (index into the name table) is allowed for function `f`
    /// (index into [`FUNCTIONS`]).
    pub enabled: [Vec<bool>; 5],
}

impl AlgoProtoList {
    /// Parses `s` against `names` ([`ALGORITHMS`] or [`PROTOCOLS`]).
    ///
    /// Errors: a message naming the unknown token, as NCCL's `ncclInvalidUsage`.
    pub fn parse(s: &str, names: &[&str]) -> Result<AlgoProtoList, String> {
        let all = vec![true; names.len()];
        let mut enabled: [Vec<bool>; 5] = std::array::from_fn(|_| all.clone());
        for (i, entry) in s.split(';').enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let (funcs, list): (Vec<usize>, &str) = match entry.split_once(':') {
                Some((f, l)) => {
                    let idx = FUNCTIONS
                        .iter()
                        .position(|n| n.eq_ignore_ascii_case(f.trim()))
                        .ok_or_else(|| {
                            format!(
                                "unknown function '{f}' (use one of {})",
                                FUNCTIONS.join(", ")
                            )
                        })?;
                    (vec![idx], l)
                }
                None if i == 0 => ((0..5).collect(), entry),
                None => {
                    return Err(format!(
                        "entry '{entry}' needs a 'Function:' prefix (only the first may omit it)"
                    ));
                }
            };
            let (negate, list) = match list.trim().strip_prefix('^') {
                Some(r) => (true, r),
                None => (false, list.trim()),
            };
            let mut mask = vec![negate; names.len()];
            for tok in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let idx = names
                    .iter()
                    .position(|n| n.eq_ignore_ascii_case(tok))
                    .ok_or_else(|| {
                        format!("unknown name '{tok}' (use one of {})", names.join(", "))
                    })?;
                mask[idx] = !negate;
            }
            for f in funcs {
                enabled[f] = mask.clone();
            }
        }
        Ok(AlgoProtoList { enabled })
    }

    /// Whether `name` is allowed for function `func` (names as in [`FUNCTIONS`] and the table).
    pub fn allows(&self, func: &str, name: &str, names: &[&str]) -> bool {
        let f = FUNCTIONS.iter().position(|n| n.eq_ignore_ascii_case(func));
        let i = names.iter().position(|n| n.eq_ignore_ascii_case(name));
        match (f, i) {
            (Some(f), Some(i)) => self.enabled[f][i],
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_filter_prefix_exact_exclude() {
        let f = DeviceFilter::parse("eth,ib").unwrap();
        assert!(f.matches("eth0", None) && f.matches("ib1", None) && !f.matches("lo", None));
        let f = DeviceFilter::parse("^docker,lo").unwrap();
        assert!(f.matches("eth0", None) && !f.matches("docker0", None) && !f.matches("lo", None));
        let f = DeviceFilter::parse("=eth0").unwrap();
        assert!(f.matches("eth0", None) && !f.matches("eth01", None));
        let f = DeviceFilter::parse("mlx5_0:1,mlx5_1").unwrap();
        assert!(
            f.matches("mlx5_0", Some(1))
                && !f.matches("mlx5_0", Some(2))
                && f.matches("mlx5_1", Some(2))
        );
        assert!(
            DeviceFilter::parse("mlx5_0:x")
                .unwrap_err()
                .contains("port 'x'")
        );
    }

    #[test]
    fn algo_lists() {
        let l = AlgoProtoList::parse("Ring", &ALGORITHMS).unwrap();
        assert!(
            l.allows("AllReduce", "ring", &ALGORITHMS)
                && !l.allows("AllReduce", "Tree", &ALGORITHMS)
        );
        let l = AlgoProtoList::parse("^tree;allreduce:tree", &ALGORITHMS).unwrap();
        assert!(
            !l.allows("Broadcast", "Tree", &ALGORITHMS)
                && l.allows("Broadcast", "Ring", &ALGORITHMS)
        );
        assert!(
            l.allows("AllReduce", "Tree", &ALGORITHMS)
                && !l.allows("AllReduce", "Ring", &ALGORITHMS)
        );
        assert!(
            AlgoProtoList::parse("Rnig", &ALGORITHMS)
                .unwrap_err()
                .contains("Rnig")
        );
        assert!(AlgoProtoList::parse("Ring;Tree", &ALGORITHMS).is_err());
    }
}
