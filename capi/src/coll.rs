//! Collectives, Send/Recv and per-communicator reductions (`ncclRedOpCreatePreMulSum`). Every
//! call checks its arguments at once (NULL or dead communicator, data type, operation, root or
//! peer, counts) and then runs as a group of one, or waits for `ncclGroupEnd` inside a group.
//! Buffers are device addresses on the communicator's GPU, as in NCCL; the operation runs on
//! `stream`.

use std::ffi::{c_int, c_void};

use rnccl::{CollArgs, DataType, Func, RedOp, Scalar};

use crate::comm::{DynOp, handle, lock, ncclComm_t};
use crate::errors::{Failure, check_ptr, guard};
use crate::group::{Queued, Work, note_failure, submit};
use crate::types::*;

/// The reduction `op` means on `comm` for `dtype`.
///
/// Errors: `ncclInvalidArgument` for an unknown or destroyed operation, or a PreMulSum made for
/// another data type.
fn resolve_op(
    comm: &crate::comm::ncclComm,
    op: ncclRedOp_t,
    dtype: DataType,
    func: &str,
) -> Result<RedOp, Failure> {
    if let Some(b) = builtin_op(op) {
        return Ok(b);
    }
    let slot = usize::try_from(op - ncclNumOps)
        .ok()
        .and_then(|i| lock(&comm.ops).get(i).copied().flatten());
    match slot {
        Some(d) if d.dtype == dtype => Ok(d.op),
        Some(d) => Err(Failure::arg(
            func,
            format!(
                "reduction {op} was created for {} but the call uses {dtype}",
                d.dtype
            ),
        )),
        None => Err(Failure::arg(
            func,
            format!("invalid reduction operation {op}"),
        )),
    }
}

/// Whether this rank's buffers follow nccl.h's in-place layout for `func`, and if so the one
/// buffer (the address `push_device` takes as `recv` for in-place operations).
fn in_place(
    func: Func,
    send: u64,
    recv: u64,
    count: usize,
    dtype: DataType,
    rank: usize,
    root: usize,
) -> Option<u64> {
    let block = |i: usize| (i as u64).wrapping_mul(count as u64 * dtype.size() as u64);
    match func {
        Func::AllReduce | Func::Reduce | Func::Broadcast | Func::AllToAll => {
            (send == recv).then_some(recv)
        }
        Func::AllGather => (send == recv.wrapping_add(block(rank))).then_some(recv),
        Func::ReduceScatter => (recv == send.wrapping_add(block(rank))).then_some(send),
        Func::Gather => (rank == root && send == recv.wrapping_add(block(root))).then_some(recv),
        Func::Scatter => (rank == root && recv == send.wrapping_add(block(root))).then_some(send),
        Func::Send | Func::Recv => None,
    }
}

/// The checks and the submission every collective and Send/Recv shares. `op` is `None` for
/// functions that do not reduce; `root` is the root or peer (ignored where unused).
///
/// # Safety
/// `comm` as [`handle`]; buffers and stream as nccl.h requires for `func`.
#[allow(clippy::too_many_arguments)]
unsafe fn enqueue(
    name: &str,
    func: Func,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: ncclDataType_t,
    op: Option<ncclRedOp_t>,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<(), Failure> {
    // SAFETY: forwarded from the caller.
    let h = unsafe { handle(comm, name) }?;
    let dt = data_type(dtype).map_err(|m| Failure::arg(name, m))?;
    let op = match op {
        Some(op) => resolve_op(h, op, dt, name)?,
        None => RedOp::Sum,
    };
    let uses_root = func.rooted() || matches!(func, Func::Send | Func::Recv);
    let root = if uses_root {
        usize::try_from(root).map_err(|_| {
            let what = if func.rooted() { "root" } else { "peer" };
            Failure::arg(
                name,
                format!(
                    "{what} {root} is not a rank of this communicator (ranks are 0..{})",
                    h.nranks - 1
                ),
            )
        })?
    } else {
        0
    };
    let (send, recv) = (send as u64, recv as u64);
    let place = in_place(func, send, recv, count, dt, h.rank, root);
    let args = CollArgs {
        func,
        count,
        dtype: dt,
        op,
        root,
        in_place: place.is_some(),
    };
    args.validate(h.nranks)
        .map_err(|e| Failure::from_error(name, &e))?;
    let (send, recv) = match place {
        Some(buf) => (0, buf),
        None => (send, recv),
    };
    submit(
        Queued {
            comm: h,
            work: Work::Coll { args, send, recv },
            stream,
        },
        name,
    )
}

/// Runs [`enqueue`] under the entry guard, recording a failure for the enclosing group.
#[allow(clippy::too_many_arguments)]
fn call(
    name: &'static str,
    func: Func,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: ncclDataType_t,
    op: Option<ncclRedOp_t>,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    guard(name, || {
        // SAFETY: every exported caller forwards its own caller's nccl.h promises.
        let r = unsafe { enqueue(name, func, send, recv, count, dtype, op, root, comm, stream) };
        if let Err(f) = &r {
            note_failure(f);
        }
        r
    })
}

/// `ncclAllReduce`: `recvbuff[0..count]` on every rank = `op` over all ranks' `sendbuff`
/// (in place when the two are equal).
///
/// # Safety
/// `comm` a live communicator; `sendbuff`/`recvbuff` device memory of `count` elements of
/// `datatype` on its GPU; `stream` a stream of that GPU. Buffers stay valid until the stream
/// has run the operation.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclAllReduce",
        Func::AllReduce,
        sendbuff,
        recvbuff,
        count,
        datatype,
        Some(op),
        0,
        comm,
        stream,
    )
}

/// `ncclReduce`: `recvbuff` on `root` = `op` over all ranks' `sendbuff` (`count` elements).
///
/// # Safety
/// As [`ncclAllReduce`]; `recvbuff` is used on the root only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    op: ncclRedOp_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclReduce",
        Func::Reduce,
        sendbuff,
        recvbuff,
        count,
        datatype,
        Some(op),
        root,
        comm,
        stream,
    )
}

/// `ncclBroadcast`: `recvbuff` on every rank = `sendbuff` of `root` (`count` elements).
///
/// # Safety
/// As [`ncclAllReduce`]; `sendbuff` is used on the root only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclBroadcast(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclBroadcast",
        Func::Broadcast,
        sendbuff,
        recvbuff,
        count,
        datatype,
        None,
        root,
        comm,
        stream,
    )
}

/// `ncclBcast` (deprecated): in-place [`ncclBroadcast`] of `buff`.
///
/// # Safety
/// As [`ncclBroadcast`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclBcast(
    buff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclBcast",
        Func::Broadcast,
        buff,
        buff,
        count,
        datatype,
        None,
        root,
        comm,
        stream,
    )
}

/// `ncclReduceScatter`: block `rank` (`recvcount` elements) of `op` over all ranks' `sendbuff`
/// (`nranks * recvcount` elements) into `recvbuff`.
///
/// # Safety
/// As [`ncclAllReduce`], with those sizes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduceScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclReduceScatter",
        Func::ReduceScatter,
        sendbuff,
        recvbuff,
        recvcount,
        datatype,
        Some(op),
        0,
        comm,
        stream,
    )
}

/// `ncclAllGather`: every rank's `sendbuff` (`sendcount` elements) into block `rank` of
/// `recvbuff` (`nranks * sendcount` elements) on every rank.
///
/// # Safety
/// As [`ncclAllReduce`], with those sizes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: ncclDataType_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclAllGather",
        Func::AllGather,
        sendbuff,
        recvbuff,
        sendcount,
        datatype,
        None,
        0,
        comm,
        stream,
    )
}

/// `ncclAlltoAll`: block `j` (`count` elements) of `sendbuff` to rank `j`, block `i` of
/// `recvbuff` from rank `i`.
///
/// # Safety
/// As [`ncclAllReduce`], with `nranks * count` elements per buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAlltoAll(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclAlltoAll",
        Func::AllToAll,
        sendbuff,
        recvbuff,
        count,
        datatype,
        None,
        0,
        comm,
        stream,
    )
}

/// `ncclGather`: every rank's `sendbuff` (`count` elements) into block `rank` of the root's
/// `recvbuff`.
///
/// # Safety
/// As [`ncclAllReduce`]; `recvbuff` (`nranks * count` elements) is used on the root only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclGather",
        Func::Gather,
        sendbuff,
        recvbuff,
        count,
        datatype,
        None,
        root,
        comm,
        stream,
    )
}

/// `ncclScatter`: block `i` (`count` elements) of the root's `sendbuff` into rank `i`'s
/// `recvbuff`.
///
/// # Safety
/// As [`ncclAllReduce`]; `sendbuff` (`nranks * count` elements) is used on the root only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclScatter",
        Func::Scatter,
        sendbuff,
        recvbuff,
        count,
        datatype,
        None,
        root,
        comm,
        stream,
    )
}

/// `ncclSend`: `count` elements of `sendbuff` to rank `peer` (which calls [`ncclRecv`]).
///
/// # Safety
/// As [`ncclAllReduce`] for `sendbuff`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclSend(
    sendbuff: *const c_void,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclSend",
        Func::Send,
        sendbuff,
        std::ptr::null_mut(),
        count,
        datatype,
        None,
        peer,
        comm,
        stream,
    )
}

/// `ncclRecv`: `count` elements from rank `peer` into `recvbuff`.
///
/// # Safety
/// As [`ncclAllReduce`] for `recvbuff`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRecv(
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    call(
        "ncclRecv",
        Func::Recv,
        std::ptr::null(),
        recvbuff,
        count,
        datatype,
        None,
        peer,
        comm,
        stream,
    )
}

/// Reads a host scalar of `dtype` at `p`.
///
/// # Safety
/// `p` points to one readable element of `dtype` (any alignment).
unsafe fn read_scalar(p: *const c_void, dtype: DataType) -> Scalar {
    // SAFETY: (all arms) the caller passes one readable element of `dtype`.
    unsafe {
        match dtype {
            DataType::Int8 => Scalar::Int(p.cast::<i8>().read_unaligned().into()),
            DataType::Uint8 => Scalar::Uint(p.cast::<u8>().read_unaligned().into()),
            DataType::Int32 => Scalar::Int(p.cast::<i32>().read_unaligned().into()),
            DataType::Uint32 => Scalar::Uint(p.cast::<u32>().read_unaligned().into()),
            DataType::Int64 => Scalar::Int(p.cast::<i64>().read_unaligned()),
            DataType::Uint64 => Scalar::Uint(p.cast::<u64>().read_unaligned()),
            DataType::Float16 => {
                Scalar::Float(half::f16::from_bits(p.cast::<u16>().read_unaligned()).to_f64())
            }
            DataType::Bfloat16 => {
                Scalar::Float(half::bf16::from_bits(p.cast::<u16>().read_unaligned()).to_f64())
            }
            DataType::Float32 => Scalar::Float(p.cast::<f32>().read_unaligned().into()),
            DataType::Float64 => Scalar::Float(p.cast::<f64>().read_unaligned()),
            DataType::Float8e4m3 => Scalar::Float(
                rnccl::F8E4M3::from_bits(p.cast::<u8>().read())
                    .to_f32()
                    .into(),
            ),
            DataType::Float8e5m2 => Scalar::Float(
                rnccl::F8E5M2::from_bits(p.cast::<u8>().read())
                    .to_f32()
                    .into(),
            ),
        }
    }
}

/// `ncclRedOpCreatePreMulSum`: a reduction for `comm` and `datatype` that multiplies every
/// input by `*scalar` and sums; its id (≥ `ncclNumOps`) goes to `*op`. An
/// `ncclScalarHostImmediate` scalar is read now; an `ncclScalarDevice` scalar (one element in
/// device memory, which must stay valid while operations use the reduction) is read by each
/// collective's kernel when it runs, as NCCL does.
///
/// # Safety
/// `op` NULL or writable; `scalar` one readable element of `datatype`; `comm` as
/// [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRedOpCreatePreMulSum(
    op: *mut ncclRedOp_t,
    scalar: *mut c_void,
    datatype: ncclDataType_t,
    residence: ncclScalarResidence_t,
    comm: ncclComm_t,
) -> ncclResult_t {
    const F: &str = "ncclRedOpCreatePreMulSum";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(op, F, "op")?;
        if scalar.is_null() {
            return Err(Failure::arg(F, "scalar argument is NULL"));
        }
        let dtype = data_type(datatype).map_err(|m| Failure::arg(F, m))?;
        let s = match residence {
            // SAFETY: the caller passes one readable element of `datatype`.
            ncclScalarHostImmediate => unsafe { read_scalar(scalar, dtype) },
            ncclScalarDevice => Scalar::Device(scalar as u64),
            r => return Err(Failure::arg(F, format!("invalid scalar residence {r}"))),
        };
        let entry = DynOp {
            op: RedOp::PreMulSum(s),
            dtype,
        };
        let mut ops = lock(&h.ops);
        let i = match ops.iter().position(Option::is_none) {
            Some(i) => {
                ops[i] = Some(entry);
                i
            }
            None => {
                ops.push(Some(entry));
                ops.len() - 1
            }
        };
        let id = ncclNumOps as usize + i;
        let id = c_int::try_from(id)
            .map_err(|_| Failure::new(ncclInternalError, F, "too many reduction operations"))?;
        // SAFETY: checked non-null and aligned; the caller passes a writable op.
        unsafe { op.write(id) };
        Ok(())
    })
}

/// `ncclRedOpDestroy`: frees a reduction made by [`ncclRedOpCreatePreMulSum`] on `comm`.
///
/// # Safety
/// `comm` as [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRedOpDestroy(op: ncclRedOp_t, comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclRedOpDestroy";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if (0..ncclNumOps).contains(&op) {
            return Err(Failure::arg(
                F,
                format!("operation {op} is built in and cannot be destroyed"),
            ));
        }
        let mut ops = lock(&h.ops);
        let slot = usize::try_from(op - ncclNumOps)
            .ok()
            .and_then(|i| ops.get_mut(i))
            .filter(|s| s.is_some());
        match slot {
            Some(s) => {
                *s = None;
                Ok(())
            }
            None => Err(Failure::arg(
                F,
                format!("operation {op} was not created on this communicator (or was destroyed)"),
            )),
        }
    })
}
