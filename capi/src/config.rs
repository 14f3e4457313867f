//! `ncclConfig_t`: the checks NCCL 2.30 makes (magic, size, version, ranges) and the knobs its
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

/// The `ncclConfig_t` fields that are NCCL knobs, with the knob each sets (NCCL 2.30
/// src/init.cc `envConfigOverride`: the knob, when set, overrides the field).
/// `graphUsageMode` is not here: its knob takes other values (see [`graph_mixing`]).
const CONFIG_KNOBS: [(&str, &str); 13] = [
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
    ("numRmaCtx", "NCCL_NUM_RMA_CTX"),
    ("maxP2pPeers", "NCCL_P2P_MAX_PEERS"),
    ("graphStreamOrdering", "NCCL_GRAPH_STREAM_ORDERING"),
];

/// The `NCCL_GRAPH_MIXING_SUPPORT` value a `graphUsageMode` stands for: NCCL 2.30 maps the
/// knob's 1 to mode 2 (captured and uncaptured work may mix) and its 0 to mode 0
/// (src/init.cc `envConfigOverride`). Mode 1 has no knob value and sets none.
fn graph_mixing(mode: c_int) -> Option<&'static str> {
    match mode {
        0 => Some("0"),
        2 => Some("1"),
        _ => None,
    }
}

/// Reads an `ncclConfig_t` as NCCL 2.30's `parseCommConfig` does: only the caller's `size`
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
    if v < nccl_version(2, 29, 0) {
        (c.graphUsageMode, c.numRmaCtx) = (dflt.graphUsageMode, dflt.numRmaCtx);
    }
    if v < nccl_version(2, 30, 0) {
        c.maxP2pPeers = dflt.maxP2pPeers;
    }
    if v < nccl_version(2, 30, 5) {
        c.graphStreamOrdering = dflt.graphStreamOrdering;
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
        c.numRmaCtx,
        c.maxP2pPeers,
        c.graphStreamOrdering,
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
    const MIXING: &str = "NCCL_GRAPH_MIXING_SUPPORT";
    if let Some(value) = graph_mixing(c.graphUsageMode)
        && knobs.setting(MIXING).is_none()
    {
        knobs.set(
            MIXING,
            value,
            Source::Program("ncclConfig_t.graphUsageMode".into()),
        );
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

/// NCCL 2.30's range checks of `ncclConfig_t` fields (src/init.cc `parseCommConfig`). One
/// deviation: min > max CTAs is checked only when both are set (NCCL compares against the
/// unset sentinel, `INT_MIN`, and so refuses a config that sets `minCTAs` alone).
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
    if !undef(c.graphUsageMode) && !(0..=2).contains(&c.graphUsageMode) {
        return Err(bad("graphUsageMode", c.graphUsageMode));
    }
    if !undef(c.numRmaCtx) && c.numRmaCtx < 0 {
        return Err(bad("numRmaCtx", c.numRmaCtx));
    }
    if !undef(c.maxP2pPeers) && c.maxP2pPeers <= 0 {
        return Err(bad("maxP2pPeers", c.maxP2pPeers));
    }
    if !bool_ok(c.graphStreamOrdering) {
        return Err(bad("graphStreamOrdering", c.graphStreamOrdering));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_uint;

    /// The knob `name` as `parse_config` left it: its value and whether the config set it.
    fn knob(p: &ParsedConfig, name: &str) -> Option<(String, bool)> {
        p.knobs
            .setting(name)
            .map(|s| (s.raw.clone(), matches!(s.source, Source::Program(_))))
    }

    #[test]
    fn nccl_2_30_fields_set_their_knobs_and_older_headers_leave_them_unset() {
        // The environment of this test process sets none of these knobs.
        let mut c = ncclConfig_t::INITIALIZER;
        (c.numRmaCtx, c.maxP2pPeers, c.graphStreamOrdering) = (0, 3, 0);
        c.graphUsageMode = 0;
        // SAFETY: a whole, initialised config.
        let p = unsafe { parse_config(&c, "test") }.unwrap();
        assert_eq!(knob(&p, "NCCL_NUM_RMA_CTX"), Some(("0".into(), true)));
        assert_eq!(knob(&p, "NCCL_P2P_MAX_PEERS"), Some(("3".into(), true)));
        assert_eq!(
            knob(&p, "NCCL_GRAPH_STREAM_ORDERING"),
            Some(("0".into(), true))
        );
        assert_eq!(
            knob(&p, "NCCL_GRAPH_MIXING_SUPPORT"),
            Some(("0".into(), true))
        );
        c.graphUsageMode = 2;
        // SAFETY: as above.
        let p = unsafe { parse_config(&c, "test") }.unwrap();
        assert_eq!(
            knob(&p, "NCCL_GRAPH_MIXING_SUPPORT"),
            Some(("1".into(), true))
        );
        c.graphUsageMode = 1;
        // SAFETY: as above.
        let p = unsafe { parse_config(&c, "test") }.unwrap();
        assert_eq!(knob(&p, "NCCL_GRAPH_MIXING_SUPPORT"), None);

        // A 2.29.x header has graphUsageMode and numRmaCtx but not the 2.30 fields.
        c.version = nccl_version(2, 29, 7) as c_uint;
        // SAFETY: as above.
        let p = unsafe { parse_config(&c, "test") }.unwrap();
        assert_eq!(knob(&p, "NCCL_NUM_RMA_CTX"), Some(("0".into(), true)));
        assert_eq!(knob(&p, "NCCL_P2P_MAX_PEERS"), None);
        assert_eq!(knob(&p, "NCCL_GRAPH_STREAM_ORDERING"), None);
    }

    #[test]
    fn a_2_28_config_is_read_only_as_far_as_its_size() {
        // nccl.h 2.28's ncclConfig_t ends at nvlinkCentricSched: what lies after it in the
        // caller's memory is not the config's and is never read.
        let size = std::mem::offset_of!(ncclConfig_t, graphUsageMode);
        let mut c = ncclConfig_t::INITIALIZER;
        (c.size, c.version) = (size, nccl_version(2, 28, 9) as c_uint);
        (c.graphUsageMode, c.numRmaCtx, c.maxP2pPeers) = (99, -5, -1);
        // SAFETY: a whole config; `parse_config` reads its first `size` bytes.
        let p = unsafe { parse_config(&c, "test") }.unwrap();
        assert_eq!(knob(&p, "NCCL_NUM_RMA_CTX"), None);
        assert_eq!(knob(&p, "NCCL_GRAPH_MIXING_SUPPORT"), None);
    }

    #[test]
    fn nccl_2_30_fields_out_of_range_are_refused_by_name() {
        for (field, set) in [
            (
                "graphUsageMode",
                (|c: &mut ncclConfig_t| c.graphUsageMode = 3) as fn(&mut ncclConfig_t),
            ),
            ("numRmaCtx", |c| c.numRmaCtx = -1),
            ("maxP2pPeers", |c| c.maxP2pPeers = 0),
            ("graphStreamOrdering", |c| c.graphStreamOrdering = 2),
        ] {
            let mut c = ncclConfig_t::INITIALIZER;
            set(&mut c);
            // SAFETY: a whole, initialised config.
            let e = unsafe { parse_config(&c, "test") }.unwrap_err();
            assert_eq!(e.code, ncclInvalidArgument, "{field}");
            assert!(e.msg.contains(field), "{field}: {}", e.msg);
        }
    }
}
