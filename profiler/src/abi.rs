//! NCCL's profiler plugin ABI, version 5: the one NCCL 2.28 loads first (NVIDIA/nccl v2.28.9,
//! `ext-profiler/example/nccl/profiler.h` and `profiler_v5.h`). Layouts are C's; NCCL owns
//! every descriptor it passes and the plugin only reads them during the call.

use std::ffi::{c_char, c_int, c_ulong, c_void};

/// `ncclResult_t`: success.
pub const NCCL_SUCCESS: c_int = 0;
/// `ncclResult_t`: an internal error (a panic caught at the boundary).
pub const NCCL_INTERNAL_ERROR: c_int = 3;
/// `ncclResult_t`: a null or malformed argument.
pub const NCCL_INVALID_ARGUMENT: c_int = 4;

/// Event type bits (`ncclProfileColl`, …): the activation mask and `EventDescr::kind`.
pub mod event {
    /// `ncclProfileColl`: a collective of a launched plan.
    pub const COLL: u64 = 1 << 1;
    /// `ncclProfileP2p`: a send or receive of a launched plan.
    pub const P2P: u64 = 1 << 2;
    /// `ncclProfileProxyOp`: the proxy's part of a task on one channel and peer (network).
    pub const PROXY_OP: u64 = 1 << 3;
    /// `ncclProfileProxyStep`: one step of a proxy operation.
    pub const PROXY_STEP: u64 = 1 << 4;
    /// `ncclProfileKernelCh`: one channel of a task's kernel work, start to end.
    pub const KERNEL_CH: u64 = 1 << 6;
}

/// `ncclDebugLogger_t`: NCCL's logger (level, subsystem flags, file, line, printf format, …).
pub type Logger = unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...);

/// `ncclDebugLogLevel`: NCCL_LOG_INFO.
pub const LOG_INFO: c_int = 3;
/// NCCL_INIT, the subsystem bit of init messages.
pub const LOG_SUBSYS_INIT: c_ulong = 1;

/// `ncclProfilerEventDescr_v5_t::coll`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollDescr {
    /// NCCL's per-function sequence number on the communicator.
    pub seq_number: u64,
    /// `ncclFuncToString`: "AllReduce", "AllGather", …
    pub func: *const c_char,
    /// The send buffer.
    pub send_buff: *const c_void,
    /// The receive buffer.
    pub recv_buff: *mut c_void,
    /// Elements: per rank for AllGather (sendcount) and ReduceScatter (recvcount).
    pub count: usize,
    /// The root rank (Broadcast, Reduce).
    pub root: c_int,
    /// `ncclDatatypeToString`: "ncclFloat32", …
    pub datatype: *const c_char,
    /// Channels the collective runs on.
    pub n_channels: u8,
    /// Warps per block.
    pub n_warps: u8,
    /// `ncclAlgoToString`: "RING", "TREE", …
    pub algo: *const c_char,
    /// `ncclProtoToString`: "LL", "LL128", "SIMPLE".
    pub proto: *const c_char,
    /// The group event (v4 compatibility).
    pub parent_group: *mut c_void,
}

/// `ncclProfilerEventDescr_v5_t::p2p`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pDescr {
    /// "Send" or "Recv".
    pub func: *const c_char,
    /// The buffer.
    pub buff: *mut c_void,
    /// `ncclDatatypeToString`.
    pub datatype: *const c_char,
    /// Elements.
    pub count: usize,
    /// The peer rank.
    pub peer: c_int,
    /// Channels it runs on.
    pub n_channels: u8,
    /// The group event (v4 compatibility).
    pub parent_group: *mut c_void,
}

/// `ncclProfilerEventDescr_v5_t::proxyOp`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOpDescr {
    /// The process that posted the operation.
    pub pid: libc::pid_t,
    /// Its channel.
    pub channel_id: u8,
    /// The remote rank.
    pub peer: c_int,
    /// Steps it moves.
    pub n_steps: c_int,
    /// Bytes per step.
    pub chunk_size: c_int,
    /// 1 for a send, 0 for a receive.
    pub is_send: c_int,
}

/// `ncclProfilerEventDescr_v5_t::kernelCh`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelChDescr {
    /// The channel.
    pub channel_id: u8,
    /// Start, GPU global timer (ns).
    pub p_timer: u64,
}

/// The API-level variants (collApi, p2pApi): read by no one here, present for the union's
/// size and alignment.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ApiDescr {
    /// Function name.
    pub func: *const c_char,
    /// Elements.
    pub count: usize,
    /// Data type name.
    pub datatype: *const c_char,
    /// Root (collApi), stream (p2pApi) …
    pub rest: [u64; 3],
}

/// The union of `ncclProfilerEventDescr_v5_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrUnion {
    /// `coll`.
    pub coll: CollDescr,
    /// `p2p`.
    pub p2p: P2pDescr,
    /// `proxyOp`.
    pub proxy_op: ProxyOpDescr,
    /// `proxyStep.step`.
    pub proxy_step: c_int,
    /// `kernelCh`.
    pub kernel_ch: KernelChDescr,
    /// `collApi`, `p2pApi`.
    pub api: ApiDescr,
}

/// `ncclProfilerEventDescr_v5_t`.
#[repr(C)]
pub struct EventDescr {
    /// One of the [`event`] bits.
    pub kind: u64,
    /// The parent event's handle as this plugin returned it (null when it returned none).
    pub parent_obj: *mut c_void,
    /// The originating rank.
    pub rank: c_int,
    /// Per kind.
    pub u: DescrUnion,
}

/// `ncclProfilerEventStateArgs_v5_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgs {
    /// `proxyStep.transSize`: bytes of the step.
    pub trans_size: usize,
    /// `kernelCh.pTimer`: end, GPU global timer (ns).
    pub p_timer: u64,
}

/// `ncclProfiler_v5_t`: the table NCCL looks up by the symbol `ncclProfiler_v5`.
#[repr(C)]
pub struct ProfilerV5 {
    /// The plugin's name.
    pub name: *const c_char,
    /// `init(context, commId, eActivationMask, commName, nNodes, nranks, rank, logfn)`.
    pub init: unsafe extern "C" fn(
        *mut *mut c_void,
        u64,
        *mut c_int,
        *const c_char,
        c_int,
        c_int,
        c_int,
        Option<Logger>,
    ) -> c_int,
    /// `startEvent(context, eHandle, eDescr)`.
    pub start_event: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut EventDescr) -> c_int,
    /// `stopEvent(eHandle)`.
    pub stop_event: unsafe extern "C" fn(*mut c_void) -> c_int,
    /// `recordEventState(eHandle, eState, eStateArgs)`.
    pub record_event_state: unsafe extern "C" fn(*mut c_void, c_int, *mut StateArgs) -> c_int,
    /// `finalize(context)`.
    pub finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
}

// SAFETY: the table is immutable after load: a pointer to a static C string and function
// pointers, all safe to read from any thread.
unsafe impl Sync for ProfilerV5 {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Offsets as NCCL's compiler lays out profiler_v5.h on x86_64 and aarch64 (LP64).
    #[test]
    fn layouts_match_profiler_v5_h() {
        assert_eq!(offset_of!(EventDescr, parent_obj), 8);
        assert_eq!(offset_of!(EventDescr, rank), 16);
        assert_eq!(offset_of!(EventDescr, u), 24);
        assert_eq!(offset_of!(CollDescr, count), 32);
        assert_eq!(offset_of!(CollDescr, root), 40);
        assert_eq!(offset_of!(CollDescr, datatype), 48);
        assert_eq!(offset_of!(CollDescr, n_channels), 56);
        assert_eq!(offset_of!(CollDescr, algo), 64);
        assert_eq!(size_of::<CollDescr>(), 88);
        assert_eq!(offset_of!(P2pDescr, count), 24);
        assert_eq!(offset_of!(P2pDescr, peer), 32);
        assert_eq!(offset_of!(P2pDescr, n_channels), 36);
        assert_eq!(offset_of!(ProxyOpDescr, channel_id), 4);
        assert_eq!(offset_of!(ProxyOpDescr, peer), 8);
        assert_eq!(offset_of!(ProxyOpDescr, is_send), 20);
        assert_eq!(offset_of!(KernelChDescr, p_timer), 8);
        assert_eq!(size_of::<StateArgs>(), 8);
        assert_eq!(size_of::<ProfilerV5>(), 48);
    }
}
