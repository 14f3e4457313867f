//! Host and process identity: which ranks share a host, a process, a `/dev/shm`.

use std::os::unix::fs::MetadataExt;

use crate::config::Config;

/// FNV-1a 64-bit hash (stable across processes and builds).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// This host's name up to the first `.`, as NCCL prints it.
pub fn short_hostname() -> String {
    let full = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    full.split('.').next().unwrap_or("unknown").to_string()
}

/// The host identity string: `NCCL_HOSTID` when set, else hostname + kernel boot id (NCCL's
/// `getHostHash`, internals §6.5).
pub(crate) fn host_id(cfg: &Config) -> String {
    if let Some(id) = cfg.string("NCCL_HOSTID") {
        return id.to_string();
    }
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!("{host}{}", boot.trim())
}

/// Device number of `/dev/shm` (ranks with different ones cannot share segments); 0 if absent.
pub(crate) fn shm_dev() -> u64 {
    std::fs::metadata("/dev/shm").map(|m| m.dev()).unwrap_or(0)
}

/// Inode of this process's pid namespace (pids are comparable only within one).
pub(crate) fn pid_namespace() -> u64 {
    std::fs::metadata("/proc/self/ns/pid")
        .map(|m| m.ino())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    #[test]
    fn hostid_knob_overrides_identity() {
        let mut c = Config::defaults();
        assert!(!host_id(&c).is_empty());
        c.set("NCCL_HOSTID", "node-a", Source::Env);
        assert_eq!(host_id(&c), "node-a");
        assert_ne!(fnv1a(b"node-a"), fnv1a(b"node-b"));
    }
}
