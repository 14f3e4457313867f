//! Knobs read by the plugins NCCL ships in `plugins/` (the inspector and example profilers, the
//! example tuner), not by libnccl. They matter only when that plugin is loaded.

use super::BASE;
use super::spec::{Category as C, Choice, KnobSpec, KnobType as T, Origin, Subsystem, Unit as U};

const INSPECTOR: KnobSpec = KnobSpec {
    subsystem: Subsystem::Plugin,
    category: C::Debug,
    origin: Origin::Plugin("profiler/inspector"),
    related: &["NCCL_PROFILER_PLUGIN", "NCCL_INSPECTOR_ENABLE"],
    ..BASE
};
const PROFILER: KnobSpec = KnobSpec {
    subsystem: Subsystem::Plugin,
    category: C::Debug,
    origin: Origin::Plugin("profiler/example"),
    related: &["NCCL_PROFILER_PLUGIN"],
    ..BASE
};
const IP: &str = "plugins/profiler/inspector/inspector.cc";
const EX: &str = "plugins/profiler/example/plugin.cc";

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "NCCL_TUNER_CONFIG_FILE", ty: T::File, subsystem: Subsystem::Plugin, category: C::Tuning, origin: Origin::Plugin("tuner/example"), since: "2.27.5",
        related: &["NCCL_TUNER_PLUGIN"], source: "plugins/tuner/example/plugin.c:335",
        description: "CSV-style rules file from which the example tuner plugin picks algorithm, protocol and channels per collective and size.", ..BASE },

    KnobSpec { name: "NCCL_INSPECTOR_ENABLE", ty: T::Bool, default: "0", since: "2.28.3", related: &["NCCL_PROFILER_PLUGIN"], source: IP,
        description: "Switches the inspector profiler on; it records per-communicator, per-collective timings and writes them out.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_ENABLE_P2P", ty: T::Bool, default: "1", since: "2.30.3", source: IP,
        description: "Lets the inspector record send/receive operations too.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_DUMP_THREAD_ENABLE", ty: T::Bool, default: "1", since: "2.28.3", source: IP,
        description: "Writes inspector records from a background thread.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", default: "-1", auto: "write only at teardown", range: Some((0, i64::MAX)), unit: U::Microseconds, since: "2.28.3", source: IP,
        description: "How often the inspector writes its records: -1 only at the end, 0 continuously, otherwise at this period.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_DUMP_DIR", ty: T::Text, auto: "a generated directory name", since: "2.28.3", source: IP,
        description: "Directory the inspector writes to.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_DUMP_VERBOSE", ty: T::Bool, default: "0", since: "2.28.3", source: IP,
        description: "Adds a full event trace to the inspector output.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_PROM_DUMP", ty: T::Bool, default: "0", since: "2.29.3", source: IP,
        description: "Writes inspector output in Prometheus text format, for a node exporter to pick up.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", default: "8192", range: Some((0, i64::MAX)), unit: U::Bytes, since: "2.30.3", source: IP,
        description: "Smallest message the inspector records.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", default: "1024", range: Some((1, i64::MAX)), unit: U::Count, since: "2.30.3", source: IP,
        description: "Completed collectives kept per communicator before the oldest are dropped.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_DUMP_P2P_RING_SIZE", default: "1024", range: Some((1, i64::MAX)), unit: U::Count, since: "2.30.3", source: IP,
        description: "Completed send/receive operations kept per communicator.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_COLL_POOL_SIZE", default: "256", range: Some((1, i64::MAX)), unit: U::Count, since: "2.30.3", source: IP,
        description: "Initial size of the inspector's pool of collective events.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_P2P_POOL_SIZE", default: "256", range: Some((1, i64::MAX)), unit: U::Count, since: "2.30.3", source: IP,
        description: "Initial size of the inspector's pool of send/receive events.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_COMM_POOL_SIZE", default: "256", range: Some((1, i64::MAX)), unit: U::Count, since: "2.30.3", source: IP,
        description: "Initial size of the inspector's pool of communicators.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_POOL_GROW", ty: T::Bool, default: "1", since: "2.30.3", source: IP,
        description: "Lets the inspector's event pools grow when they run out.", ..INSPECTOR },
    KnobSpec { name: "NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING", ty: T::Bool, default: "1", since: "2.30.3", source: IP,
        description: "Keeps only events timed on the GPU, dropping those timed on the CPU.", ..INSPECTOR },

    KnobSpec { name: "NCCL_PROFILE_GROUP_API_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.28.3", source: EX,
        description: "Event pool size of the example profiler for group API calls.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_COLL_API_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.28.3", source: EX,
        description: "Event pool size of the example profiler for collective API calls.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_P2P_API_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.28.3", source: EX,
        description: "Event pool size of the example profiler for send/receive API calls.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_KERNEL_LAUNCH_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.28.3", source: EX,
        description: "Event pool size of the example profiler for kernel launches.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_GROUP_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.23.4", source: EX,
        description: "Event pool size of the example profiler for groups.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_COLL_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.23.4", source: EX,
        description: "Event pool size of the example profiler for collectives.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_P2P_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.23.4", source: EX,
        description: "Event pool size of the example profiler for send/receive.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_PROXY_CTRL_POOL_SIZE", default: "16", range: Some((1, i64::MAX)), unit: U::Count, since: "2.23.4", source: EX,
        description: "Event pool size of the example profiler for proxy control events.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_CE_COLL_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.29.3", source: EX,
        description: "Event pool size of the example profiler for copy-engine collectives.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_CE_SYNC_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.29.3", source: EX,
        description: "Event pool size of the example profiler for copy-engine synchronisation.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_CE_BATCH_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.29.3", source: EX,
        description: "Event pool size of the example profiler for copy-engine batches.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_PROXY_DETACH_POOL_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.23.4", source: EX,
        description: "Event pool size of the example profiler for detached proxy operations.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_EVENT_MASK", default: "0", range: Some((0, i64::MAX)), since: "2.23.4", source: EX,
        description: "Bit mask of the event types the example profiler records; 0 records none.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILE_DUMP_FILE", ty: T::OutputFile, since: "2.23.4", source: EX,
        description: "Prefix of the trace files the example profiler writes.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILER_CE_TIMING", ty: T::Keyword(&[
            Choice { value: "CPU", meaning: "time copy-engine collectives on the CPU" },
            Choice { value: "GPU", meaning: "time them with GPU events" },
        ]), auto: "CPU", since: "2.29.3", source: "plugins/profiler/example/profiler_plugin_ce.cc:221",
        description: "How the example profiler times copy-engine collectives.", ..PROFILER },
    KnobSpec { name: "NCCL_PROFILER_CE_POLLER_INTERVAL_MICROSECONDS", range: Some((1, i64::MAX)), unit: U::Microseconds, auto: "the plugin's built-in interval", since: "2.29.3",
        source: "plugins/profiler/example/profiler_plugin_ce.cc:228",
        description: "Polling interval of the example profiler's copy-engine poller.", ..PROFILER },
];
