//! The shape of one registry entry: [`KnobSpec`] and the small enums it is made of.

use serde::Serialize;

/// One allowed value of an enumerated knob and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Choice {
    /// The value as written (a keyword, or an integer in decimal).
    pub value: &'static str,
    /// What NCCL does with it, in our words.
    pub meaning: &'static str,
}

/// How NCCL parses a knob's value. Each variant names the NCCL routine whose rules it models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "choices")]
pub enum KnobType {
    /// Integer read by `NCCL_PARAM` (`src/include/param.h`, `ncclLoadParam`): C
    /// `strtoll(s, NULL, 0)`, so `0x..` is hex and a leading `0` octal; only overflow makes NCCL
    /// fall back to the default, garbage reads as whatever number prefix it has (often 0).
    Int,
    /// An `NCCL_PARAM` integer used as a switch: 0 is off, anything else on.
    Bool,
    /// A boolean of NCCL's typed registry (`src/include/param/parser_default.h`): `1/T/TRUE` or
    /// `0/F/FALSE`, case-insensitive; anything else is rejected and the default kept.
    TypedBool,
    /// An `NCCL_PARAM` integer whose only meaningful values are listed.
    Choice(&'static [Choice]),
    /// A keyword compared case-insensitively (`strcasecmp`); an unknown word leaves the default.
    Keyword(&'static [Choice]),
    /// A keyword compared case-sensitively (`strcmp`); an unknown word leaves the default.
    ExactKeyword(&'static [Choice]),
    /// A path type name (`LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS`, case-sensitive) or a legacy
    /// integer 0..5 (`src/graph/paths.cc:ncclGetLevel`).
    PathLevel,
    /// A NIC merge distance: the value must start with `LOC PORT PIX PXB P2C PXN PHB SYS`
    /// (`src/graph/xml.h:kvConvertToInt`, prefix compare).
    MergeLevel,
    /// A device filter `[^][=]name[:port[:rail[:plane]]],...` (`src/misc/utils.cc:parseStringList`).
    DeviceList,
    /// An algorithm list for `NCCL_ALGO` (`src/graph/tuning.cc:parseList`).
    AlgoList,
    /// A protocol list for `NCCL_PROTO` (`src/graph/tuning.cc:parseList`).
    ProtoList,
    /// A comma list of flag names, `^` to invert (`src/include/param/parser_bitset.h`).
    Bitset(&'static [Choice]),
    /// Free text, used verbatim.
    Text,
    /// The path of a file NCCL reads.
    File,
    /// The path of a file NCCL writes.
    OutputFile,
    /// `host:port`, `[ipv6]:port` (`src/misc/socket.cc:ncclSocketGetAddrFromString`).
    HostPort,
    /// A CPU list such as `0-3,8` (`src/misc/utils.cc:ncclStrListToCpuset`).
    CpuList,
    /// Up to six integers separated by spaces (`NCCL_THREAD_THRESHOLDS`, read with `sscanf`).
    IntList,
    /// NIC fusion groups: `;`-separated groups of `,`-separated NIC names.
    NicGroups,
    /// A comma list of names (plugins, knob names).
    NameList,
    /// `AUTO`, `ALL` or `MAX:<n>` (`src/graph/topo.cc:getNetDevsPolicyOnce`).
    NetdevsPolicy,
    /// `DEFAULT`, `EFFICIENCY`, `ZERO` joined by `|`, or a legacy digit (`src/init.cc`).
    CtaPolicy,
    /// A floating-point number (nccl-tests, `strtod`).
    Float,
}

impl KnobType {
    /// A short name for tables: `int`, `bool`, `keyword`, `device-list`...
    pub fn short_name(&self) -> &'static str {
        match self {
            KnobType::Int => "int",
            KnobType::Bool => "bool",
            KnobType::TypedBool => "bool",
            KnobType::Choice(_) => "enum",
            KnobType::Keyword(_) | KnobType::ExactKeyword(_) => "keyword",
            KnobType::PathLevel => "path-level",
            KnobType::MergeLevel => "merge-level",
            KnobType::DeviceList => "device-list",
            KnobType::AlgoList => "algo-list",
            KnobType::ProtoList => "proto-list",
            KnobType::Bitset(_) => "flag-list",
            KnobType::Text => "string",
            KnobType::File => "file",
            KnobType::OutputFile => "output-file",
            KnobType::HostPort => "host:port",
            KnobType::CpuList => "cpu-list",
            KnobType::IntList => "int-list",
            KnobType::NicGroups => "nic-groups",
            KnobType::NameList => "name-list",
            KnobType::NetdevsPolicy | KnobType::CtaPolicy => "policy",
            KnobType::Float => "float",
        }
    }

    /// How a value is written and parsed, in one sentence.
    pub fn syntax(&self) -> &'static str {
        match self {
            KnobType::Int => {
                "integer, C strtoll base 0: 0x.. is hex, a leading 0 is octal; a non-number reads as its numeric prefix (often 0)"
            }
            KnobType::Bool => {
                "integer switch: 0 is off, any other number on; words like 'true' read as 0"
            }
            KnobType::TypedBool => {
                "1/T/TRUE or 0/F/FALSE, any case; anything else keeps the default"
            }
            KnobType::Choice(_) => "integer, one of the listed values",
            KnobType::Keyword(_) => {
                "one of the listed words, any case; an unknown word keeps the default"
            }
            KnobType::ExactKeyword(_) => {
                "one of the listed words, exact case; an unknown word keeps the default"
            }
            KnobType::PathLevel => {
                "LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB or SYS (exact case), or a legacy number 0-5"
            }
            KnobType::MergeLevel => {
                "LOC, PORT, PIX, PXB, P2C, PXN, PHB or SYS (exact case, prefix match)"
            }
            KnobType::DeviceList => {
                "[^][=]name[:port[:rail[:plane]]],... ; ^ excludes, = matches names exactly (else by prefix)"
            }
            KnobType::AlgoList => {
                "[Func:][^]Algo,...;Func:... with algorithms Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT"
            }
            KnobType::ProtoList => "[Func:][^]Proto,...;Func:... with protocols LL, LL128, Simple",
            KnobType::Bitset(_) => {
                "comma list of the listed names, any case; a leading ^ means all except"
            }
            KnobType::Text => "text, used verbatim",
            KnobType::File => "path of a file to read (no ~ expansion)",
            KnobType::OutputFile => "path of a file to write (no ~ expansion)",
            KnobType::HostPort => "host:port, or [ipv6]:port",
            KnobType::CpuList => "CPU list such as 0-3,8",
            KnobType::IntList => {
                "up to six integers separated by spaces; a negative one keeps its default"
            }
            KnobType::NicGroups => {
                "NIC groups separated by ';', names in a group by ',' (name[:port])"
            }
            KnobType::NameList => "comma-separated names",
            KnobType::NetdevsPolicy => "AUTO, ALL or MAX:<n> (any case)",
            KnobType::CtaPolicy => {
                "DEFAULT, EFFICIENCY, ZERO joined by '|' (any case), or a legacy digit 0-2"
            }
            KnobType::Float => "decimal number",
        }
    }

    /// The listed values of an enumerated type, if any.
    pub fn choices(&self) -> &'static [Choice] {
        match self {
            KnobType::Choice(c)
            | KnobType::Keyword(c)
            | KnobType::ExactKeyword(c)
            | KnobType::Bitset(c) => c,
            _ => &[],
        }
    }

    /// True for the types whose value is read as an integer (C `strtoll`).
    pub fn is_integer(&self) -> bool {
        matches!(self, KnobType::Int | KnobType::Bool | KnobType::Choice(_))
    }

    /// True for on/off types.
    pub fn is_switch(&self) -> bool {
        matches!(self, KnobType::Bool | KnobType::TypedBool)
    }
}

/// What a number stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// No unit (switches, words, counts of nothing in particular).
    None,
    /// Bytes.
    Bytes,
    /// Seconds.
    Seconds,
    /// Milliseconds.
    Milliseconds,
    /// Microseconds.
    Microseconds,
    /// Nanoseconds.
    Nanoseconds,
    /// Gigabytes per second.
    GigabytesPerSecond,
    /// Events (messages) per second.
    PerSecond,
    /// Percent.
    Percent,
    /// GPU threads.
    Threads,
    /// Channels (CTAs).
    Channels,
    /// A count (retries, peers, queue entries...).
    Count,
    /// An exponent `n` of a time `4.096 µs × 2^n` (InfiniBand local ACK timeout).
    AckTimeoutExponent,
    /// A POSIX signal number.
    Signal,
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unit::None => "-",
            Unit::Bytes => "bytes",
            Unit::Seconds => "seconds",
            Unit::Milliseconds => "milliseconds",
            Unit::Microseconds => "microseconds",
            Unit::Nanoseconds => "nanoseconds",
            Unit::GigabytesPerSecond => "GB/s",
            Unit::PerSecond => "per second",
            Unit::Percent => "percent",
            Unit::Threads => "threads",
            Unit::Channels => "channels",
            Unit::Count => "count",
            Unit::AckTimeoutExponent => "exponent n of 4.096 µs × 2^n",
            Unit::Signal => "signal number",
        })
    }
}

/// The part of NCCL (or rnccl) a knob belongs to. NCCL has no such grouping for knobs; this one
/// follows the reference report (`nccl-internals.md` §1.5) and NCCL's source directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subsystem {
    /// Memory allocation (cuMem, memory pools).
    Alloc,
    /// Bootstrap and rendezvous.
    Bootstrap,
    /// CollNet (in-network reduction).
    Collnet,
    /// Overrides of `ncclConfig_t` fields.
    Config,
    /// Logging and debugging aids.
    Debug,
    /// Reading the environment itself (conf files, caching).
    Env,
    /// GPU-initiated networking.
    Gin,
    /// Topology and graph search.
    Graph,
    /// InfiniBand / RoCE verbs transport.
    Ib,
    /// Communicator initialisation.
    Init,
    /// Kernel launch.
    Launch,
    /// Multi-node NVLink.
    Mnnvl,
    /// Network transport (generic over plugins).
    Net,
    /// NVLink SHARP.
    Nvls,
    /// Peer-to-peer (GPU to GPU) transport.
    P2p,
    /// Plugin loading and bundled plugins.
    Plugin,
    /// Protocol buffers and chunk sizes.
    Proto,
    /// The proxy thread.
    Proxy,
    /// Reliability, availability, serviceability.
    Ras,
    /// Buffer registration.
    Reg,
    /// Host RMA.
    Rma,
    /// Shared-memory transport.
    Shm,
    /// TCP sockets.
    Socket,
    /// Symmetric memory kernels.
    Symmetric,
    /// Algorithm and protocol tuning.
    Tuning,
    /// nccl-tests, NVIDIA's benchmark suite.
    NcclTests,
    /// rnccl's own settings.
    Rnccl,
}

impl Subsystem {
    /// Every subsystem, in display order.
    pub const ALL: [Subsystem; 27] = [
        Subsystem::Alloc,
        Subsystem::Bootstrap,
        Subsystem::Collnet,
        Subsystem::Config,
        Subsystem::Debug,
        Subsystem::Env,
        Subsystem::Gin,
        Subsystem::Graph,
        Subsystem::Ib,
        Subsystem::Init,
        Subsystem::Launch,
        Subsystem::Mnnvl,
        Subsystem::Net,
        Subsystem::Nvls,
        Subsystem::P2p,
        Subsystem::Plugin,
        Subsystem::Proto,
        Subsystem::Proxy,
        Subsystem::Ras,
        Subsystem::Reg,
        Subsystem::Rma,
        Subsystem::Shm,
        Subsystem::Socket,
        Subsystem::Symmetric,
        Subsystem::Tuning,
        Subsystem::NcclTests,
        Subsystem::Rnccl,
    ];

    /// The lower-case name used on the command line and in JSON (`ib`, `nccl-tests`).
    pub fn name(&self) -> &'static str {
        match self {
            Subsystem::Alloc => "alloc",
            Subsystem::Bootstrap => "bootstrap",
            Subsystem::Collnet => "collnet",
            Subsystem::Config => "config",
            Subsystem::Debug => "debug",
            Subsystem::Env => "env",
            Subsystem::Gin => "gin",
            Subsystem::Graph => "graph",
            Subsystem::Ib => "ib",
            Subsystem::Init => "init",
            Subsystem::Launch => "launch",
            Subsystem::Mnnvl => "mnnvl",
            Subsystem::Net => "net",
            Subsystem::Nvls => "nvls",
            Subsystem::P2p => "p2p",
            Subsystem::Plugin => "plugin",
            Subsystem::Proto => "proto",
            Subsystem::Proxy => "proxy",
            Subsystem::Ras => "ras",
            Subsystem::Reg => "reg",
            Subsystem::Rma => "rma",
            Subsystem::Shm => "shm",
            Subsystem::Socket => "socket",
            Subsystem::Symmetric => "symmetric",
            Subsystem::Tuning => "tuning",
            Subsystem::NcclTests => "nccl-tests",
            Subsystem::Rnccl => "rnccl",
        }
    }
}

impl std::fmt::Display for Subsystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Who should touch a knob. The classes answer NVIDIA/nccl#790 (debug knobs are undocumented on
/// purpose because some corrupt data): `env-explain` warns when a debug-only or dangerous knob is
/// in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// Describes the site: interfaces, HCAs, plugins, addresses, files. Admins set these.
    System,
    /// Trades performance or resources; safe to change, the default is usually best.
    Tuning,
    /// For diagnosing problems; leave unset in production.
    Debug,
    /// Can hang jobs, corrupt results or disable safety checks; only with a reason.
    Dangerous,
}

impl Category {
    /// Every category.
    pub const ALL: [Category; 4] = [
        Category::System,
        Category::Tuning,
        Category::Debug,
        Category::Dangerous,
    ];

    /// The lower-case name (`system`, `tuning`, `debug`, `dangerous`).
    pub fn name(&self) -> &'static str {
        match self {
            Category::System => "system",
            Category::Tuning => "tuning",
            Category::Debug => "debug",
            Category::Dangerous => "dangerous",
        }
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which program reads a knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "name")]
pub enum Origin {
    /// libnccl itself.
    Core,
    /// A plugin bundled in NCCL's repository (`plugins/<name>`), not libnccl.
    Plugin(&'static str),
    /// nccl-tests.
    NcclTests,
    /// rnccl only.
    Rnccl,
}

/// Whether NCCL still reads a knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Status {
    /// Read and acted on.
    Active,
    /// Still read, but NCCL advises another knob (named in `instead`, empty if none).
    Deprecated {
        /// The NCCL version that deprecated it.
        since: &'static str,
        /// The knob to use instead.
        instead: &'static str,
    },
    /// Declared in NCCL's source but nothing acts on its value any more.
    Inert,
    /// No longer read at all.
    Removed {
        /// The last NCCL release that read it.
        last: &'static str,
        /// The knob that replaced it (empty if none).
        instead: &'static str,
    },
}

/// One knob: everything rnccl knows about it. The registry holds one per name.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KnobSpec {
    /// The environment variable name.
    pub name: &'static str,
    /// How the value is parsed.
    #[serde(rename = "type")]
    pub ty: KnobType,
    /// The default as NCCL spells it (`-2` and `-1` are NCCL's "auto" sentinels); empty when
    /// NCCL leaves the knob unset.
    pub default: &'static str,
    /// What the default resolves to, where known (e.g. "4194304 (4 MiB)"); empty if nothing to add.
    pub auto: &'static str,
    /// The valid range of an integer value, inclusive. The default is always accepted, even when
    /// it is a sentinel outside the range.
    pub range: Option<(i64, i64)>,
    /// What the number counts.
    pub unit: Unit,
    /// Grouping for filtering and documentation.
    pub subsystem: Subsystem,
    /// Who should set it.
    pub category: Category,
    /// Which program reads it.
    pub origin: Origin,
    /// The first NCCL release that reads it: from NCCL's `env.rst` "(since ...)" notes where
    /// given, otherwise the first release tag of NVIDIA/nccl whose `src/` names it (the oldest tag
    /// is 2.3.5, so "2.3.5" means "2.3.5 or earlier"). Empty for knobs NCCL does not read.
    pub since: &'static str,
    /// Whether NCCL still reads it.
    pub status: Status,
    /// What it does, in our words.
    pub description: &'static str,
    /// Knobs that interact with it.
    pub related: &'static [&'static str],
    /// Where NCCL reads it (`file:line` in NVIDIA/nccl 2.30.7, or nccl-tests / a plugin).
    pub source: &'static str,
}

/// The oldest release tag in NVIDIA/nccl's history; a `since` equal to it means "this or earlier".
pub const OLDEST_TAG: &str = "2.3.5";

/// The NCCL release the registry describes.
pub const NCCL_VERSION: &str = "2.30.7";

impl KnobSpec {
    /// The NCCL version range in words: "2.12.7 – 2.30.7", "≤2.3.5 – 2.30.7", "2.1 – 2.4.8" for a
    /// removed knob, "nccl-tests" or "rnccl" for knobs NCCL does not read.
    pub fn versions(&self) -> String {
        let since = match self.since {
            "" => {
                return match self.origin {
                    Origin::NcclTests => "nccl-tests".into(),
                    Origin::Rnccl => "rnccl".into(),
                    Origin::Plugin(_) => format!("bundled plugin (NCCL {NCCL_VERSION})"),
                    Origin::Core => "unknown".into(),
                };
            }
            s if s == OLDEST_TAG => format!("≤{s}"),
            s => s.to_string(),
        };
        match self.status {
            Status::Removed { last, .. } => format!("{since} – {last}"),
            _ => format!("{since} – {NCCL_VERSION}"),
        }
    }

    /// The default in words, with what it resolves to where known: "-2: 4194304 (4 MiB)",
    /// "unset: any family", "unset".
    pub fn default_text(&self) -> String {
        match (self.default, self.auto) {
            ("", "") => "unset".into(),
            ("", auto) => format!("unset: {auto}"),
            (d, "") => d.to_string(),
            (d, auto) => format!("{d}: {auto}"),
        }
    }

    /// The values the knob accepts, in words, for error messages: "an integer from 64 to 512",
    /// "one of VERSION, WARN, INFO, ABORT, TRACE (any case)", or its type's syntax.
    pub fn accepted(&self) -> String {
        let words = |c: &[Choice]| c.iter().map(|c| c.value).collect::<Vec<_>>().join(", ");
        match self.ty {
            KnobType::Int | KnobType::Bool => match self.range {
                Some((lo, i64::MAX)) => format!("an integer, {lo} or more"),
                Some((lo, hi)) => format!("an integer from {lo} to {hi}"),
                None if self.ty == KnobType::Bool => "0 (off) or 1 (on)".into(),
                None => "an integer (0x.. is hex, a leading 0 octal)".into(),
            },
            KnobType::Choice(c) => format!("one of {}", words(c)),
            KnobType::TypedBool => "1, T, TRUE, 0, F or FALSE (any case)".into(),
            KnobType::Keyword(c) => format!("one of {} (any case)", words(c)),
            KnobType::ExactKeyword(c) => format!("one of {} (exact case)", words(c)),
            KnobType::Bitset(c) => format!(
                "a comma list of {} (any case), with a leading ^ for all but those",
                words(c)
            ),
            other => other.syntax().to_string(),
        }
    }

    /// True when rnccl's engine acts on this knob (see `registry/honoured.rs`).
    pub fn honoured(&self) -> bool {
        super::honoured::HONOURED.contains(&self.name)
    }
}
