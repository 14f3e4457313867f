//! NCCL's profiling aliases: every `ncclXxx` is also exported as `pncclXxx` (PMPI style), so a
//! profiling library can define `ncclXxx` itself and forward to `pncclXxx`. Each alias calls
//! the function it names with the same arguments.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::comm::ncclComm_t;
use crate::param::ncclParamHandle_t;
use crate::types::*;

/// Defines `pncclXxx` functions that forward to the `ncclXxx` they alias.
macro_rules! aliases {
    ($($alias:ident => $m:ident :: $target:ident ($($arg:ident : $ty:ty),*) -> $ret:ty;)*) => {
        $(
            #[doc = concat!("`", stringify!($alias), "`: the profiling alias of `",
                stringify!($target), "`.")]
            ///
            /// # Safety
            /// As the function it aliases.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $alias($($arg: $ty),*) -> $ret {
                // SAFETY: the caller made the aliased function's promises.
                unsafe { crate::$m::$target($($arg),*) }
            }
        )*
    };
}

aliases! {
    pncclAllReduce => coll::ncclAllReduce(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, op: ncclRedOp_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclReduce => coll::ncclReduce(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, op: ncclRedOp_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclBroadcast => coll::ncclBroadcast(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclBcast => coll::ncclBcast(buff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclReduceScatter => coll::ncclReduceScatter(sendbuff: *const c_void, recvbuff: *mut c_void, recvcount: usize, datatype: ncclDataType_t, op: ncclRedOp_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclAllGather => coll::ncclAllGather(sendbuff: *const c_void, recvbuff: *mut c_void, sendcount: usize, datatype: ncclDataType_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclAlltoAll => coll::ncclAlltoAll(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclGather => coll::ncclGather(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclScatter => coll::ncclScatter(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclSend => coll::ncclSend(sendbuff: *const c_void, count: usize, datatype: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclRecv => coll::ncclRecv(recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclRedOpCreatePreMulSum => coll::ncclRedOpCreatePreMulSum(op: *mut ncclRedOp_t, scalar: *mut c_void, datatype: ncclDataType_t, residence: ncclScalarResidence_t, comm: ncclComm_t) -> ncclResult_t;
    pncclRedOpDestroy => coll::ncclRedOpDestroy(op: ncclRedOp_t, comm: ncclComm_t) -> ncclResult_t;
    pncclGetUniqueId => init::ncclGetUniqueId(uniqueId: *mut ncclUniqueId) -> ncclResult_t;
    pncclCommInitRank => init::ncclCommInitRank(comm: *mut ncclComm_t, nranks: c_int, commId: ncclUniqueId, rank: c_int) -> ncclResult_t;
    pncclCommInitRankConfig => init::ncclCommInitRankConfig(comm: *mut ncclComm_t, nranks: c_int, commId: ncclUniqueId, rank: c_int, config: *mut ncclConfig_t) -> ncclResult_t;
    pncclCommInitRankScalable => init::ncclCommInitRankScalable(newcomm: *mut ncclComm_t, nranks: c_int, myrank: c_int, nId: c_int, commIds: *mut ncclUniqueId, config: *mut ncclConfig_t) -> ncclResult_t;
    pncclCommInitAll => init::ncclCommInitAll(comm: *mut ncclComm_t, ndev: c_int, devlist: *const c_int) -> ncclResult_t;
    pncclCommFinalize => lifecycle::ncclCommFinalize(comm: ncclComm_t) -> ncclResult_t;
    pncclCommDestroy => lifecycle::ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t;
    pncclCommAbort => lifecycle::ncclCommAbort(comm: ncclComm_t) -> ncclResult_t;
    pncclCommSplit => lifecycle::ncclCommSplit(comm: ncclComm_t, color: c_int, key: c_int, newcomm: *mut ncclComm_t, config: *mut ncclConfig_t) -> ncclResult_t;
    pncclCommRevoke => lifecycle::ncclCommRevoke(comm: ncclComm_t, revokeFlags: c_int) -> ncclResult_t;
    pncclCommGetUniqueId => grow::ncclCommGetUniqueId(comm: ncclComm_t, uniqueId: *mut ncclUniqueId) -> ncclResult_t;
    pncclCommGrow => grow::ncclCommGrow(comm: ncclComm_t, nRanks: c_int, uniqueId: *const ncclUniqueId, rank: c_int, newcomm: *mut ncclComm_t, config: *mut ncclConfig_t) -> ncclResult_t;
    pncclPutSignal => rma::ncclPutSignal(localbuff: *const c_void, count: usize, datatype: ncclDataType_t, peer: c_int, peerWin: ncclWindow_t, peerWinOffset: usize, sigIdx: c_int, ctx: c_int, flags: c_uint, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclSignal => rma::ncclSignal(peer: c_int, sigIdx: c_int, ctx: c_int, flags: c_uint, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclWaitSignal => rma::ncclWaitSignal(nDesc: c_int, signalDescs: *mut ncclWaitSignalDesc_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    pncclWinGetUserPtr => register::ncclWinGetUserPtr(comm: ncclComm_t, win: ncclWindow_t, outUserPtr: *mut *mut c_void) -> ncclResult_t;
    pncclCommSuspend => suspend::ncclCommSuspend(comm: ncclComm_t, flags: c_int) -> ncclResult_t;
    pncclCommResume => suspend::ncclCommResume(comm: ncclComm_t) -> ncclResult_t;
    pncclCommMemStats => suspend::ncclCommMemStats(comm: ncclComm_t, stat: ncclCommMemStat_t, value: *mut u64) -> ncclResult_t;
    pncclCommShrink => lifecycle::ncclCommShrink(comm: ncclComm_t, excludeRanksList: *mut c_int, excludeRanksCount: c_int, newcomm: *mut ncclComm_t, config: *mut ncclConfig_t, shrinkFlags: c_int) -> ncclResult_t;
    pncclCommCount => query::ncclCommCount(comm: ncclComm_t, count: *mut c_int) -> ncclResult_t;
    pncclCommUserRank => query::ncclCommUserRank(comm: ncclComm_t, rank: *mut c_int) -> ncclResult_t;
    pncclCommCuDevice => query::ncclCommCuDevice(comm: ncclComm_t, device: *mut c_int) -> ncclResult_t;
    pncclCommGetAsyncError => query::ncclCommGetAsyncError(comm: ncclComm_t, asyncError: *mut ncclResult_t) -> ncclResult_t;
    pncclCommRegister => register::ncclCommRegister(comm: ncclComm_t, buff: *mut c_void, size: usize, handle_out: *mut *mut c_void) -> ncclResult_t;
    pncclCommDeregister => register::ncclCommDeregister(comm: ncclComm_t, handle_in: *mut c_void) -> ncclResult_t;
    pncclCommWindowRegister => register::ncclCommWindowRegister(comm: ncclComm_t, buff: *mut c_void, size: usize, win: *mut ncclWindow_t, winFlags: c_int) -> ncclResult_t;
    pncclCommWindowDeregister => register::ncclCommWindowDeregister(comm: ncclComm_t, win: ncclWindow_t) -> ncclResult_t;
    pncclDevCommCreate => register::ncclDevCommCreate(comm: ncclComm_t, reqs: *const ncclDevCommRequirements, outDevComm: *mut ncclDevComm) -> ncclResult_t;
    pncclDevCommDestroy => register::ncclDevCommDestroy(comm: ncclComm_t, devComm: *const ncclDevComm) -> ncclResult_t;
    pncclGetVersion => errors::ncclGetVersion(version: *mut c_int) -> ncclResult_t;
    pncclGroupSimulateEnd => group::ncclGroupSimulateEnd(simInfo: *mut ncclSimInfo_t) -> ncclResult_t;
    pncclMemAlloc => mem::ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> ncclResult_t;
    pncclMemFree => mem::ncclMemFree(ptr: *mut c_void) -> ncclResult_t;
    pncclParamBind => param::ncclParamBind(out: *mut ncclParamHandle_t, key: *const c_char) -> ncclResult_t;
    pncclParamGetI8 => param::ncclParamGetI8(h: ncclParamHandle_t, out: *mut i8) -> ncclResult_t;
    pncclParamGetI16 => param::ncclParamGetI16(h: ncclParamHandle_t, out: *mut i16) -> ncclResult_t;
    pncclParamGetI32 => param::ncclParamGetI32(h: ncclParamHandle_t, out: *mut i32) -> ncclResult_t;
    pncclParamGetI64 => param::ncclParamGetI64(h: ncclParamHandle_t, out: *mut i64) -> ncclResult_t;
    pncclParamGetU8 => param::ncclParamGetU8(h: ncclParamHandle_t, out: *mut u8) -> ncclResult_t;
    pncclParamGetU16 => param::ncclParamGetU16(h: ncclParamHandle_t, out: *mut u16) -> ncclResult_t;
    pncclParamGetU32 => param::ncclParamGetU32(h: ncclParamHandle_t, out: *mut u32) -> ncclResult_t;
    pncclParamGetU64 => param::ncclParamGetU64(h: ncclParamHandle_t, out: *mut u64) -> ncclResult_t;
    pncclParamGetStr => param::ncclParamGetStr(h: ncclParamHandle_t, out: *mut *const c_char) -> ncclResult_t;
    pncclParamGet => param::ncclParamGet(h: ncclParamHandle_t, out: *mut c_void, maxLen: c_int, len: *mut c_int) -> ncclResult_t;
    pncclParamGetParameter => param::ncclParamGetParameter(key: *const c_char, value: *mut *const c_char, valueLen: *mut c_int) -> ncclResult_t;
    pncclParamGetAllParameterKeys => param::ncclParamGetAllParameterKeys(table: *mut *const *const c_char, tableLen: *mut c_int) -> ncclResult_t;
}

/// `pncclParamDumpAll`: the profiling alias of `ncclParamDumpAll`.
#[unsafe(no_mangle)]
pub extern "C" fn pncclParamDumpAll() {
    crate::param::ncclParamDumpAll()
}

/// `pncclGroupStart`: the profiling alias of `ncclGroupStart`.
#[unsafe(no_mangle)]
pub extern "C" fn pncclGroupStart() -> ncclResult_t {
    crate::group::ncclGroupStart()
}

/// `pncclGroupEnd`: the profiling alias of `ncclGroupEnd`.
#[unsafe(no_mangle)]
pub extern "C" fn pncclGroupEnd() -> ncclResult_t {
    crate::group::ncclGroupEnd()
}

/// `pncclGetErrorString`: the profiling alias of `ncclGetErrorString`.
#[unsafe(no_mangle)]
pub extern "C" fn pncclGetErrorString(result: ncclResult_t) -> *const c_char {
    crate::errors::ncclGetErrorString(result)
}

/// `pncclGetLastError`: the profiling alias of `ncclGetLastError`.
#[unsafe(no_mangle)]
pub extern "C" fn pncclGetLastError(comm: ncclComm_t) -> *const c_char {
    crate::errors::ncclGetLastError(comm)
}
