//! Communicator set-up and kernel launch: `ncclConfig_t` overrides (`src/init.cc:envConfigOverride`),
//! initialisation (`src/init.cc`, `src/transport.cc`), launch (`src/enqueue.cc`) and the proxy
//! thread (`src/proxy.cc`).

use super::BASE;
use super::spec::{Category as C, Choice, KnobSpec, KnobType as T, Status, Subsystem, Unit as U};

const LAUNCH: KnobSpec = KnobSpec {
    subsystem: Subsystem::Launch,
    category: C::Tuning,
    ..BASE
};
const CONFIG: KnobSpec = KnobSpec {
    subsystem: Subsystem::Config,
    category: C::Tuning,
    ..BASE
};
const INIT: KnobSpec = KnobSpec {
    subsystem: Subsystem::Init,
    category: C::Tuning,
    ..BASE
};
const PROXY: KnobSpec = KnobSpec {
    subsystem: Subsystem::Proxy,
    category: C::Tuning,
    ..BASE
};

const OFF_ON: &[Choice] = &[
    Choice {
        value: "0",
        meaning: "off",
    },
    Choice {
        value: "1",
        meaning: "on",
    },
];

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "NCCL_ALLGATHERV_ENABLE", ty: T::Bool, default: "1", since: "2.29.2", source: "src/enqueue.cc:30",
        description: "Runs Broadcast as an internal AllGatherV task when copy-engine collectives are off.", ..LAUNCH },
    KnobSpec { name: "NCCL_GRAPH_HELPER_DISABLE", ty: T::Bool, default: "0", since: "2.11.4", status: Status::Inert, source: "src/init.cc:391",
        description: "Used to switch off a helper thread for CUDA-graph launches; NCCL 2.30.7 still declares it but nothing reads it.", ..LAUNCH },
    KnobSpec { name: "NCCL_GROUP_CUDA_STREAM", ty: T::Bool, default: "0", auto: "0 with CUDA 9.2 or later", since: "2.3.5", status: Status::Inert, source: "src/init.cc:57",
        description: "Used to give group launches an internal CUDA stream; NCCL 2.30.7 still declares it but nothing reads it.", ..LAUNCH },
    KnobSpec { name: "NCCL_L1_SHARED_MEMORY_CARVEOUT", default: "0", auto: "CUDA's choice", range: Some((0, 100)), unit: U::Percent, since: "2.12.10", source: "src/enqueue.cc:29",
        description: "Preferred share of L1 cache given to shared memory for NCCL's kernels (cudaFuncAttributePreferredSharedMemoryCarveout); 0 leaves CUDA's default.", ..LAUNCH },
    KnobSpec { name: "NCCL_LAUNCH_MODE", ty: T::Keyword(&[
            Choice { value: "PARALLEL", meaning: "one launch per GPU" },
            Choice { value: "GROUP", meaning: "one cooperative multi-device launch (deprecated)" },
        ]), default: "PARALLEL", since: "2.1.0", source: "src/init.cc:1651",
        description: "How kernels are launched when one process drives several GPUs. Anything but GROUP means PARALLEL.", ..LAUNCH },
    KnobSpec { name: "NCCL_LAUNCH_ORDER_IMPLICIT", ty: T::Bool, default: "0", since: "2.26", source: "src/enqueue.cc:1538",
        description: "Orders operations of different communicators on one GPU in the order the host issued them, so applications need not order their streams.", ..LAUNCH },
    KnobSpec { name: "NCCL_LAUNCH_RACE_FATAL", ty: T::Bool, default: "1", category: C::Dangerous, since: "2.26", source: "src/misc/strongstream.cc:156",
        description: "Fails when two host threads launch on the same GPU at once, which can deadlock. With 0 the race is only logged.", ..LAUNCH },
    KnobSpec { name: "NCCL_MEM_SYNC_DOMAIN", ty: T::Choice(&[
            Choice { value: "0", meaning: "default domain" },
            Choice { value: "1", meaning: "remote domain" },
        ]), default: "1", since: "2.16", source: "src/enqueue.cc:1750",
        description: "CUDA memory synchronisation domain of NCCL's kernels (CUDA 12, Hopper and later), which keeps their memory fences from slowing compute kernels.", ..LAUNCH },
    KnobSpec { name: "NCCL_P2P_EPOCH_ENABLE", ty: T::Bool, default: "1", since: "2.29.2", source: "src/enqueue.cc:119",
        description: "Starts a new batch of send/receive work whenever the P2P epoch changes.", ..LAUNCH },
    KnobSpec { name: "NCCL_SET_STACK_SIZE", ty: T::Bool, default: "0", since: "2.9", source: "src/init.cc:1722",
        description: "Raises the CUDA stack limit to what NCCL's kernels need at initialisation, avoiding a later reconfiguration that can hang.", ..LAUNCH },
    KnobSpec { name: "NCCL_WORK_ARGS_BYTES", default: "9223372036854775807", auto: "no cap", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.22.3",
        source: "src/init.cc:396",
        description: "Cap on the size of kernel arguments, which in turn limits channels per launch.", ..LAUNCH },
    KnobSpec { name: "NCCL_WORK_FIFO_BYTES", default: "1048576", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.22.3", source: "src/init.cc:395",
        description: "Size of the queue through which the host hands work to the GPU; a power of two. Replaced NCCL_WORK_FIFO_DEPTH.", ..LAUNCH },

    KnobSpec { name: "NCCL_CGA_CLUSTER_SIZE", auto: "4, or the communicator's cgaClusterSize", range: Some((0, 8)), since: "2.16",
        source: "src/init.cc:1723",
        description: "Thread-block cluster size of NCCL's kernels on Hopper and later (0 to 8; more is clamped to 8). Overrides the communicator's cgaClusterSize.", ..CONFIG },
    KnobSpec { name: "NCCL_COMM_BLOCKING", ty: T::Choice(&[
            Choice { value: "0", meaning: "non-blocking: calls may return ncclInProgress" },
            Choice { value: "1", meaning: "blocking" },
        ]), auto: "1, or the communicator's blocking setting", category: C::System, since: "2.14", source: "src/init.cc:60",
        description: "Makes every communicator blocking or non-blocking, overriding the blocking field the application set.", ..CONFIG },
    KnobSpec { name: "NCCL_COMM_SHRINK_SHARE_RESOURCES", ty: T::Choice(OFF_ON), auto: "0, or the communicator's shrinkShare", since: "2.27.3", source: "src/init.cc:1766",
        description: "Lets communicators made by ncclCommShrink share their parent's resources.", ..CONFIG },
    KnobSpec { name: "NCCL_COMM_SPLIT_SHARE_RESOURCES", ty: T::Choice(OFF_ON), auto: "0, or the communicator's splitShare", since: "2.18.1", source: "src/init.cc:1765",
        description: "Lets communicators made by ncclCommSplit share their parent's channels and buffers, saving memory.", ..CONFIG },
    KnobSpec { name: "NCCL_CTA_POLICY", ty: T::CtaPolicy, default: "DEFAULT", since: "2.27", source: "src/init.cc:83",
        description: "How many thread blocks NCCL's kernels take: DEFAULT, EFFICIENCY (fewer, leaving SMs to compute) and ZERO, combinable with '|'. Overrides the communicator's CTAPolicy.", ..CONFIG },
    KnobSpec { name: "NCCL_GRAPH_MIXING_SUPPORT", ty: T::Choice(&[
            Choice { value: "0", meaning: "graph usage mode 0" },
            Choice { value: "1", meaning: "graph usage mode 2: mixing captured and uncaptured work is supported" },
        ]), auto: "1", since: "2.13", source: "src/init.cc:1731",
        description: "Whether operations captured in CUDA graphs may run alongside uncaptured ones or other graphs; 0 is cheaper when the application never mixes them.", ..CONFIG },
    KnobSpec { name: "NCCL_GRAPH_STREAM_ORDERING", ty: T::Choice(OFF_ON), auto: "1", category: C::Dangerous, since: "2.30", source: "src/enqueue.cc:1539",
        description: "Lets NCCL serialise its kernels during CUDA-graph capture. With 0 the application must order them itself or risk deadlocks.", ..CONFIG },
    KnobSpec { name: "NCCL_MAX_CTAS", auto: "64, or the communicator's maxCTAs", range: Some((1, 64)), unit: U::Channels, since: "2.17",
        related: &["NCCL_MIN_CTAS", "NCCL_MAX_NCHANNELS"], source: "src/init.cc:1725",
        description: "Most thread blocks (channels) a collective may use. Overrides the communicator's maxCTAs; values of 0 or less are ignored.", ..CONFIG },
    KnobSpec { name: "NCCL_MIN_CTAS", auto: "1, or the communicator's minCTAs", range: Some((1, 64)), unit: U::Channels, since: "2.17",
        related: &["NCCL_MAX_CTAS", "NCCL_MIN_NCHANNELS"], source: "src/init.cc:1726",
        description: "Fewest thread blocks (channels) a collective uses. Overrides the communicator's minCTAs; values of 0 or less are ignored, and it is capped at the maximum.", ..CONFIG },
    KnobSpec { name: "NCCL_NCHANNELS_PER_NET_PEER", auto: "chosen from bandwidth", range: Some((1, 64)), unit: U::Channels, since: "2.12.7",
        related: &["NCCL_P2P_PER_CHANNEL_NET_BW"], source: "src/init.cc:1729",
        description: "Channels send/receive uses per remote peer. Overrides the communicator's nChannelsPerNetPeer.", ..CONFIG },
    KnobSpec { name: "NCCL_NUM_RMA_CTX", auto: "1", range: Some((0, i64::MAX)), unit: U::Count, since: "2.29.2", source: "src/init.cc:65",
        description: "Host RMA contexts per communicator; 0 turns host RMA off. Overrides the communicator's numRmaCtx.", ..CONFIG },
    KnobSpec { name: "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", ty: T::Choice(OFF_ON), auto: "0", since: "2.27.3", source: "src/init.cc:1730",
        description: "Schedules send/receive to keep NVLinks busy rather than in program order. Overrides the communicator's nvlinkCentricSched.", ..CONFIG },
    KnobSpec { name: "NCCL_NVLS_NCHANNELS", auto: "16 on Hopper; 24 or 32 on Blackwell", range: Some((1, 64)), unit: U::Channels, since: "2.17.1",
        related: &["NCCL_NVLS_ENABLE"], source: "src/init.cc:64",
        description: "Channels of the NVLS algorithms. Overrides the communicator's nvlsCTAs.", ..CONFIG },
    KnobSpec { name: "NCCL_P2P_MAX_PEERS", auto: "the number of ranks", range: Some((1, i64::MAX)), unit: U::Count, since: "2.30.3", source: "src/init.cc:66",
        description: "How many peers the application exchanges with at once, used to size channels per peer. Overrides the communicator's maxP2pPeers.", ..CONFIG },

    KnobSpec { name: "NCCL_CONNECT_ROUND_MAX_PEERS", default: "128", range: Some((1, i64::MAX)), unit: U::Count, since: "2.19.4", source: "src/transport.cc:75",
        description: "Peers whose connections are set up in one round of connection establishment.", ..INIT },
    KnobSpec { name: "NCCL_ENABLE_VERSION_CHECK", ty: T::Bool, default: "1", category: C::Dangerous, since: "2.29.2", source: "src/dev_runtime.cc:29",
        description: "Refuses device-API use by applications compiled against a newer NCCL than the one loaded. With 0 such mismatches go unchecked.", ..INIT },
    KnobSpec { name: "NCCL_HOSTID", ty: T::Text, auto: "host name plus /proc/sys/kernel/random/boot_id", category: C::System, since: "2.5.6", source: "src/misc/utils.cc:125",
        description: "Identity of the host; ranks with the same identity are treated as one node (shared memory, P2P). Set it when containers on one machine should, or should not, see each other as local.", ..INIT },
    KnobSpec { name: "NCCL_IGNORE_CPU_AFFINITY", ty: T::Bool, default: "0", since: "2.4.6", source: "src/graph/topo.cc:2148",
        description: "Ignores the CPU mask the job was started with and pins NCCL's threads by GPU locality alone.", ..INIT },
    KnobSpec { name: "NCCL_MULTI_RANK_GPU_ENABLE", ty: T::Bool, default: "0", category: C::Dangerous, since: "2.30", source: "src/init.cc:68",
        description: "Experimental: allows several ranks on one GPU. NVLS is then turned off silently when NCCL_NVLS_ENABLE=2.", ..INIT },
    KnobSpec { name: "NCCL_REPORT_CONNECT_PROGRESS", ty: T::Bool, default: "0", category: C::Debug, since: "2.19.4", source: "src/transport.cc:76",
        description: "Rank 0 prints how connection set-up progresses, useful when initialisation of large jobs seems stuck.", ..INIT },
    KnobSpec { name: "NCCL_RUNTIME_CONNECT", ty: T::Bool, default: "1", since: "2.22", source: "src/init.cc:61",
        description: "Connects to peers when an operation first needs them; 0 connects everything during initialisation (slower start, more memory, no surprises later).", ..INIT },
    KnobSpec { name: "NCCL_SET_CPU_STACK_SIZE", ty: T::Bool, default: "1", since: "2.28.3", source: "src/init.cc:67",
        description: "Sets the stack size of NCCL's host threads explicitly.", ..INIT },

    KnobSpec { name: "NCCL_PROGRESS_APPENDOP_FREQ", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.16.5", source: "src/proxy.cc:926",
        description: "Progress iterations of the proxy thread between checks for newly posted operations.", ..PROXY },
    KnobSpec { name: "NCCL_PROXY_APPEND_BATCH_SIZE", default: "16", range: Some((1, i64::MAX)), unit: U::Count, since: "2.16.2", source: "src/proxy.cc:833",
        description: "Most operations the proxy thread takes in per check.", ..PROXY },
    KnobSpec { name: "NCCL_PROXY_CPUSET", ty: T::CpuList, category: C::System, since: "2.28.3", source: "src/proxy.cc:931",
        description: "CPUs the proxy thread may run on, as a list such as 0-3,8.", ..PROXY },
];
