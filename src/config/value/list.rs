//! Structured values: device filters, algorithm/protocol lists, addresses, CPU and integer lists,
//! NIC groups, name lists and paths.

use super::Reading;
use crate::config::finding::Finding;
use crate::config::registry::KnobSpec;
use crate::config::syntax::{ALGORITHMS, AlgoProtoList, DeviceFilter, FUNCTIONS, PROTOCOLS};

/// Most devices an IB device filter may list (`MAX_IB_DEVS`, `src/transport/net_ib/common.h`).
const MAX_IB_DEVS: usize = 32;

/// `NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`, `NCCL_OOB_NET_IFNAME` (`parseStringList`).
pub(super) fn read_device_list(spec: &KnobSpec, raw: &str) -> Reading {
    let sockets = spec.name == "NCCL_SOCKET_IFNAME";
    if sockets && raw.len() <= 1 {
        return Reading::new("auto", "NCCL chooses the interface").with(Finding::warning(
            "NCCL ignores NCCL_SOCKET_IFNAME values of one character or less and picks interfaces itself",
            "name an interface, e.g. eth0, or unset it",
        ));
    }
    let filter = match DeviceFilter::parse(raw) {
        Ok(f) => f,
        Err(e) => {
            return Reading::new(raw, "").with(Finding::error(
                format!("{e}: NCCL reads it with atoi, i.e. as 0"),
                "write a port number, e.g. mlx5_0:1",
            ));
        }
    };
    let mut findings = Vec::new();
    if filter.entries.is_empty() {
        findings.push(Finding::error(
            "the list names no device",
            "name at least one device",
        ));
    }
    for e in &filter.entries {
        if e.name != e.name.trim() {
            findings.push(Finding::error(
                format!(
                    "{:?} has spaces, which NCCL keeps as part of the name, so it matches nothing",
                    e.name
                ),
                "remove the spaces around the commas",
            ));
        }
        if sockets && e.port.is_some() {
            findings.push(Finding::warning(
                format!(
                    "{}: ports mean nothing for network interfaces; NCCL ignores them",
                    e.name
                ),
                "drop the :port",
            ));
        }
    }
    if !sockets && filter.entries.len() > MAX_IB_DEVS {
        findings.push(Finding::warning(
            format!("NCCL keeps only the first {MAX_IB_DEVS} entries"),
            "",
        ));
    }
    let names: Vec<String> = filter
        .entries
        .iter()
        .map(|e| match e.port {
            Some(p) => format!("{} port {p}", e.name),
            None => e.name.clone(),
        })
        .collect();
    let how = if filter.exact {
        "named exactly"
    } else {
        "whose name starts with"
    };
    let meaning = if filter.exclude {
        format!("every device except those {how} {}", names.join(", "))
    } else {
        format!("only devices {how} {}", names.join(", "))
    };
    let mut r = Reading::new(raw, meaning);
    r.findings = findings;
    r
}

/// `NCCL_ALGO` (`algos`) or `NCCL_PROTO`: which names each collective may use.
pub(super) fn read_algo_proto(raw: &str, algos: bool) -> Reading {
    let names: &[&str] = if algos { &ALGORITHMS } else { &PROTOCOLS };
    let list = match AlgoProtoList::parse(raw, names) {
        Ok(l) => l,
        Err(e) => {
            // The fix shows this knob's own names: NCCL_ALGO's algorithms, NCCL_PROTO's
            // protocols.
            let example = if algos {
                "'Ring' or '^Tree' or 'AllReduce:Tree;Broadcast:Ring'"
            } else {
                "'Simple' or '^LL128' or 'AllReduce:LL,Simple;Broadcast:Simple'"
            };
            return Reading::new("invalid", "").with(Finding::error(
                format!("{e}: NCCL fails communicator creation with ncclInvalidUsage"),
                format!("fix the list, e.g. {example} (names: {})", names.join(", ")),
            ));
        }
    };
    let per_func: Vec<String> = (0..FUNCTIONS.len())
        .map(|f| {
            let on: Vec<&str> = names
                .iter()
                .enumerate()
                .filter(|(i, _)| list.enabled[f][*i])
                .map(|(_, n)| *n)
                .collect();
            on.join(",")
        })
        .collect();
    let mut findings = Vec::new();
    let kind = if algos { "algorithm" } else { "protocol" };
    for (f, on) in per_func.iter().enumerate() {
        if on.is_empty() {
            findings.push(Finding::error(
                format!(
                    "{} is left with no {kind}: NCCL cannot run it",
                    FUNCTIONS[f]
                ),
                format!("allow at least one {kind} for {}", FUNCTIONS[f]),
            ));
        }
    }
    let all = names.join(",");
    let uniform = per_func.iter().all(|p| *p == per_func[0]);
    let (effective, meaning) = if uniform && per_func[0] == all {
        (all, format!("every {kind} allowed"))
    } else if uniform {
        let only = per_func[0].replace(',', ", ");
        (
            per_func[0].clone(),
            format!("only {only} for every collective"),
        )
    } else {
        let restricted: Vec<String> = FUNCTIONS
            .iter()
            .zip(&per_func)
            .filter(|(_, on)| **on != all)
            .map(|(f, on)| format!("{f}:{}", on.replace(',', ", ")))
            .collect();
        let rest = if restricted.len() < FUNCTIONS.len() {
            format!("; any {kind} for the other collectives")
        } else {
            String::new()
        };
        (
            restricted.join("; "),
            format!("{}{rest}", restricted.join("; ")),
        )
    };
    let mut r = Reading::new(effective, meaning);
    r.findings = findings;
    r
}

/// `host:port` or `[ipv6]:port` (`ncclSocketGetAddrFromString`).
pub(super) fn read_host_port(raw: &str) -> Reading {
    let (host, port) = if let Some(rest) = raw.strip_prefix('[') {
        match rest.split_once("]:") {
            Some((h, p)) => (h, Some(p)),
            None => (rest.trim_end_matches(']'), None),
        }
    } else {
        match raw.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => (raw, None),
            Some((h, p)) => (h, Some(p)),
            None => (raw, None),
        }
    };
    let hint = "write host:port, e.g. 10.0.0.1:29500, or [fe80::1]:29500 for IPv6";
    match port.map(str::parse::<u16>) {
        None => Reading::new(raw, "").with(Finding::error(
            "no port: NCCL needs host:port and fails to parse the address",
            hint,
        )),
        Some(Err(_)) => Reading::new(raw, "").with(Finding::error(
            format!(
                "port {:?} is not a number from 0 to 65535",
                port.unwrap_or_default()
            ),
            hint,
        )),
        Some(Ok(p)) if host.is_empty() => {
            Reading::new(raw, "").with(Finding::error(format!("no host before port {p}"), hint))
        }
        Some(Ok(p)) => Reading::new(raw, format!("host {host}, port {p}")),
    }
}

/// A CPU list such as `0-3,8`.
pub(super) fn read_cpu_list(raw: &str) -> Reading {
    let mut cpus = 0usize;
    for item in raw.split(',') {
        let ok = match item.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if a <= b => {
                    cpus += b - a + 1;
                    true
                }
                _ => false,
            },
            None => item.parse::<usize>().map(|_| cpus += 1).is_ok(),
        };
        if !ok {
            return Reading::new(raw, "").with(Finding::error(
                format!("{item:?} is not a CPU number or a range a-b"),
                "write CPUs like 0-3,8",
            ));
        }
    }
    Reading::new(raw, format!("{cpus} CPU(s)"))
}

/// Up to six integers separated by white space, read with `sscanf("%ld ...")`.
pub(super) fn read_int_list(raw: &str) -> Reading {
    let mut values = Vec::new();
    let mut findings = Vec::new();
    for tok in raw.split_whitespace() {
        match tok.parse::<i64>() {
            Ok(v) if values.len() < 6 => values.push(v),
            Ok(_) => {
                findings.push(Finding::warning(
                    "more than six numbers: NCCL ignores the rest",
                    "keep six",
                ));
                break;
            }
            Err(_) => {
                findings.push(Finding::error(
                    format!("{tok:?} is not an integer: NCCL stops reading there and keeps the defaults for the rest"),
                    "separate plain integers with spaces",
                ));
                break;
            }
        }
    }
    const LABELS: [&str; 6] = [
        "Tree/LL",
        "Tree/LL128",
        "Tree/Simple",
        "Ring/LL",
        "Ring/LL128",
        "Ring/Simple",
    ];
    let meaning: Vec<String> = values
        .iter()
        .zip(LABELS)
        .map(|(v, l)| {
            if *v < 0 {
                format!("{l} default")
            } else {
                format!("{l} {v}")
            }
        })
        .collect();
    let mut r = Reading::new(raw, meaning.join(", "));
    r.findings = findings;
    r
}

/// `NCCL_NET_FORCE_MERGE`: `;`-separated groups of `,`-separated NIC names, at most 8 per group.
pub(super) fn read_nic_groups(raw: &str) -> Reading {
    let mut findings = Vec::new();
    let groups: Vec<Vec<&str>> = raw
        .split(';')
        .filter(|g| !g.is_empty())
        .map(|g| g.split(',').filter(|n| !n.is_empty()).collect())
        .collect();
    for g in &groups {
        if g.len() > 8 {
            findings.push(Finding::error(
                format!("a group has {} NICs; NCCL fuses at most 8", g.len()),
                "split the group",
            ));
        }
    }
    let mut r = Reading::new(raw, format!("{} virtual NIC(s)", groups.len()));
    r.findings = findings;
    r
}

/// A comma list of names; for `NCCL_NO_CACHE` the names must be knobs (or ALL).
pub(super) fn read_name_list(spec: &KnobSpec, raw: &str) -> Reading {
    let names: Vec<&str> = raw.split(',').filter(|n| !n.is_empty()).collect();
    let mut findings = Vec::new();
    if spec.name == "NCCL_NO_CACHE" {
        for n in &names {
            if *n != "ALL" && crate::config::lookup(n).is_none() {
                findings.push(Finding::warning(
                    format!("{n} is not a knob NCCL reads"),
                    "check the spelling",
                ));
            }
        }
    }
    let mut r = Reading::new(raw, format!("{} name(s)", names.len()));
    r.findings = findings;
    r
}

/// A path NCCL reads or writes; `~` is not expanded. `NCCL_DEBUG_FILE` expands `%h`, `%p`, `%%`.
pub(super) fn read_path(spec: &KnobSpec, raw: &str) -> Reading {
    let mut r = Reading::new(raw, "");
    if raw.starts_with('~') {
        r.findings.push(Finding::error(
            "NCCL does not expand '~': the path is taken literally",
            "write the full path, e.g. /home/me/...",
        ));
    }
    if spec.name == "NCCL_DEBUG_FILE" {
        r.meaning = format!(
            "e.g. {}",
            raw.replace("%%", "\u{0}")
                .replace("%h", "<host>")
                .replace("%p", "<pid>")
                .replace('\u{0}', "%")
        );
        if !raw.contains("%p") {
            r.findings.push(Finding::note(
                "no %p: ranks of one host all write, and truncate, the same file",
            ));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::finding::Severity;
    use crate::config::lookup;

    #[test]
    fn device_lists() {
        let ifname = lookup("NCCL_SOCKET_IFNAME").unwrap();
        assert_eq!(read_device_list(ifname, "=").effective, "auto");
        let r = read_device_list(ifname, "eth0, eth1");
        assert_eq!(r.findings[0].severity, Severity::Error);
        let hca = lookup("NCCL_IB_HCA").unwrap();
        let r = read_device_list(hca, "^=mlx5_0:1");
        assert_eq!(
            r.meaning,
            "every device except those named exactly mlx5_0 port 1"
        );
        assert!(read_device_list(hca, "mlx5_0:x").has_error());
    }

    #[test]
    fn algo_proto_and_addresses() {
        let r = read_algo_proto(
            "^Ring,Tree,CollNetDirect,CollNetChain,NVLS,NVLSTree,PAT",
            true,
        );
        assert_eq!(r.findings.len(), 5, "{r:?}");
        let r = read_algo_proto("ring;allreduce:tree", true);
        assert!(
            r.effective.starts_with("Broadcast:Ring; Reduce:Ring;"),
            "{r:?}"
        );
        let r = read_algo_proto("AllReduce:Tree", true);
        assert_eq!(r.effective, "AllReduce:Tree");
        assert_eq!(
            r.meaning,
            "AllReduce:Tree; any algorithm for the other collectives"
        );
        let bad = read_algo_proto("LL129", false);
        assert!(bad.has_error());
        let fix = &bad.findings[0].hint;
        assert!(
            fix.contains("'Simple'") && fix.contains("LL, LL128, Simple"),
            "{fix}"
        );
        assert!(
            !fix.contains("Tree"),
            "NCCL_PROTO's fix names protocols: {fix}"
        );
        let fix = &read_algo_proto("bogus", true).findings[0].hint;
        assert!(fix.contains("'Ring'") && fix.contains("Tree"), "{fix}");
        assert_eq!(
            read_host_port("10.0.0.1:29500").meaning,
            "host 10.0.0.1, port 29500"
        );
        assert_eq!(
            read_host_port("[fe80::1]:29500").meaning,
            "host fe80::1, port 29500"
        );
        assert!(read_host_port("node1").has_error());
        assert!(read_host_port("fe80::1").has_error());
        assert!(read_host_port("node1:99999").has_error());
    }

    #[test]
    fn other_lists() {
        assert_eq!(read_cpu_list("0-3,8").meaning, "5 CPU(s)");
        assert!(read_cpu_list("0-3,x").has_error());
        assert_eq!(
            read_int_list("-1 -1 -1 512").meaning,
            "Tree/LL default, Tree/LL128 default, Tree/Simple default, Ring/LL 512"
        );
        assert!(read_int_list("1 x").has_error());
        assert!(read_nic_groups("a,b,c,d,e,f,g,h,i").has_error());
        let debug_file = lookup("NCCL_DEBUG_FILE").unwrap();
        assert_eq!(
            read_path(debug_file, "/tmp/nccl.%h.%p.log").meaning,
            "e.g. /tmp/nccl.<host>.<pid>.log"
        );
        assert!(read_path(debug_file, "~/x").has_error());
    }
}
