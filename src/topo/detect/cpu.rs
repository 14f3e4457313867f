//! CPUs and NUMA nodes: `/sys/devices/system/node/node*/{cpumap,cpulist}`, the first processor
//! of `/proc/cpuinfo` (what NCCL's CPUID gives: vendor, family, model), whether the host is a
//! virtual machine, and, on the live host, a summary from sysinfo.

use serde::Serialize;

use super::sysfs::Root;

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    /// Node number.
    pub id: i64,
    /// `cpumap`: hex mask with comma-separated 32-bit words (NCCL's `affinity`).
    pub cpumap: Option<String>,
    /// `cpulist`: ranges (`0-31,64-95`).
    pub cpulist: Option<String>,
}

/// The CPU as NCCL describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuInfo {
    /// NCCL's `arch` (`x86_64`, `arm64`, `ppc64`).
    pub arch: Option<String>,
    /// `vendor_id` (`GenuineIntel`, `AuthenticAMD`).
    pub vendor: Option<String>,
    /// Family as CPUID encodes it for NCCL (`familyid`: base + extended << 4).
    pub family: Option<u32>,
    /// Model (`modelid`).
    pub model: Option<u32>,
    /// `model name`.
    pub model_name: Option<String>,
}

/// The host as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostInfo {
    /// Host name (live host only).
    pub hostname: Option<String>,
    /// Logical CPUs (live host: sysinfo; captured tree: `cpu/online`).
    pub logical_cpus: Option<usize>,
    /// Memory in bytes (live host only).
    pub memory_bytes: Option<u64>,
    /// Why the host looks virtual (hypervisor CPU flag, DMI vendor, `/sys/hypervisor/type`).
    pub virtualization: Option<String>,
}

/// NUMA nodes, in id order.
pub fn read_numa(root: &Root) -> Vec<NumaNode> {
    let mut v: Vec<NumaNode> = root
        .list("/sys/devices/system/node")
        .into_iter()
        .filter_map(|n| {
            let id: i64 = n.strip_prefix("node")?.parse().ok()?;
            Some(NumaNode {
                id,
                cpumap: root.read(&format!("/sys/devices/system/node/{n}/cpumap")),
                cpulist: root.read(&format!("/sys/devices/system/node/{n}/cpulist")),
            })
        })
        .collect();
    v.sort_by_key(|n| n.id);
    v
}

fn field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The first processor of `/proc/cpuinfo`, with family encoded as NCCL's CPUID reading does
/// (families from 15 up are 15 + extended family << 4).
pub fn read_cpu(root: &Root) -> CpuInfo {
    let Some(text) = root.read("/proc/cpuinfo") else {
        return CpuInfo::default();
    };
    let vendor = field(&text, "vendor_id").map(str::to_string);
    let arch = if vendor.is_some() {
        Some("x86_64")
    } else if field(&text, "CPU implementer").is_some() {
        Some("arm64")
    } else if field(&text, "cpu").is_some_and(|c| c.contains("POWER")) {
        Some("ppc64")
    } else {
        None
    };
    let family = field(&text, "cpu family").and_then(|f| f.parse::<u32>().ok());
    CpuInfo {
        arch: arch.map(str::to_string),
        vendor,
        family: family.map(|f| if f > 15 { 15 + ((f - 15) << 4) } else { f }),
        model: field(&text, "model").and_then(|m| m.parse().ok()),
        model_name: field(&text, "model name").map(str::to_string),
    }
}

/// This host's CPU (`/proc/cpuinfo`), e.g. for the model name `rnccl bench` prints per device.
pub fn this_host() -> CpuInfo {
    read_cpu(&Root::new(std::path::Path::new("/")))
}

/// Host summary and virtualization hints.
pub fn read_host(root: &Root) -> HostInfo {
    let cpuinfo = root.read("/proc/cpuinfo").unwrap_or_default();
    let mut why = Vec::new();
    if field(&cpuinfo, "flags").is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor")) {
        why.push("CPU flag 'hypervisor'".to_string());
    }
    if let Some(h) = root.read("/sys/hypervisor/type") {
        why.push(format!("/sys/hypervisor/type = {h}"));
    }
    for f in ["sys_vendor", "product_name"] {
        if let Some(v) = root.read(&format!("/sys/class/dmi/id/{f}")) {
            let l = v.to_lowercase();
            if [
                "qemu",
                "kvm",
                "vmware",
                "virtualbox",
                "microsoft",
                "amazon ec2",
                "google",
                "xen",
                "firecracker",
            ]
            .iter()
            .any(|k| l.contains(k))
            {
                why.push(format!("DMI {f} = {v}"));
            }
        }
    }
    let mut host = HostInfo {
        virtualization: (!why.is_empty()).then(|| why.join(", ")),
        logical_cpus: root
            .read("/sys/devices/system/cpu/online")
            .map(|s| count_cpulist(&s)),
        ..HostInfo::default()
    };
    if root.is_host() {
        host.hostname = sysinfo::System::host_name().ok();
        if let Ok(mut s) = sysinfo::System::new() {
            s.refresh_memory();
            s.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
            host.memory_bytes = Some(s.total_memory());
            host.logical_cpus = Some(s.cpus().len())
                .filter(|&n| n > 0)
                .or(host.logical_cpus);
        }
    }
    host
}

/// Number of CPUs in a cpulist (`0-3,8,10-11` → 7).
pub fn count_cpulist(s: &str) -> usize {
    s.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => usize::from(p.parse::<usize>().is_ok()),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_model_of_captured_and_live_hosts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/cpuinfo"),
            "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7763 64-Core Processor\n",
        )
        .unwrap();
        let c = read_cpu(&Root::new(dir.path()));
        assert_eq!(
            c.model_name.as_deref(),
            Some("AMD EPYC 7763 64-Core Processor")
        );
        assert_eq!((c.family, c.model), (Some(15 + (10 << 4)), Some(1)));
        let live = this_host();
        assert!(live.model_name.is_none_or(|m| !m.is_empty()));
    }

    #[test]
    fn cpulist_counts() {
        assert_eq!(count_cpulist("0-3,8,10-11\n"), 7);
        assert_eq!(count_cpulist("0"), 1);
        assert_eq!(count_cpulist(""), 0);
    }
}
