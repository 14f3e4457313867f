//! Memory: allocation (`src/misc/cudawrap.cc`, `src/allocator.cc`), buffer registration
//! (`src/register/`), symmetric memory (`src/sym_kernels.cc`, `src/dev_runtime.cc`),
//! GPU-initiated networking (`src/gin/`) and host RMA (`src/rma/`).

use super::BASE;
use super::spec::{Category as C, Choice, KnobSpec, KnobType as T, Subsystem, Unit as U};

const ALLOC: KnobSpec = KnobSpec {
    subsystem: Subsystem::Alloc,
    category: C::Tuning,
    ..BASE
};
const REG: KnobSpec = KnobSpec {
    subsystem: Subsystem::Reg,
    category: C::Tuning,
    ..BASE
};
const SYM: KnobSpec = KnobSpec {
    subsystem: Subsystem::Symmetric,
    category: C::Tuning,
    ..BASE
};
const GIN: KnobSpec = KnobSpec {
    subsystem: Subsystem::Gin,
    category: C::Tuning,
    ..BASE
};
const RMA: KnobSpec = KnobSpec {
    subsystem: Subsystem::Rma,
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
    KnobSpec { name: "NCCL_CUMEM_ENABLE", ty: T::Choice(OFF_ON), default: "-2", auto: "on when the driver supports it", category: C::System, since: "2.18",
        related: &["NCCL_CUMEM_HOST_ENABLE"], source: "src/misc/cudawrap.cc:16",
        description: "Allocates NCCL's GPU buffers with CUDA's virtual memory API (cuMem*), which shares them between processes through file descriptors instead of legacy IPC handles.", ..ALLOC },
    KnobSpec { name: "NCCL_CUMEM_HOST_ENABLE", ty: T::Choice(OFF_ON), default: "-1", auto: "on with driver 12.6 or later when host allocation works", category: C::System, since: "2.23",
        related: &["NCCL_CUMEM_ENABLE"], source: "src/misc/cudawrap.cc:17",
        description: "Allocates NCCL's host buffers with the cuMem API too.", ..ALLOC },
    KnobSpec { name: "NCCL_DISABLE_MEM_MANAGER", ty: T::Bool, default: "0", since: "2.29.7", source: "src/mem_manager.cc:28",
        description: "Turns off the per-communicator memory manager that tracks allocations so ncclCommSuspend/Resume can release and restore them.", ..ALLOC },
    KnobSpec { name: "NCCL_SHADOW_MEMPOOL_MAX_SIZE", default: "1073741824", range: Some((0, i64::MAX)), unit: U::Bytes, since: "2.30.7", source: "src/allocator.cc:14",
        description: "Largest size of the shadow CUDA memory pool NCCL's allocator keeps.", ..ALLOC },

    KnobSpec { name: "NCCL_ELASTIC_BUFFER_REGISTER", ty: T::Bool, default: "1", since: "2.30.3", source: "src/dev_runtime.cc:30",
        description: "Allows window registration of address ranges that include host-backed (system memory) pieces.", ..REG },
    KnobSpec { name: "NCCL_GRAPH_REGISTER", ty: T::Bool, default: "1", since: "2.11", related: &["NCCL_LOCAL_REGISTER"], source: "src/enqueue.cc:283",
        description: "Registers user buffers automatically for operations captured in CUDA graphs, avoiding copies through NCCL's own buffers.", ..REG },
    KnobSpec { name: "NCCL_LEGACY_CUDA_REGISTER", ty: T::Bool, default: "0", category: C::Dangerous, since: "2.24", source: "src/transport/p2p.cc:104",
        description: "Allows registering buffers from plain cudaMalloc; this can synchronise implicitly with other work and hang.", ..REG },
    KnobSpec { name: "NCCL_LOCAL_REGISTER", ty: T::Bool, default: "1", since: "2.19", related: &["NCCL_GRAPH_REGISTER"], source: "src/register/register.cc:16",
        description: "Honours user-buffer registration through ncclCommRegister; 0 makes those calls no-ops.", ..REG },
    KnobSpec { name: "NCCL_MLOPART_RDMA_ENABLE", ty: T::Bool, default: "0", since: "2.30.7", source: "src/register/coll_reg.cc:14",
        description: "Allows RDMA registration of buffers on GPUs split into MLOPart partitions.", ..REG },
    KnobSpec { name: "NCCL_MULTI_SEGMENT_REGISTER", ty: T::Bool, default: "1", since: "2.29.2", related: &["NCCL_CUMEM_ENABLE"], source: "src/transport/generic.cc:12",
        description: "Allows registering buffers made of several physical allocations (needs cuMem).", ..REG },
    KnobSpec { name: "NCCL_SINGLE_PROC_MEM_REG_ENABLE", ty: T::Bool, default: "0", since: "2.28.3", source: "src/group.cc:536",
        description: "Allows NVLS buffer registration and symmetric kernels when one process drives several GPUs, preparing tasks asynchronously.", ..REG },
    KnobSpec { name: "NCCL_WIN_ENABLE", ty: T::Bool, default: "1", since: "2.27", source: "src/init.cc:62",
        description: "Allows window (symmetric memory) registration.", ..REG },

    KnobSpec { name: "NCCL_LSA_TEAM_SIZE", default: "0", auto: "detected", range: Some((0, i64::MAX)), unit: U::Count, since: "2.29.7", source: "src/dev_runtime.cc:76",
        description: "Forces the size of the team of ranks that can load and store each other's memory directly, for symmetric memory and the device API.", ..SYM },
    KnobSpec { name: "NCCL_SYM_CE_THRESHOLD", default: "8388608", range: Some((0, i64::MAX)), unit: U::Count, since: "2.29.2", source: "src/enqueue.cc:31",
        description: "AllGather element count above which the copy-engine symmetric path is used (Blackwell, all GPUs directly on NVLink).", ..SYM },
    KnobSpec { name: "NCCL_SYM_CTAS", default: "0", auto: "chosen per kernel", range: Some((0, 128)), unit: U::Channels, since: "2.27.3", source: "src/sym_kernels.cc:131",
        description: "Forces the number of thread blocks of the symmetric kernels (NCCL: up to 64; rnccl: up to 128).", ..SYM },
    KnobSpec { name: "NCCL_SYM_GIN_KERNELS_ENABLE", ty: T::Bool, default: "1", since: "2.29.7", source: "src/sym_kernels.cc:132",
        description: "Allows symmetric kernels that move network traffic with GPU-initiated networking.", ..SYM },
    KnobSpec { name: "NCCL_SYM_KERNEL", ty: T::Text, auto: "all symmetric kernels", category: C::Debug, since: "2.27.3", source: "src/sym_kernels.cc:112",
        description: "Restricts symmetric collectives to the one named kernel ('^' allows all).", ..SYM },
    KnobSpec { name: "NCCL_SYM_NOWIN_ENABLE", ty: T::Bool, default: "0", since: "2.29.2", source: "src/scheduler/symmetric_sched.cc:21",
        description: "Lets symmetric kernels run on buffers not registered as windows instead of falling back to regular kernels.", ..SYM },
    KnobSpec { name: "NCCL_SYM_REUSE_SYSMEM_HANDLES", ty: T::Bool, default: "0", since: "2.30.4", source: "src/dev_runtime.cc:31",
        description: "Reuses host-NUMA cuMem handles across peers for symmetric windows.", ..SYM },
    KnobSpec { name: "NCCL_SYM_RS_GIN_CHUNK_SIZE", default: "-1", auto: "chosen by NCCL", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.30.7", source: "src/sym_kernels.cc:133",
        description: "Chunk size of the ReduceScatter symmetric kernel that uses GPU-initiated networking.", ..SYM },
    KnobSpec { name: "NCCL_SYM_TMA_ENABLE", ty: T::Bool, default: "0", since: "2.30.3", source: "src/sym_kernels.cc:134",
        description: "Uses the Tensor Memory Accelerator in symmetric kernels (Blackwell).", ..SYM },
    KnobSpec { name: "NCCL_WIN_STRIDE", default: "-1", auto: "the largest GPU memory size", range: Some((1, i64::MAX)), unit: U::Bytes, since: "2.27.3", source: "src/dev_runtime.cc:28",
        description: "Distance in virtual address space between the windows of consecutive ranks.", ..SYM },

    KnobSpec { name: "NCCL_DEV_API_JIT", ty: T::Bool, default: "0", since: "2.30.7", source: "src/gin/gin_host.cc:20",
        description: "Compiles device-API (GIN) kernels just in time.", ..GIN },
    KnobSpec { name: "NCCL_GDAKI_USE_RELIABLE_DB", ty: T::Choice(&[
            Choice { value: "0", meaning: "normal doorbell record" },
            Choice { value: "1", meaning: "no doorbell record (hardware, else emulated in software)" },
            Choice { value: "2", meaning: "no doorbell record, falling back to normal where unsupported" },
        ]), default: "0", since: "2.29.7", source: "src/transport/net_ib/gdaki/gin_host_gdaki.cc:458",
        description: "Doorbell-record mode of GDAKI queue pairs.", ..GIN },
    KnobSpec { name: "NCCL_GIN_ENABLE", ty: T::Bool, default: "1", since: "2.28.7", source: "src/gin/gin_host.cc:19",
        description: "GPU-initiated networking: device-API kernels put data and signals over the network themselves.", ..GIN },
    KnobSpec { name: "NCCL_GIN_ERROR_QUERY_SEC", default: "10", range: Some((1, i64::MAX)), unit: U::Seconds, since: "2.28.7", source: "src/transport/net_ib/gdaki/gin_host_gdaki.cc:58",
        description: "Interval between checks of GDAKI queue pairs for an error state.", ..GIN },
    KnobSpec { name: "NCCL_GIN_GDAKI_MAX_DEST_RD_ATOMIC", default: "-2", auto: "the device maximum", range: Some((0, 255)), unit: U::Count, since: "2.30.3",
        source: "src/transport/net_ib/gdaki/gin_host_gdaki.cc:56",
        description: "Outstanding RDMA reads and atomics a GDAKI queue pair accepts as a target.", ..GIN },
    KnobSpec { name: "NCCL_GIN_GDAKI_MAX_QP_RD_ATOMIC", default: "-2", auto: "the device maximum", range: Some((0, 255)), unit: U::Count, since: "2.30.3",
        source: "src/transport/net_ib/gdaki/gin_host_gdaki.cc:57",
        description: "Outstanding RDMA reads and atomics a GDAKI queue pair may issue.", ..GIN },
    KnobSpec { name: "NCCL_GIN_GDAKI_NIC_HANDLER", default: "0", range: Some((0, i64::MAX)), since: "2.28.7", source: "src/transport/net_ib/gdaki/gin_host_gdaki.cc:54",
        description: "NIC handler mode passed to DOCA GPUNetIO when GDAKI queue pairs are created.", ..GIN },
    KnobSpec { name: "NCCL_GIN_GDAKI_QP_DEPTH", default: "128", range: Some((1, i64::MAX)), unit: U::Count, since: "2.28.7", source: "src/transport/net_ib/gdaki/gin_host_gdaki.cc:55",
        description: "Send-queue depth of GDAKI queue pairs when the caller asks for none.", ..GIN },
    KnobSpec { name: "NCCL_GIN_IB_TC", default: "-1", auto: "NCCL_IB_TC", range: Some((0, 255)), category: C::System, since: "2.30.7",
        related: &["NCCL_IB_TC"], source: "src/transport/net_ib/gin.cc:47",
        description: "Traffic class of GPU-initiated network traffic.", ..GIN },
    KnobSpec { name: "NCCL_GIN_NCONNECTIONS", default: "-2", auto: "chosen by NCCL", range: Some((1, i64::MAX)), unit: U::Count, since: "2.29.7", source: "src/gin/gin_host.cc:78",
        description: "GPU-initiated networking connections (contexts) per communicator. Replaced NCCL_GIN_NCONTEXTS.", ..GIN },
    KnobSpec { name: "NCCL_GIN_PROXY_QUEUE_SIZE", default: "-1", auto: "chosen by NCCL", range: Some((1, i64::MAX)), unit: U::Count, since: "2.28.7", source: "src/gin/gin_host_proxy.cc:20",
        description: "Queue depth of the CPU-proxy backend of GPU-initiated networking.", ..GIN },
    KnobSpec { name: "NCCL_GIN_TYPE", ty: T::Choice(&[
            Choice { value: "2", meaning: "CPU proxy" },
            Choice { value: "3", meaning: "GDAKI" },
            Choice { value: "4", meaning: "GPI" },
        ]), default: "-1", auto: "any", category: C::System, since: "2.28.7", source: "src/transport/net_ib/gin.cc:46",
        description: "Accepts only GPU-initiated networking backends of this kind.", ..GIN },

    KnobSpec { name: "NCCL_RMA_DISABLE", ty: T::Bool, default: "0", since: "2.30.7", source: "src/dev_runtime.cc:32",
        description: "Turns off the host RMA proxy path.", ..RMA },
    KnobSpec { name: "NCCL_RMA_PROXY_QUEUE_SIZE", default: "-1", auto: "chosen by NCCL", range: Some((1, i64::MAX)), unit: U::Count, since: "2.29.2", source: "src/rma/rma_proxy.cc:27",
        description: "Queue depth of the host RMA proxy.", ..RMA },
];
