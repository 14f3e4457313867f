//! Host identity: which ranks share a host (NCCL's host hash).

use crate::config::Config;

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
    }
}
