//! `ncclConfig_t`: the checks NCCL 2.28 makes (magic, size, version, ranges) and the knobs its
//! fields set.

use std::ffi::{CStr, c_int};

use rnccl::config::{Config, Source};

use crate::errors::{Failure, check_ptr};
use crate::types::*;

/// A checked `ncclConfig_t`: the knobs it sets and whether calls block.
#[derive(Debug)]
pub struct ParsedConfig {
    /// Knobs: the environment and conf files, plus the config's fields that those leave unset
    /// (NCCL lets the environment override `ncclConfig_t`).
    pub knobs: Config,
    /// `blocking` (1 unless the caller set 0).
    pub blocking: bool,
}

/// The `ncclConfig_t` fields that are NCCL knobs, with the knob each sets.
const CONFIG_KNOBS: [(&str, &str); 10] = [
    ("cgaClusterSize", "NCCL_CGA_CLUSTER_SIZE"),
    ("minCTAs", "NCCL_MIN_CTAS"),
    ("maxCTAs", "NCCL_MAX_CTAS"),
    ("splitShare", "NCCL_COMM_SPLIT_SHARE_RESOURCES"),
    ("collnetEnable", "NCCL_COLLNET_ENABLE"),
    ("CTAPolicy", "NCCL_CTA_POLICY"),
    ("shrinkShare", "NCCL_COMM_SHRINK_SHARE_RESOURCES"),
    ("nvlsCTAs", "NCCL_NVLS_NCHANNELS"),
    ("nChannelsPerNetPeer", "NCCL_NCHANNELS_PER_NET_PEER"),
    (
        "nvlinkCentricSched",
        "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE",
    ),
];

/// Reads an `ncclConfig_t` as NCCL 2.28's `parseCommConfig` does: only the caller's `size`
/// bytes are read, the magic must be `NCCL_API_MAGIC`, fields newer than the caller's
/// `version` are reset to their defaults, and out-of-range values are refused. NULL means
/// every default.
///
/// Errors: `ncclInvalidArgument` for a config not made with `NCCL_CONFIG_INITIALIZER` (bad
/// magic), a misaligned pointer, or a bad field value (named).
///
/// # Safety
/// `config` must be NULL or point to readable memory of at least `config->size` bytes (or
/// `sizeof(ncclConfig_t)`, whichever is smaller), with C strings in `netName`/`commName`.
pub unsafe fn parse_config(
    config: *const ncclConfig_t,
    func: &str,
) -> Result<ParsedConfig, Failure> {
    let mut knobs = Config::from_env().map_err(|e| {
        let e = rnccl::Error::from(e);
        Failure::from_error(func, &e)
    })?;
    if config.is_null() {
        return Ok(ParsedConfig {
            knobs,
            blocking: true,
        });
    }
    check_ptr(config, func, "config")?;
    let dflt = ncclConfig_t::INITIALIZER;
    let mut c = ncclConfig_t { magic: 0, ..dflt };
    // SAFETY: `config` is aligned and non-null; its first field is the size the caller's header
    // gives, and at least that many bytes (capped at ours) are readable.
    let size = unsafe { (config as *const usize).read() }.min(std::mem::size_of::<ncclConfig_t>());
    // SAFETY: copies `size` readable bytes into a local of at least that size.
    unsafe {
        std::ptr::copy_nonoverlapping(
            config as *const u8,
            (&mut c as *mut ncclConfig_t).cast::<u8>(),
            size,
        )
    };
    if c.magic != NCCL_API_MAGIC {
        return Err(Failure::arg(
            func,
            "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER",
        ));
    }
    let v = c.version as c_int;
    if v < nccl_version(2, 14, 0) {
        c.blocking = dflt.blocking;
    }
    if v < nccl_version(2, 17, 0) {
        (c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.netName) = (
            dflt.cgaClusterSize,
            dflt.minCTAs,
            dflt.maxCTAs,
            dflt.netName,
        );
    }
    if v < nccl_version(2, 25, 0) {
        c.trafficClass = dflt.trafficClass;
    }
    if v < nccl_version(2, 27, 0) {
        (c.collnetEnable, c.CTAPolicy, c.shrinkShare, c.nvlsCTAs) = (
            dflt.collnetEnable,
            dflt.CTAPolicy,
            dflt.shrinkShare,
            dflt.nvlsCTAs,
        );
    }
    if v < nccl_version(2, 28, 0) {
        (c.nChannelsPerNetPeer, c.nvlinkCentricSched) =
            (dflt.nChannelsPerNetPeer, dflt.nvlinkCentricSched);
    }
    validate_config(&c, func)?;
    let fields = [
        c.cgaClusterSize,
        c.minCTAs,
        c.maxCTAs,
        c.splitShare,
        c.collnetEnable,
        c.CTAPolicy,
        c.shrinkShare,
        c.nvlsCTAs,
        c.nChannelsPerNetPeer,
        c.nvlinkCentricSched,
    ];
    for ((field, knob), value) in CONFIG_KNOBS.iter().zip(fields) {
        if value != NCCL_CONFIG_UNDEF_INT && knobs.setting(knob).is_none() {
            knobs.set(
                knob,
                value.to_string(),
                Source::Program(format!("ncclConfig_t.{field}")),
            );
        }
    }
    if !c.netName.is_null() && knobs.setting("NCCL_NET").is_none() {
        // SAFETY: the caller promises netName is a NUL-terminated C string.
        let name = unsafe { CStr::from_ptr(c.netName) };
        let name = name
            .to_str()
            .map_err(|_| Failure::arg(func, "config->netName is not UTF-8"))?;
        knobs.set(
            "NCCL_NET",
            name,
            Source::Program("ncclConfig_t.netName".into()),
        );
    }
    Ok(ParsedConfig {
        knobs,
        blocking: c.blocking != 0,
    })
}

/// NCCL 2.28's range checks of `ncclConfig_t` fields. One deviation: min > max CTAs is
/// checked only when both are set (NCCL compares against the unset sentinel, `INT_MIN`, and
/// so refuses a config that sets `minCTAs` alone).
pub(crate) fn validate_config(c: &ncclConfig_t, func: &str) -> Result<(), Failure> {
    let undef = |v: c_int| v == NCCL_CONFIG_UNDEF_INT;
    let bool_ok = |v: c_int| undef(v) || v == 0 || v == 1;
    let bad = |what: &str, v: c_int| Failure::arg(func, format!("invalid config {what} value {v}"));
    if !bool_ok(c.blocking) {
        return Err(bad("blocking", c.blocking));
    }
    if !undef(c.cgaClusterSize) && c.cgaClusterSize < 0 {
        return Err(bad("cgaClusterSize", c.cgaClusterSize));
    }
    if (!undef(c.minCTAs) && c.minCTAs <= 0)
        || (!undef(c.maxCTAs) && c.maxCTAs <= 0)
        || (!undef(c.minCTAs) && !undef(c.maxCTAs) && c.minCTAs > c.maxCTAs)
    {
        return Err(Failure::arg(
            func,
            format!(
                "invalid config min/max CTAs values {}/{}",
                c.minCTAs, c.maxCTAs
            ),
        ));
    }
    if !bool_ok(c.splitShare) {
        return Err(bad("splitShare", c.splitShare));
    }
    if !bool_ok(c.collnetEnable) {
        return Err(bad("collnetEnable", c.collnetEnable));
    }
    if !undef(c.CTAPolicy) && !(0..=2).contains(&c.CTAPolicy) {
        return Err(bad("CTAPolicy", c.CTAPolicy));
    }
    if !bool_ok(c.shrinkShare) {
        return Err(bad("shrinkShare", c.shrinkShare));
    }
    if !undef(c.nvlsCTAs) && c.nvlsCTAs <= 0 {
        return Err(bad("nvlsCTAs", c.nvlsCTAs));
    }
    if !undef(c.nChannelsPerNetPeer) && !(1..=64).contains(&c.nChannelsPerNetPeer) {
        return Err(bad("nChannelsPerNetPeer", c.nChannelsPerNetPeer));
    }
    if !bool_ok(c.nvlinkCentricSched) {
        return Err(bad("nvlinkCentricSched", c.nvlinkCentricSched));
    }
    Ok(())
}
