//! Topology and graph search (`src/graph/`), algorithm/protocol tuning (`src/graph/tuning.cc`)
//! and protocol buffer sizes (`src/init.cc`, `src/enqueue.cc`).

use super::BASE;
use super::spec::{Category as C, Choice, KnobSpec, KnobType as T, Status, Subsystem, Unit as U};

/// Smallest `NCCL_BUFFSIZE` rnccl accepts: 8 steps of 64 bytes.
pub const BUFFSIZE_MIN: i64 = 512;
/// Largest `NCCL_BUFFSIZE` rnccl accepts: 1 GiB per connection (128 MiB steps). NCCL has no
/// upper bound, but every connection allocates the whole buffer, so larger values only exhaust
/// memory (NCCL's default is 4 MiB).
pub const BUFFSIZE_MAX: i64 = 1 << 30;

const GRAPH: KnobSpec = KnobSpec {
    subsystem: Subsystem::Graph,
    category: C::Tuning,
    ..BASE
};
const TUNING: KnobSpec = KnobSpec {
    subsystem: Subsystem::Tuning,
    category: C::Tuning,
    ..BASE
};
const PROTO: KnobSpec = KnobSpec {
    subsystem: Subsystem::Proto,
    category: C::Tuning,
    ..BASE
};

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "NCCL_CROSS_NIC", ty: T::Choice(&[
            Choice { value: "0", meaning: "keep every ring/tree on the same NIC (rail) on all nodes" },
            Choice { value: "1", meaning: "allow rings/trees to use different NICs on different nodes" },
            Choice { value: "2", meaning: "prefer the same rail, cross only if that is faster" },
        ]), default: "2", since: "2.5.6", related: &["NCCL_NETDEVS_POLICY"], source: "src/graph/search.cc:16",
        description: "Whether a channel may enter a node through one NIC and leave another through a different one. Rail-optimised fabrics, where NIC i of every node sits on switch i, want 0.", ..GRAPH },
    KnobSpec { name: "NCCL_GRAPH_DUMP_FILE", ty: T::OutputFile, category: C::Debug, since: "2.6",
        related: &["NCCL_GRAPH_DUMP_FILE_RANK", "NCCL_GRAPH_FILE"], source: "src/graph/search.cc:1355",
        description: "Writes the rings, trees and other graphs NCCL computed to this file as <graphs> XML, which NCCL_GRAPH_FILE can load back.", ..GRAPH },
    KnobSpec { name: "NCCL_GRAPH_DUMP_FILE_RANK", default: "0", range: Some((0, i64::MAX)), category: C::Debug, since: "2.6.4",
        related: &["NCCL_GRAPH_DUMP_FILE"], source: "src/init.cc:856",
        description: "The rank that writes NCCL_GRAPH_DUMP_FILE.", ..GRAPH },
    KnobSpec { name: "NCCL_GRAPH_FILE", ty: T::File, category: C::Debug, since: "2.6",
        related: &["NCCL_GRAPH_DUMP_FILE", "NCCL_TOPO_FILE"], source: "src/graph/search.cc:1111",
        description: "Loads rings and trees from a <graphs> XML file instead of searching for them. A stale file left in /etc/nccl.conf is a known cause of baffling failures (NVIDIA/nccl#1008).", ..GRAPH },
    KnobSpec { name: "NCCL_MAX_NCHANNELS", default: "-2", auto: "64", range: Some((1, 64)), unit: U::Channels, since: "2.5.0",
        status: Status::Deprecated { since: "2.17", instead: "NCCL_MAX_CTAS" },
        related: &["NCCL_MAX_CTAS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NRINGS"], source: "src/graph/connect.cc:332",
        description: "Upper bound on the channels (thread blocks) a collective uses; combined with NCCL_MAX_CTAS by taking the smaller.", ..GRAPH },
    KnobSpec { name: "NCCL_MAX_NRINGS", default: "-2", range: Some((1, 64)), unit: U::Channels, since: "2.0.5",
        status: Status::Deprecated { since: "2.5.0", instead: "NCCL_MAX_NCHANNELS" },
        related: &["NCCL_MAX_NCHANNELS"], source: "src/graph/connect.cc:329",
        description: "Old name of NCCL_MAX_NCHANNELS, read only when that one is not set.", ..GRAPH },
    KnobSpec { name: "NCCL_MIN_NCHANNELS", default: "-2", auto: "0", range: Some((0, 64)), unit: U::Channels, since: "2.5.0",
        status: Status::Deprecated { since: "2.17", instead: "NCCL_MIN_CTAS" },
        related: &["NCCL_MIN_CTAS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NRINGS"], source: "src/graph/connect.cc:331",
        description: "Lower bound on channels: NCCL duplicates the channels it found until there are this many.", ..GRAPH },
    KnobSpec { name: "NCCL_MIN_NRINGS", default: "-2", range: Some((0, 64)), unit: U::Channels, since: "2.2.0",
        status: Status::Deprecated { since: "2.5.0", instead: "NCCL_MIN_NCHANNELS" },
        related: &["NCCL_MIN_NCHANNELS"], source: "src/graph/connect.cc:328",
        description: "Old name of NCCL_MIN_NCHANNELS, read only when that one is not set.", ..GRAPH },
    KnobSpec { name: "NCCL_MNNVL_RAIL_PER_HOST", ty: T::Bool, default: "0", since: "2.28.7", related: &["NCCL_CROSS_NIC"], source: "src/graph/search.cc:591",
        description: "On multi-node NVLink systems with NCCL_CROSS_NIC=0, decides rails per host from NIC PCI id and port rather than from the ASIC GUID.", ..GRAPH },
    KnobSpec { name: "NCCL_MNNVL_SCATTER_NETS_ENABLE", ty: T::Bool, default: "1", since: "2.27.5", source: "src/graph/search.cc:540",
        description: "On multi-host NVLink topologies, orders each GPU's preferred NICs GPU by GPU rather than channel by channel, spreading traffic over NICs.", ..GRAPH },
    KnobSpec { name: "NCCL_NETDEVS_POLICY", ty: T::NetdevsPolicy, default: "AUTO", since: "2.28", related: &["NCCL_CROSS_NIC"], source: "src/graph/topo.cc:2005",
        description: "How many NICs each GPU may use: AUTO shares NICs by bandwidth, ALL lets every GPU use every NIC, MAX:n caps it at n. An unrecognised value means AUTO.", ..GRAPH },
    KnobSpec { name: "NCCL_TOPO_DUMP_FILE", ty: T::OutputFile, category: C::Debug, since: "2.6",
        related: &["NCCL_TOPO_DUMP_FILE_RANK", "NCCL_TOPO_FILE"], source: "src/init.cc:1135",
        description: "Writes the topology NCCL detected (PCI tree, GPUs, NICs, links) to this file as <system> XML.", ..GRAPH },
    KnobSpec { name: "NCCL_TOPO_DUMP_FILE_RANK", default: "0", range: Some((0, i64::MAX)), category: C::Debug, since: "2.6.4",
        related: &["NCCL_TOPO_DUMP_FILE"], source: "src/graph/topo.cc:992",
        description: "The rank that writes NCCL_TOPO_DUMP_FILE.", ..GRAPH },
    KnobSpec { name: "NCCL_TOPO_FILE", ty: T::File, auto: "/var/run/nvidia-topologyd/virtualTopology.xml when it exists", category: C::System, since: "2.6",
        related: &["NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_FILE"], source: "src/graph/topo.cc:1774",
        description: "Topology XML read before detection; what it leaves out is detected. Cloud VMs ship one because the PCI tree a guest sees is not the real one; a wrong file costs bandwidth silently.", ..GRAPH },
    KnobSpec { name: "NCCL_TOPO_SPLIT_MLOPART", ty: T::Bool, default: "1", since: "2.30.7", source: "src/graph/topo.cc:588",
        description: "Gives each MLOPart partition of a GPU its own device node in the topology.", ..GRAPH },

    KnobSpec { name: "NCCL_ALGO", ty: T::AlgoList, auto: "chosen per call by the tuning model", category: C::Debug, since: "2.5",
        related: &["NCCL_PROTO"], source: "src/graph/tuning.cc:458",
        description: "Restricts the algorithms NCCL may choose, globally or per collective, e.g. 'Ring', '^Tree' or 'AllReduce:Tree;Broadcast:Ring'. An unknown name fails initialisation; if a collective is left with no usable algorithm it fails at launch. Meant for debugging and benchmarking.", ..TUNING },
    KnobSpec { name: "NCCL_LL128_C2C", ty: T::Bool, default: "1", since: "2.27.3", related: &["NCCL_PROTO"], source: "src/graph/tuning.cc:235",
        description: "On Hopper and later, enables LL128 by default across paths up to PXN (including C2C); with 0 only up to PXB.", ..TUNING },
    KnobSpec { name: "NCCL_LL128_NTHREADS", default: "-2", auto: "640", range: Some((160, 640)), unit: U::Threads, since: "2.5.6",
        related: &["NCCL_NTHREADS"], source: "src/graph/tuning.cc:15",
        description: "Threads per block for the LL128 protocol; a multiple of 32.", ..TUNING },
    KnobSpec { name: "NCCL_NET_OVERHEAD", default: "-2", auto: "1000 (2000 on AMD CPUs)", range: Some((0, i64::MAX)), unit: U::Nanoseconds, since: "2.18.1",
        source: "src/graph/tuning.cc:226",
        description: "Per-step cost of posting to the network assumed by the latency model when it picks algorithms (tripled for Simple).", ..TUNING },
    KnobSpec { name: "NCCL_NTHREADS", default: "-2", auto: "512 (256 when ring bandwidth is at most PCIe's)", range: Some((64, 512)), unit: U::Threads, since: "2.3.5",
        related: &["NCCL_LL128_NTHREADS"], source: "src/graph/tuning.cc:14",
        description: "Threads per block for the Simple and LL protocols; a multiple of 32.", ..TUNING },
    KnobSpec { name: "NCCL_PAT_ENABLE", ty: T::Choice(&[
            Choice { value: "0", meaning: "never use PAT" },
            Choice { value: "1", meaning: "allow PAT" },
            Choice { value: "2", meaning: "allow PAT where it applies (auto)" },
        ]), default: "2", since: "2.23.4", related: &["NCCL_ALGO"], source: "src/graph/tuning.cc:215",
        description: "The PAT algorithm for AllGather and ReduceScatter, which NCCL uses only with one GPU per node over the network.", ..TUNING },
    KnobSpec { name: "NCCL_PROTO", ty: T::ProtoList, auto: "chosen per call by the tuning model", category: C::Dangerous, since: "2.5",
        related: &["NCCL_ALGO", "NCCL_LL128_C2C"], source: "src/graph/tuning.cc:453",
        description: "Restricts the protocols NCCL may choose (LL, LL128, Simple), in NCCL_ALGO's syntax. Forcing LL128 on a platform where NCCL disables it can corrupt data (NVIDIA/nccl#790); use it to debug only.", ..TUNING },
    KnobSpec { name: "NCCL_THREAD_THRESHOLDS", ty: T::IntList, since: "2.5.6", related: &["NCCL_NTHREADS"], source: "src/graph/tuning.cc:598",
        description: "Bytes per thread below which NCCL cuts threads and channels, as six numbers: Tree LL, LL128, Simple, then Ring LL, LL128, Simple. A negative number keeps that default.", ..TUNING },

    KnobSpec { name: "NCCL_BUFFSIZE", default: "-2", auto: "4194304 (4 MiB)", range: Some((BUFFSIZE_MIN, BUFFSIZE_MAX)), unit: U::Bytes, since: "2.3.5",
        related: &["NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE"], source: "src/init.cc:814",
        description: "Buffer of the Simple protocol per connection and channel; it is cut into 8 steps. Powers of two are advised. Memory use grows with buffer size × channels × peers. rnccl accepts 512 B (8 steps of 64 B) to 1 GiB; NCCL sets no upper bound, but every connection allocates the whole buffer.", ..PROTO },
    KnobSpec { name: "NCCL_CHUNK_SIZE", default: "0", auto: "derived from the P2P chunk size", range: Some((0, i64::MAX)), unit: U::Bytes, since: "2.12.7",
        related: &["NCCL_P2P_NET_CHUNKSIZE", "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_P2P_PCI_CHUNKSIZE"], source: "src/enqueue.cc:860",
        description: "Forces the chunk size of send/receive operations.", ..PROTO },
    KnobSpec { name: "NCCL_LL128_BUFFSIZE", default: "-2", auto: "4915200", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.7.3",
        related: &["NCCL_BUFFSIZE"], source: "src/init.cc:816",
        description: "Buffer of the LL128 protocol per connection and channel.", ..PROTO },
    KnobSpec { name: "NCCL_LL_BUFFSIZE", default: "-2", auto: "524288", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.7.3",
        related: &["NCCL_BUFFSIZE"], source: "src/init.cc:815",
        description: "Buffer of the LL protocol per connection and channel.", ..PROTO },
    KnobSpec { name: "NCCL_P2P_LL_THRESHOLD", default: "16384", range: Some((0, i64::MAX)), unit: U::Bytes, since: "2.14",
        related: &["NCCL_ALLOC_P2P_NET_LL_BUFFERS"], source: "src/enqueue.cc:859",
        description: "Largest send/receive that uses the LL protocol.", ..PROTO },
    KnobSpec { name: "NCCL_P2P_NET_CHUNKSIZE", default: "131072", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.14",
        related: &["NCCL_CHUNK_SIZE"], source: "src/init.cc:818",
        description: "Chunk size of send/receive over the network (doubled on Arm hosts with Blackwell GPUs).", ..PROTO },
    KnobSpec { name: "NCCL_P2P_NVL_CHUNKSIZE", default: "524288", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.16.2",
        related: &["NCCL_CHUNK_SIZE"], source: "src/init.cc:820",
        description: "Chunk size of send/receive when every local peer is reached over NVLink.", ..PROTO },
    KnobSpec { name: "NCCL_P2P_PCI_CHUNKSIZE", default: "131072", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.16.2",
        related: &["NCCL_CHUNK_SIZE"], source: "src/init.cc:819",
        description: "Chunk size of send/receive over PCIe.", ..PROTO },
];
