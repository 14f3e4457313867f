//! Intra-node transports and fabrics: GPU peer-to-peer (`src/transport/p2p.cc`,
//! `src/graph/paths.cc`), shared memory (`src/transport/shm.cc`), NVLink SHARP
//! (`src/transport/nvls.cc`), multi-node NVLink and CollNet (`src/init.cc`).

use super::BASE;
use super::spec::{Category as C, Choice, KnobSpec, KnobType as T, Subsystem, Unit as U};

const P2P: KnobSpec = KnobSpec {
    subsystem: Subsystem::P2p,
    category: C::Tuning,
    ..BASE
};
const SHM: KnobSpec = KnobSpec {
    subsystem: Subsystem::Shm,
    category: C::Tuning,
    ..BASE
};
const NVLS: KnobSpec = KnobSpec {
    subsystem: Subsystem::Nvls,
    category: C::Tuning,
    ..BASE
};
const MNNVL: KnobSpec = KnobSpec {
    subsystem: Subsystem::Mnnvl,
    category: C::System,
    ..BASE
};
const COLLNET: KnobSpec = KnobSpec {
    subsystem: Subsystem::Collnet,
    category: C::System,
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
const OFF_FORCE_AUTO: &[Choice] = &[
    Choice {
        value: "0",
        meaning: "off",
    },
    Choice {
        value: "1",
        meaning: "on; fail if unsupported",
    },
    Choice {
        value: "2",
        meaning: "on where supported (auto)",
    },
];

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "NCCL_IGNORE_DISABLED_P2P", ty: T::Choice(&[
            Choice { value: "0", meaning: "fail when NVML reports P2P disabled between NVLink-connected GPUs" },
            Choice { value: "1", meaning: "continue without P2P on those pairs" },
            Choice { value: "2", meaning: "skip the NVML P2P check altogether" },
        ]), default: "0", category: C::Dangerous, since: "2.12.7", related: &["NCCL_P2P_LEVEL"], source: "src/graph/paths.cc:282",
        description: "What to do when NVML says peer access is disabled between GPUs that NVLink connects, which usually means a hardware or driver fault. The check exists to catch broken systems; overriding it hides them.", ..P2P },
    KnobSpec { name: "NCCL_IPC_USE_ABSTRACT_SOCKET", ty: T::Bool, default: "1", category: C::System, since: "2.29", source: "src/os/linux_ipcsocket.cc:21",
        description: "Exchanges CUDA memory handles over abstract-namespace Unix sockets. Set 0 when ranks of one node live in different network namespaces (containers), which cannot see each other's abstract sockets.", ..P2P },
    KnobSpec { name: "NCCL_MAX_P2P_NCHANNELS", default: "64", range: Some((1, 64)), unit: U::Channels, since: "2.7.3",
        related: &["NCCL_MIN_P2P_NCHANNELS"], source: "src/graph/paths.cc:958",
        description: "Most channels send/receive operations may use.", ..P2P },
    KnobSpec { name: "NCCL_MIN_P2P_NCHANNELS", default: "1", range: Some((1, 64)), unit: U::Channels, since: "2.7.3",
        related: &["NCCL_MAX_P2P_NCHANNELS"], source: "src/graph/paths.cc:957",
        description: "Fewest channels send/receive operations use.", ..P2P },
    KnobSpec { name: "NCCL_NVB_DISABLE", ty: T::Bool, default: "0", since: "2.11", related: &["NCCL_P2P_LEVEL"], source: "src/graph/paths.cc:36",
        description: "Stops NCCL from routing traffic between two GPUs through a third one over NVLink (path type NVB).", ..P2P },
    KnobSpec { name: "NCCL_NVB_PRECONNECT", ty: T::Bool, default: "1", since: "2.9.9", source: "src/init.cc:858",
        description: "Sets up the connections to peers reached through an intermediate GPU during initialisation rather than on first use.", ..P2P },
    KnobSpec { name: "NCCL_P2P_DIRECT_DISABLE", ty: T::Bool, default: "0", category: C::System, since: "2.12.12", source: "src/transport/p2p.cc:328",
        description: "Forbids direct access to a peer GPU's buffers between GPUs driven by the same process, for example when the application's memory cannot be shared.", ..P2P },
    KnobSpec { name: "NCCL_P2P_DISABLE", ty: T::Choice(&[
            Choice { value: "0", meaning: "P2P allowed up to NCCL_P2P_LEVEL" },
            Choice { value: "1", meaning: "P2P transport off; NCCL_P2P_LEVEL is ignored" },
        ]), auto: "P2P allowed", category: C::System, since: "2.3.5", related: &["NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"], source: "src/graph/paths.cc:289",
        description: "Turns the GPU peer-to-peer transport (NVLink or PCIe) off; traffic then goes through shared memory or the network. Only the value 1 disables; NCCL reads it before NCCL_P2P_LEVEL, which it then ignores.", ..P2P },
    KnobSpec { name: "NCCL_P2P_LEVEL", ty: T::PathLevel, auto: "PXB (SYS on AMD CPUs with at most 2 GPUs)", category: C::System, since: "2.3.4",
        related: &["NCCL_P2P_DISABLE", "NCCL_NVB_DISABLE"], source: "src/graph/paths.cc:289",
        description: "Farthest GPU-to-GPU path over which the P2P transport is used: LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB or SYS (exact upper case), or a legacy number 0 to 5. A misspelled name is ignored silently.", ..P2P },
    KnobSpec { name: "NCCL_P2P_PER_CHANNEL_NET_BW", default: "14", range: Some((1, i64::MAX)), unit: U::GigabytesPerSecond, since: "2.29.2",
        source: "src/graph/paths.cc:918",
        description: "Bandwidth assumed per channel when working out how many channels send/receive gets per remote peer.", ..P2P },
    KnobSpec { name: "NCCL_P2P_READ_ENABLE", ty: T::Choice(OFF_ON), default: "-2", auto: "on for Ampere GPUs connected by NVLink", since: "2.7.3",
        source: "src/transport/p2p.cc:327",
        description: "Makes the Simple protocol read from the peer's memory instead of writing into it.", ..P2P },
    KnobSpec { name: "NCCL_P2P_SCHEDULE_GROUP_SIZE", default: "8", range: Some((1, i64::MAX)), unit: U::Count, since: "2.28.7", source: "src/init.cc:888",
        description: "Size of the rank groups used to order send/receive across nodes.", ..P2P },
    KnobSpec { name: "NCCL_P2P_USE_CUDA_MEMCPY", ty: T::Bool, default: "0", since: "2.13.4", source: "src/transport/p2p.cc:123",
        description: "Moves intra-node P2P data with the copy engines (cudaMemcpy) instead of kernels.", ..P2P },

    KnobSpec { name: "NCCL_SHM_DISABLE", ty: T::Bool, default: "0", category: C::System, since: "2.3.5", related: &["NCCL_P2P_DISABLE"], source: "src/transport/shm.cc:55",
        description: "Turns the shared-memory transport between processes of one node off; such traffic then uses P2P or the network.", ..SHM },
    KnobSpec { name: "NCCL_SHM_LOCALITY", ty: T::Choice(&[
            Choice { value: "1", meaning: "in the sender's memory" },
            Choice { value: "2", meaning: "in the receiver's memory" },
        ]), default: "2", since: "2.13.4", source: "src/transport/shm.cc:56",
        description: "Which side's NUMA memory holds the shared-memory buffers.", ..SHM },

    KnobSpec { name: "NCCL_NVLSTREE_MAX_CHUNKSIZE", default: "-2", auto: "64 KiB with 4 nodes or more, else the NVLS chunk size", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.20.3",
        related: &["NCCL_NVLS_CHUNKSIZE"], source: "src/transport/nvls.cc:161",
        description: "Largest chunk of the NVLSTree algorithm.", ..NVLS },
    KnobSpec { name: "NCCL_NVLS_CHUNKSIZE", default: "131072", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.21.5", source: "src/transport/nvls.cc:160",
        description: "Chunk size of the NVLS algorithms.", ..NVLS },
    KnobSpec { name: "NCCL_NVLS_ENABLE", ty: T::Choice(OFF_FORCE_AUTO), default: "2", category: C::System, since: "2.17",
        related: &["NCCL_NVLS_NCHANNELS"], source: "src/transport/nvls.cc:159",
        description: "NVLink SHARP (reductions done by NVSwitches), available from Hopper with NVSwitch and CUDA 12.1. It reserves GPU memory; 0 frees it.", ..NVLS },

    KnobSpec { name: "NCCL_MNNVL_CLIQUE_ID", default: "-1", auto: "from the fabric manager", range: Some((0, 0xffff_ffff)), since: "2.25", source: "src/init.cc:708",
        description: "Overrides the multi-node NVLink clique id, to split one NVLink domain into smaller ones in software.", ..MNNVL },
    KnobSpec { name: "NCCL_MNNVL_CROSS_CLIQUE", ty: T::Bool, default: "0", since: "2.30.3", source: "src/init.cc:709",
        description: "Allows CUDA peer access between cliques that share a cluster UUID.", ..MNNVL },
    KnobSpec { name: "NCCL_MNNVL_ENABLE", ty: T::Choice(OFF_FORCE_AUTO), default: "2", since: "2.21", source: "src/init.cc:862",
        description: "Multi-node NVLink: GPUs of different nodes in one NVLink domain talk over NVLink.", ..MNNVL },
    KnobSpec { name: "NCCL_MNNVL_UUID", default: "-1", auto: "from the fabric manager", since: "2.25", source: "src/init.cc:707",
        description: "Overrides the multi-node NVLink cluster UUID (the value fills both 64-bit halves).", ..MNNVL },

    KnobSpec { name: "NCCL_COLLNET_ENABLE", ty: T::Choice(OFF_ON), auto: "0, or the communicator's collnetEnable", since: "2.6",
        related: &["NCCL_COLLNET_NODE_THRESHOLD", "NCCL_NET_PLUGIN"], source: "src/init.cc:63",
        description: "Uses CollNet, in-network reductions offered by a network plugin (e.g. SHARP). Read again at every communicator creation; overrides the communicator's collnetEnable setting.", ..COLLNET },
    KnobSpec { name: "NCCL_COLLNET_NODE_THRESHOLD", default: "2", range: Some((1, i64::MAX)), unit: U::Count, category: C::Tuning, since: "2.9.9",
        related: &["NCCL_COLLNET_ENABLE"], source: "src/init.cc:857",
        description: "Fewest nodes a communicator needs before CollNet is used.", ..COLLNET },
    KnobSpec { name: "NCCL_IGNORE_COLLNET_MISMATCH", ty: T::Bool, default: "0", category: C::Dangerous, since: "2.30",
        related: &["NCCL_COLLNET_ENABLE"], source: "src/init.cc:132",
        description: "Goes on when ranks see different numbers of CollNet devices instead of failing initialisation.", ..COLLNET },
];
