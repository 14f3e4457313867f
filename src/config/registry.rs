//! The registry table: one [`KnobSpec`] per knob.

/// How a knob's value is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobType {
    /// C `strtoll(s, NULL, 0)` integer.
    Int,
    /// An integer read as `!= 0`.
    Bool,
    /// Free text.
    String,
}

/// One knob.
#[derive(Debug, Clone, Copy)]
pub struct KnobSpec {
    /// The environment variable name.
    pub name: &'static str,
    /// How the value is parsed.
    pub ty: KnobType,
    /// The default, as NCCL writes it (`-2` = auto).
    pub default: &'static str,
    /// What the knob does, in our words.
    pub description: &'static str,
}

/// Finds a knob by exact name.
pub fn lookup(name: &str) -> Option<&'static KnobSpec> {
    KNOBS.iter().find(|k| k.name == name)
}

macro_rules! knobs {
    ($( $name:literal, $ty:ident, $default:literal, $desc:literal; )*) => {
        /// Every knob rnccl knows.
        pub static KNOBS: &[KnobSpec] = &[ $( KnobSpec { name: $name, ty: KnobType::$ty, default: $default, description: $desc }, )* ];
    };
}

knobs! {
    "NCCL_ALGO", String, "", "Allowed algorithms, e.g. 'Ring' or '^Tree' or 'AllReduce:Tree;Broadcast:Ring'.";
    "NCCL_PROTO", String, "", "Allowed protocols (LL, LL128, Simple), same syntax as NCCL_ALGO.";
    "NCCL_BUFFSIZE", Int, "-2", "Simple-protocol FIFO bytes per connection (auto: 4194304); a step is BUFFSIZE/8.";
    "NCCL_COMM_ID", String, "", "Fixed bootstrap root address host:port; rank 0 listens there.";
    "NCCL_HOSTID", String, "", "Overrides the host identity (default: hostname + boot id); ranks with equal ids are local.";
    "NCCL_MAX_NCHANNELS", Int, "-2", "Upper bound on collective channels (auto: 64).";
    "NCCL_MIN_NCHANNELS", Int, "-2", "Lower bound on collective channels; channels are duplicated up to it (auto: 0).";
    "NCCL_MAX_CTAS", Int, "-2", "Upper bound on channels (CTAs) per collective, as ncclConfig_t.maxCTAs (auto: 64).";
    "NCCL_MIN_CTAS", Int, "-2", "Lower bound on channels (CTAs), as ncclConfig_t.minCTAs (auto: 1).";
    "NCCL_NSOCKS_PERTHREAD", Int, "-2", "Data sockets per socket helper thread for each peer connection (auto: 1).";
    "NCCL_SOCKET_NTHREADS", Int, "-2", "Socket helper threads per peer connection (auto: 0 = main thread drives the sockets).";
    "NCCL_SOCKET_FAMILY", String, "", "Restrict interfaces to AF_INET or AF_INET6.";
    "NCCL_SOCKET_IFNAME", String, "", "Interfaces to use: prefix list, '^' to exclude, '=' for exact names.";
    "NCCL_SOCKET_RETRY_CNT", Int, "34", "Connect retries on refused/unreachable.";
    "NCCL_SOCKET_RETRY_SLEEP_MSEC", Int, "100", "Linear back-off step between connect retries (ms).";
    "NCCL_SOCKET_MIN_TASKSIZE", Int, "65536", "Smallest piece (bytes) a message is split into across a peer's sockets.";
    "NCCL_SHM_DISABLE", Bool, "0", "Disable the shared-memory transport (use sockets between processes of one host).";
    "NCCL_P2P_DISABLE", Bool, "0", "Disable peer-to-peer (same-process direct) transport.";
    "NCCL_TOPO_FILE", String, "", "Topology XML to load instead of detecting.";
    "NCCL_TOPO_DUMP_FILE", String, "", "Write the detected (and fused) topology as NCCL <system> XML to this file.";
    "NCCL_GRAPH_DUMP_FILE", String, "", "Write the searched ring/tree graphs as NCCL <graphs> XML to this file.";
    "NCCL_P2P_LEVEL", String, "", "Farthest GPU-GPU path type using P2P: LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS or old numbers 0-5 (auto: PXB; SYS on AMD with <= 2 GPUs).";
    "NCCL_NET_GDR_LEVEL", String, "", "Farthest GPU-NIC path type using GPUDirect RDMA, same names as NCCL_P2P_LEVEL (auto: PXB).";
    "NCCL_NVB_DISABLE", Bool, "0", "Disable NVLink paths through an intermediate GPU (NVB).";
    "NCCL_PXN_DISABLE", Bool, "0", "Disable GPU->NIC traffic through an NVLink-connected GPU closer to the NIC (PXN).";
    "NCCL_CROSS_NIC", Int, "2", "0: rings/trees leave a node on the NIC they entered; 1: any NIC; 2: same NIC preferred, alternate NICs allowed.";
    "NCCL_NTHREADS", Int, "-2", "Threads per CTA for LL and Simple (multiple of 32, 64..512; auto: 512, 256 for slow rings).";
    "NCCL_LL128_NTHREADS", Int, "-2", "Threads per CTA for LL128 (multiple of 32, 160..640; auto: 640).";
    "NCCL_PAT_ENABLE", Int, "2", "PAT algorithm for AllGather/ReduceScatter: 0 off, 1 on, 2 auto (one GPU per node).";
    "NCCL_IB_HCA", String, "", "InfiniBand HCAs to use: prefix list, '^' to exclude, '=' for exact names, ':port' to pick ports.";
    "NCCL_DEBUG", String, "", "Log level: VERSION, WARN, INFO, TRACE.";
    "RNCCL_TIMEOUT", Int, "300", "rnccl: communicator timeout in seconds for every blocking wait.";
}
