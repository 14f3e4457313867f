//! nccl.h 2.30's types, constants and enums, laid out as C sees them. Enums crossing the C
//! boundary are plain `c_int`s (a C caller may pass any value; a Rust enum would make a bad
//! value undefined behaviour), with nccl.h's enumerators as constants.

use std::ffi::{c_char, c_int, c_uint, c_void};

use rnccl::{DataType, RedOp};

/// `ncclResult_t`: a result code (`ncclSuccess` … `ncclInProgress`).
pub type ncclResult_t = c_int;
/// No error.
pub const ncclSuccess: ncclResult_t = 0;
/// A CUDA call failed.
pub const ncclUnhandledCudaError: ncclResult_t = 1;
/// A system call failed, or the host has no usable GPU.
pub const ncclSystemError: ncclResult_t = 2;
/// A bug in rnccl (or a panic caught at the C boundary).
pub const ncclInternalError: ncclResult_t = 3;
/// A bad argument.
pub const ncclInvalidArgument: ncclResult_t = 4;
/// A bad sequence of calls, or a function rnccl does not implement yet.
pub const ncclInvalidUsage: ncclResult_t = 5;
/// A peer exited, the network failed, or a wait timed out.
pub const ncclRemoteError: ncclResult_t = 6;
/// A non-blocking operation is still running (a communicator still initialising).
pub const ncclInProgress: ncclResult_t = 7;
/// A wait ran out of time (nccl.h 2.30). NCCL 2.30 returns it only from its device API's
/// barriers; rnccl never returns it (a host-side wait that runs out is a peer that stopped
/// answering, `ncclRemoteError`, as NCCL reports it).
pub const ncclTimeout: ncclResult_t = 8;
/// Number of result codes.
pub const ncclNumResults: ncclResult_t = 9;

/// `ncclDataType_t`: an element type.
pub type ncclDataType_t = c_int;
/// 8-bit signed integer (also `ncclChar`).
pub const ncclInt8: ncclDataType_t = 0;
/// `ncclInt8`'s alias.
pub const ncclChar: ncclDataType_t = 0;
/// 8-bit unsigned integer.
pub const ncclUint8: ncclDataType_t = 1;
/// 32-bit signed integer (also `ncclInt`).
pub const ncclInt32: ncclDataType_t = 2;
/// `ncclInt32`'s alias.
pub const ncclInt: ncclDataType_t = 2;
/// 32-bit unsigned integer.
pub const ncclUint32: ncclDataType_t = 3;
/// 64-bit signed integer.
pub const ncclInt64: ncclDataType_t = 4;
/// 64-bit unsigned integer.
pub const ncclUint64: ncclDataType_t = 5;
/// IEEE binary16 (also `ncclHalf`).
pub const ncclFloat16: ncclDataType_t = 6;
/// `ncclFloat16`'s alias.
pub const ncclHalf: ncclDataType_t = 6;
/// IEEE binary32 (also `ncclFloat`).
pub const ncclFloat32: ncclDataType_t = 7;
/// `ncclFloat32`'s alias.
pub const ncclFloat: ncclDataType_t = 7;
/// IEEE binary64 (also `ncclDouble`).
pub const ncclFloat64: ncclDataType_t = 8;
/// `ncclFloat64`'s alias.
pub const ncclDouble: ncclDataType_t = 8;
/// bfloat16.
pub const ncclBfloat16: ncclDataType_t = 9;
/// FP8 E4M3 (`__nv_fp8_e4m3`).
pub const ncclFloat8e4m3: ncclDataType_t = 10;
/// FP8 E5M2 (`__nv_fp8_e5m2`).
pub const ncclFloat8e5m2: ncclDataType_t = 11;
/// Number of data types.
pub const ncclNumTypes: ncclDataType_t = 12;

/// `ncclRedOp_t`: a reduction; values from `ncclNumOps` up are per-communicator operations
/// made by `ncclRedOpCreatePreMulSum`.
pub type ncclRedOp_t = c_int;
/// Sum.
pub const ncclSum: ncclRedOp_t = 0;
/// Product.
pub const ncclProd: ncclRedOp_t = 1;
/// Maximum.
pub const ncclMax: ncclRedOp_t = 2;
/// Minimum.
pub const ncclMin: ncclRedOp_t = 3;
/// Average (sum divided by the number of ranks).
pub const ncclAvg: ncclRedOp_t = 4;
/// Number of built-in operations; the first dynamic operation id.
pub const ncclNumOps: ncclRedOp_t = 5;
/// The largest valid operation id (`INT_MAX` for nccl.h's 4-byte enum).
pub const ncclMaxRedOp: ncclRedOp_t = c_int::MAX;

/// `ncclScalarResidence_t`: where `ncclRedOpCreatePreMulSum`'s scalar lives.
pub type ncclScalarResidence_t = c_int;
/// In device memory, read while the collective runs (not supported by rnccl yet).
pub const ncclScalarDevice: ncclScalarResidence_t = 0;
/// In host memory, read before `ncclRedOpCreatePreMulSum` returns.
pub const ncclScalarHostImmediate: ncclScalarResidence_t = 1;

/// `NCCL_UNIQUE_ID_BYTES`: size of [`ncclUniqueId`].
pub const NCCL_UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: 128 opaque bytes naming a communicator's rendezvous. rnccl stores its id's
/// text form (`rnccl:<magic>@<addr>:<port>`), NUL-terminated and NUL-padded.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclUniqueId {
    /// The id's bytes.
    pub internal: [c_char; NCCL_UNIQUE_ID_BYTES],
}

/// `NCCL_CONFIG_UNDEF_INT`: an `ncclConfig_t` field left to the library.
pub const NCCL_CONFIG_UNDEF_INT: c_int = c_int::MIN;
/// `NCCL_SPLIT_NOCOLOR`: `ncclCommSplit`'s color for ranks that join no new communicator.
pub const NCCL_SPLIT_NOCOLOR: c_int = -1;
/// `NCCL_SHRINK_DEFAULT`: `ncclCommShrink` on a parent with no operation in flight.
pub const NCCL_SHRINK_DEFAULT: c_int = 0;
/// `NCCL_SHRINK_ABORT`: `ncclCommShrink` stops the parent's operations in flight first.
pub const NCCL_SHRINK_ABORT: c_int = 1;
/// `NCCL_REVOKE_DEFAULT`: the only flag value `ncclCommRevoke` takes.
pub const NCCL_REVOKE_DEFAULT: c_int = 0;
/// `NCCL_SUSPEND_MEM`: `ncclCommSuspend` releases the communicator's dynamic GPU memory.
pub const NCCL_SUSPEND_MEM: c_int = 0x01;

/// `ncclCommMemStat_t`: which figure `ncclCommMemStats` returns.
pub type ncclCommMemStat_t = c_int;
/// GPU memory a suspension frees, bytes.
pub const ncclStatGpuMemSuspend: ncclCommMemStat_t = 0;
/// 1 while suspended with memory released, else 0.
pub const ncclStatGpuMemSuspended: ncclCommMemStat_t = 1;
/// GPU memory held while the communicator lives, bytes.
pub const ncclStatGpuMemPersist: ncclCommMemStat_t = 2;
/// All GPU memory tracked, bytes.
pub const ncclStatGpuMemTotal: ncclCommMemStat_t = 3;
/// `NCCL_API_MAGIC`: the magic `NCCL_CONFIG_INITIALIZER` writes (0xcafebeef).
pub const NCCL_API_MAGIC: c_uint = 0xcafe_beef;
/// `NCCL_MAJOR` of the API implemented here ([`rnccl::NCCL_API_VERSION`]).
pub const NCCL_MAJOR: c_int = rnccl::NCCL_API_VERSION.0 as c_int;
/// `NCCL_MINOR` of the API implemented here.
pub const NCCL_MINOR: c_int = rnccl::NCCL_API_VERSION.1 as c_int;
/// `NCCL_PATCH` of the API implemented here.
pub const NCCL_PATCH: c_int = rnccl::NCCL_API_VERSION.2 as c_int;
/// `NCCL_VERSION_CODE` of the API implemented here: 2.30.7 = 23007.
pub const NCCL_VERSION_CODE: c_int = nccl_version(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);

/// nccl.h's `NCCL_VERSION(X, Y, Z)`: `X*1000 + Y*100 + Z` up to 2.8, `X*10000 + Y*100 + Z`
/// after.
pub const fn nccl_version(x: c_int, y: c_int, z: c_int) -> c_int {
    if x <= 2 && y <= 8 {
        x * 1000 + y * 100 + z
    } else {
        x * 10000 + y * 100 + z
    }
}

/// `ncclConfig_t` (`struct ncclConfig_v23000`): communicator settings, initialised by
/// `NCCL_CONFIG_INITIALIZER` (size, magic 0xcafebeef, version, every other field
/// `NCCL_CONFIG_UNDEF_INT`/NULL).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ncclConfig_t {
    /// `sizeof(ncclConfig_t)` of the caller's header, in bytes.
    pub size: usize,
    /// `NCCL_API_MAGIC`.
    pub magic: c_uint,
    /// `NCCL_VERSION_CODE` of the caller's header.
    pub version: c_uint,
    /// 1: blocking calls; 0: non-blocking.
    pub blocking: c_int,
    /// CTA cluster size (Hopper and later).
    pub cgaClusterSize: c_int,
    /// Minimum CTAs (channels).
    pub minCTAs: c_int,
    /// Maximum CTAs (channels).
    pub maxCTAs: c_int,
    /// Network module name (`NCCL_NET`), or NULL.
    pub netName: *const c_char,
    /// 0/1: share resources with a split parent.
    pub splitShare: c_int,
    /// Traffic class for the network.
    pub trafficClass: c_int,
    /// A name for logs, or NULL.
    pub commName: *const c_char,
    /// 0/1: CollNet.
    pub collnetEnable: c_int,
    /// `NCCL_CTA_POLICY_*` flags.
    pub CTAPolicy: c_int,
    /// 0/1: share resources with a shrink parent.
    pub shrinkShare: c_int,
    /// NVLS CTAs.
    pub nvlsCTAs: c_int,
    /// Channels per network peer (1..64).
    pub nChannelsPerNetPeer: c_int,
    /// 0/1: NVLink-centric scheduling.
    pub nvlinkCentricSched: c_int,
    /// 0, 1 or 2: how the communicator's work is captured in CUDA graphs (2: captured and
    /// uncaptured work may mix; NCCL 2.29).
    pub graphUsageMode: c_int,
    /// Host RMA contexts, ≥ 0 (0: one-sided operations off; NCCL 2.29).
    pub numRmaCtx: c_int,
    /// Most peers a rank keeps point-to-point connections with, ≥ 1 (NCCL 2.30).
    pub maxP2pPeers: c_int,
    /// 0/1: NCCL orders its kernels during CUDA-graph capture (NCCL 2.30.5).
    pub graphStreamOrdering: c_int,
}

impl ncclConfig_t {
    /// What `NCCL_CONFIG_INITIALIZER` gives with this library's header.
    pub const INITIALIZER: ncclConfig_t = ncclConfig_t {
        size: std::mem::size_of::<ncclConfig_t>(),
        magic: NCCL_API_MAGIC,
        version: NCCL_VERSION_CODE as c_uint,
        blocking: NCCL_CONFIG_UNDEF_INT,
        cgaClusterSize: NCCL_CONFIG_UNDEF_INT,
        minCTAs: NCCL_CONFIG_UNDEF_INT,
        maxCTAs: NCCL_CONFIG_UNDEF_INT,
        netName: std::ptr::null(),
        splitShare: NCCL_CONFIG_UNDEF_INT,
        trafficClass: NCCL_CONFIG_UNDEF_INT,
        commName: std::ptr::null(),
        collnetEnable: NCCL_CONFIG_UNDEF_INT,
        CTAPolicy: NCCL_CONFIG_UNDEF_INT,
        shrinkShare: NCCL_CONFIG_UNDEF_INT,
        nvlsCTAs: NCCL_CONFIG_UNDEF_INT,
        nChannelsPerNetPeer: NCCL_CONFIG_UNDEF_INT,
        nvlinkCentricSched: NCCL_CONFIG_UNDEF_INT,
        graphUsageMode: NCCL_CONFIG_UNDEF_INT,
        numRmaCtx: NCCL_CONFIG_UNDEF_INT,
        maxP2pPeers: NCCL_CONFIG_UNDEF_INT,
        graphStreamOrdering: NCCL_CONFIG_UNDEF_INT,
    };
}

/// `ncclSimInfo_t`: what `ncclGroupSimulateEnd` reports (rnccl does not implement it yet).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ncclSimInfo_t {
    /// `sizeof(ncclSimInfo_t)`, in bytes.
    pub size: usize,
    /// 0x74685283.
    pub magic: c_uint,
    /// `NCCL_VERSION_CODE` of the caller's header.
    pub version: c_uint,
    /// Estimated time of the group, in microseconds.
    pub estimatedTime: f32,
}

/// `cudaStream_t`: a CUDA stream of the runtime (the same handle as the driver's `CUstream`).
pub type cudaStream_t = *mut c_void;

/// `struct ncclWindow_vidmem`: the object behind `ncclWindow_t`, opaque to C (rnccl's window
/// handles point to its own registration records).
pub struct ncclWindow_vidmem {
    _private: [u8; 0],
}
/// `ncclWaitSignalDesc_t`: how many signals to wait for from a rank.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclWaitSignalDesc_t {
    /// Signals to wait for, at least 1.
    pub opCnt: c_int,
    /// The rank whose signals count.
    pub peer: c_int,
    /// Signal index: must be 0 (NCCL 2.30 defines one).
    pub sigIdx: c_int,
    /// Context: must be 0.
    pub ctx: c_int,
}

/// `ncclWindow_t`: a registered memory window.
pub type ncclWindow_t = *mut ncclWindow_vidmem;

/// `struct ncclDevCommRequirements` (nccl_device/core.h): never read, rnccl has no device API.
pub struct ncclDevCommRequirements {
    _private: [u8; 0],
}
/// `struct ncclDevComm` (nccl_device/core.h): never written, rnccl has no device API.
pub struct ncclDevComm {
    _private: [u8; 0],
}

/// The rnccl data type of an `ncclDataType_t`.
///
/// Errors: a message for values outside the enum.
pub fn data_type(t: ncclDataType_t) -> Result<DataType, String> {
    DataType::ALL
        .into_iter()
        .find(|d| *d as c_int == t)
        .ok_or_else(|| format!("invalid data type {t} (valid: 0..{})", ncclNumTypes - 1))
}

/// The rnccl operation of a built-in `ncclRedOp_t` (`ncclSum`..`ncclAvg`), or `None`.
pub fn builtin_op(op: ncclRedOp_t) -> Option<RedOp> {
    usize::try_from(op)
        .ok()
        .and_then(|i| RedOp::BUILTIN.get(i).copied())
}
