//! Logging and checks (`src/debug.cc`, `src/init.cc`), reading the environment itself
//! (`src/misc/param.cc`, `src/param/param.cc`) and plugin loading (`src/plugin/`).

use super::BASE;
use super::spec::{Category as C, Choice, KnobSpec, KnobType as T, Status, Subsystem, Unit as U};

const DEBUG: KnobSpec = KnobSpec {
    subsystem: Subsystem::Debug,
    category: C::Debug,
    ..BASE
};
const ENV: KnobSpec = KnobSpec {
    subsystem: Subsystem::Env,
    category: C::System,
    ..BASE
};
const PLUGIN: KnobSpec = KnobSpec {
    subsystem: Subsystem::Plugin,
    category: C::System,
    ..BASE
};

/// `NCCL_DEBUG` levels (`src/debug.cc`, `ncclDebugLogLevel`), least verbose first.
const DEBUG_LEVELS: &[Choice] = &[
    Choice {
        value: "VERSION",
        meaning: "print the version banner only",
    },
    Choice {
        value: "WARN",
        meaning: "print errors",
    },
    Choice {
        value: "INFO",
        meaning: "print errors and progress messages of the NCCL_DEBUG_SUBSYS subsystems",
    },
    Choice {
        value: "ABORT",
        meaning: "like INFO, plus abort messages",
    },
    Choice {
        value: "TRACE",
        meaning: "everything, including per-call traces (builds with tracing only)",
    },
];

/// `NCCL_DEBUG_SUBSYS` names; `value` is the name, `meaning` the bit in hex (`nccl-internals.md`
/// §8.1, `src/include/nccl_common.h`).
const DEBUG_SUBSYSTEMS: &[Choice] = &[
    Choice {
        value: "INIT",
        meaning: "0x1",
    },
    Choice {
        value: "COLL",
        meaning: "0x2",
    },
    Choice {
        value: "P2P",
        meaning: "0x4",
    },
    Choice {
        value: "SHM",
        meaning: "0x8",
    },
    Choice {
        value: "NET",
        meaning: "0x10",
    },
    Choice {
        value: "GRAPH",
        meaning: "0x20",
    },
    Choice {
        value: "TUNING",
        meaning: "0x40",
    },
    Choice {
        value: "ENV",
        meaning: "0x80",
    },
    Choice {
        value: "ALLOC",
        meaning: "0x100",
    },
    Choice {
        value: "CALL",
        meaning: "0x200",
    },
    Choice {
        value: "PROXY",
        meaning: "0x400",
    },
    Choice {
        value: "NVLS",
        meaning: "0x800",
    },
    Choice {
        value: "BOOTSTRAP",
        meaning: "0x1000",
    },
    Choice {
        value: "REG",
        meaning: "0x2000",
    },
    Choice {
        value: "PROFILE",
        meaning: "0x4000",
    },
    Choice {
        value: "RAS",
        meaning: "0x8000",
    },
    Choice {
        value: "DESTROY",
        meaning: "0x10000",
    },
    Choice {
        value: "ALLOC_HOST",
        meaning: "0x20000",
    },
    Choice {
        value: "ALL",
        meaning: "0xffffffffffffffff",
    },
];

/// `NCCL_DEBUG_TIMESTAMP_LEVELS` names; `meaning` is the bit (1 << level).
const TIMESTAMP_LEVELS: &[Choice] = &[
    Choice {
        value: "VERSION",
        meaning: "0x2",
    },
    Choice {
        value: "WARN",
        meaning: "0x4",
    },
    Choice {
        value: "INFO",
        meaning: "0x8",
    },
    Choice {
        value: "ABORT",
        meaning: "0x10",
    },
    Choice {
        value: "TRACE",
        meaning: "0x20",
    },
    Choice {
        value: "ALL",
        meaning: "0x3e",
    },
];

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "NCCL_CHECK_MODE", ty: T::Keyword(&[
            Choice { value: "DEFAULT", meaning: "no argument checks" },
            Choice { value: "DEBUG_LOCAL", meaning: "check pointers and arguments of every call" },
            Choice { value: "DEBUG_GLOBAL", meaning: "also check consistency across ranks, e.g. symmetric buffers" },
        ]), default: "DEFAULT", since: "2.29.7", related: &["NCCL_CHECK_POINTERS"], source: "src/init.cc:2232",
        description: "How much NCCL checks the arguments of each call. The checks cost time; use them to track down bad calls.", ..DEBUG },
    KnobSpec { name: "NCCL_CHECK_POINTERS", ty: T::Bool, default: "0", since: "2.2.12",
        status: Status::Deprecated { since: "2.29.7", instead: "NCCL_CHECK_MODE" },
        related: &["NCCL_CHECK_MODE"], source: "src/init.cc:59",
        description: "1 checks the pointers of every call, like NCCL_CHECK_MODE=DEBUG_LOCAL, which wins when both are set.", ..DEBUG },
    KnobSpec { name: "NCCL_DEBUG", ty: T::Keyword(DEBUG_LEVELS), auto: "no output", since: "2.3.5",
        related: &["NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_WARN_ENABLE_DEBUG_INFO"], source: "src/debug.cc:45",
        description: "How much NCCL logs: VERSION, WARN, INFO, ABORT or TRACE, each including the ones before. WARN is cheap and worth keeping on; INFO is what bug reports need. Must be set on every rank.", ..DEBUG },
    KnobSpec { name: "NCCL_DEBUG_FILE", ty: T::OutputFile, auto: "standard output", since: "2.2.12", related: &["NCCL_DEBUG"], source: "src/debug.cc:103",
        description: "File the log goes to, truncated at start; %h becomes the host name, %p the process id, %% a percent sign. Only used when NCCL_DEBUG is above VERSION. Use %p when several ranks share a file system, or they overwrite each other.", ..DEBUG },
    KnobSpec { name: "NCCL_DEBUG_SUBSYS", ty: T::Bitset(DEBUG_SUBSYSTEMS), default: "INIT,BOOTSTRAP,ENV", since: "2.3.4",
        related: &["NCCL_DEBUG"], source: "src/debug.cc:55",
        description: "Subsystems whose INFO and TRACE messages are printed, as a comma list (e.g. INIT,NET,GRAPH); a leading '^' prints all but those. Warnings are always printed. One unknown name makes NCCL reject the whole list.", ..DEBUG },
    KnobSpec { name: "NCCL_DEBUG_TIMESTAMP_FORMAT", ty: T::Text, default: "[%F %T] ", since: "2.26",
        related: &["NCCL_DEBUG_TIMESTAMP_LEVELS"], source: "src/debug.cc:99",
        description: "strftime format of the timestamp in front of log lines; %Nf (N from 1 to 9) adds N digits of fractional seconds, '_' prints as a space, an empty value prints none.", ..DEBUG },
    KnobSpec { name: "NCCL_DEBUG_TIMESTAMP_LEVELS", ty: T::Bitset(TIMESTAMP_LEVELS), default: "WARN", since: "2.26",
        related: &["NCCL_DEBUG_TIMESTAMP_FORMAT"], source: "src/debug.cc:85",
        description: "Log levels whose lines carry a timestamp, as a comma list; '^' inverts, ALL means every level.", ..DEBUG },
    KnobSpec { name: "NCCL_NVTX_DISABLE", ty: T::Bool, default: "0", since: "2.28.3", source: "src/init_nvtx.cc:16",
        description: "Stops NCCL from emitting NVTX ranges for profilers such as Nsight Systems.", ..DEBUG },
    KnobSpec { name: "NCCL_PROXY_DUMP_SIGNAL", default: "-1", auto: "none", range: Some((1, 64)), unit: U::Signal, since: "2.14.3", source: "src/proxy.cc:925",
        description: "Signal number on which the proxy thread prints its state, to debug hangs.", ..DEBUG },
    KnobSpec { name: "NCCL_RMA_PROXY_DUMP_SIGNAL", default: "-1", auto: "none", range: Some((1, 64)), unit: U::Signal, since: "2.29.2", source: "src/rma/rma_proxy.cc:26",
        description: "Signal number on which the host RMA proxy prints its state.", ..DEBUG },
    KnobSpec { name: "NCCL_SET_THREAD_NAME", ty: T::TypedBool, default: "0", since: "2.12", source: "src/debug.cc:441",
        description: "Names NCCL's host threads so they are recognisable in top, gdb and profilers.", ..DEBUG },
    KnobSpec { name: "NCCL_WARN_ENABLE_DEBUG_INFO", ty: T::TypedBool, default: "false", since: "2.19.4", related: &["NCCL_DEBUG"], source: "src/debug.cc:80",
        description: "Raises the log level to INFO after the first warning, so the messages that follow a failure are kept without logging everything from the start.", ..DEBUG },

    KnobSpec { name: "NCCL_CONF_FILE", ty: T::File, auto: "$HOME/.nccl.conf", since: "2.23",
        related: &["RNCCL_SYSTEM_CONF", "RNCCL_CONFIG"], source: "src/misc/param.cc:54",
        description: "File of KEY=VALUE lines read before /etc/nccl.conf, in place of $HOME/.nccl.conf. NCCL reads this name from the real environment only, so setting it in a conf file does nothing; '~' is not expanded. rnccl also honours it from a YAML config.", ..ENV },
    KnobSpec { name: "NCCL_NO_CACHE", ty: T::NameList, since: "2.29.7", source: "src/param/param.cc:20",
        description: "Knob names (or ALL) that NCCL reads again at every use instead of once, so a program can change them while running.", ..ENV },
    KnobSpec { name: "NCCL_PARAM_DUMP_ALL", ty: T::TypedBool, default: "false", category: C::Debug, since: "2.30.3", source: "src/param/param.cc:16",
        description: "Makes NCCL's parameter dump (ncclParamDumpAll) include the parameters NCCL does not publish.", ..ENV },

    KnobSpec { name: "NCCL_ENV_PLUGIN", ty: T::Text, auto: "libnccl-env.so if it can be loaded", since: "2.28",
        source: "src/plugin/env.cc:42",
        description: "Environment plugin: a library path, a suffix x for libnccl-env-x.so, or 'none'. Once loaded, the plugin answers every knob lookup, so the values shown here may not be what NCCL sees.", ..PLUGIN },
    KnobSpec { name: "NCCL_GIN_PLUGIN", ty: T::Text, since: "2.29.7", source: "src/plugin/gin.cc:203",
        description: "GPU-initiated networking plugin: a library path or a suffix x for libnccl-gin-x.so.", ..PLUGIN },
    KnobSpec { name: "NCCL_GIN_PLUGIN_REF_COUNT", default: "0", range: Some((0, i64::MAX)), unit: U::Count, category: C::Debug, since: "2.29.7", source: "src/plugin/gin.cc:23",
        description: "Initial reference count of GIN plugin libraries, which keeps them loaded across communicators.", ..PLUGIN },
    KnobSpec { name: "NCCL_NET_PLUGIN", ty: T::NameList, auto: "libnccl-net.so if it can be loaded", since: "2.11",
        related: &["NCCL_NET"], source: "src/plugin/net.cc:263",
        description: "Network plugins to try, as a comma list of library paths or suffixes x for libnccl-net-x.so, or 'none'. The built-in IB and Socket transports are always tried after them.", ..PLUGIN },
    KnobSpec { name: "NCCL_NET_PLUGIN_REF_COUNT", default: "0", range: Some((0, i64::MAX)), unit: U::Count, category: C::Debug, since: "2.26.2", source: "src/plugin/net.cc:38",
        description: "Initial reference count of external network plugin libraries.", ..PLUGIN },
    KnobSpec { name: "NCCL_PROFILER_PLUGIN", ty: T::Text, auto: "libnccl-profiler.so if it can be loaded", since: "2.23.4", source: "src/plugin/profiler.cc:58",
        description: "Profiler plugin: a library path, a suffix x for libnccl-profiler-x.so, STATIC_PLUGIN, or 'none'.", ..PLUGIN },
    KnobSpec { name: "NCCL_RMA_PLUGIN", ty: T::Text, since: "2.30.7", source: "src/plugin/rma.cc:166",
        description: "Host RMA plugin: a library path or a suffix x for libnccl-rma-x.so.", ..PLUGIN },
    KnobSpec { name: "NCCL_RMA_PLUGIN_REF_COUNT", default: "0", range: Some((0, i64::MAX)), unit: U::Count, category: C::Debug, since: "2.30.7", source: "src/plugin/rma.cc:23",
        description: "Initial reference count of RMA plugin libraries.", ..PLUGIN },
    KnobSpec { name: "NCCL_TUNER_PLUGIN", ty: T::Text, auto: "libnccl-tuner.so, then tuner symbols of the net plugin, then the built-in model", since: "2.19.1",
        source: "src/plugin/tuner.cc:58",
        description: "Tuner plugin, which can override NCCL's choice of algorithm, protocol and channels: a library path, a suffix x for libnccl-tuner-x.so, or 'none'.", ..PLUGIN },
];
