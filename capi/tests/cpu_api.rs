//! The CPU-side entry points, called through the Rust definitions of the exported functions:
//! version, error strings, unique ids, `ncclConfig_t` checks, init without CUDA, and bad
//! arguments (NULL or dead communicator, bad rank, data type, operation, root, group misuse).
//! Calls that need a live communicator use a one-rank host communicator wrapped in a handle.

mod common;

use common::{expect, last_error};

use std::ffi::{CStr, c_int, c_void};
use std::ptr::{null, null_mut};

use nccl::coll::*;
use nccl::comm::*;
use nccl::errors::*;
use nccl::group::*;
use nccl::init::*;
use nccl::lifecycle::*;
use nccl::mem::*;
use nccl::query::*;
use nccl::register::*;
use nccl::types::*;

fn unique_id() -> ncclUniqueId {
    let mut id = ncclUniqueId {
        internal: [0; NCCL_UNIQUE_ID_BYTES],
    };
    // SAFETY: a writable id.
    assert_eq!(unsafe { ncclGetUniqueId(&mut id) }, ncclSuccess);
    id
}

fn no_gpu() -> bool {
    rnccl::gpus().is_err()
}

#[test]
fn version_and_error_strings() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut v = 0;
    // SAFETY: a writable int, then NULL (refused).
    unsafe {
        assert_eq!(ncclGetVersion(&mut v), ncclSuccess);
        assert_eq!(v, 23007);
        expect(
            ncclGetVersion(null_mut()),
            ncclInvalidArgument,
            &["ncclGetVersion", "NULL"],
        );
    }
    let s = |r| {
        // SAFETY: static strings.
        unsafe { CStr::from_ptr(ncclGetErrorString(r)) }
            .to_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(s(ncclSuccess), "no error");
    assert!(s(ncclSystemError).starts_with("unhandled system error"));
    assert_eq!(s(ncclInProgress), "NCCL operation in progress");
    assert_eq!(s(99), "unknown result code");
    assert_eq!(s(-1), "unknown result code");
}

#[test]
fn unique_ids_differ_and_round_trip() {
    let (a, b) = (unique_id(), unique_id());
    assert_ne!(a.internal, b.internal);
    let parsed = id_from_c(&a, "t").unwrap();
    assert_eq!(id_to_c(&parsed, "t").unwrap().internal, a.internal);
    let text: Vec<u8> = a
        .internal
        .iter()
        .map(|&c| c as u8)
        .take_while(|&c| c != 0)
        .collect();
    assert!(
        text.starts_with(b"rnccl:"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let mut foreign = a;
    foreign.internal[0] = 7;
    assert!(
        id_from_c(&foreign, "t")
            .unwrap_err()
            .msg
            .contains("not made by")
    );
}

#[test]
fn init_checks_arguments_then_reports_no_gpu() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let id = unique_id();
    let mut comm: ncclComm_t = null_mut();
    // SAFETY: writable handles and valid ids throughout; NULL where refusal is tested.
    unsafe {
        expect(
            ncclCommInitRank(null_mut(), 1, id, 0),
            ncclInvalidArgument,
            &["newcomm"],
        );
        expect(
            ncclCommInitRank(&mut comm, 2, id, 2),
            ncclInvalidArgument,
            &["rank", "2/2"],
        );
        expect(
            ncclCommInitRank(&mut comm, 0, id, 0),
            ncclInvalidArgument,
            &["0/0"],
        );
        expect(
            ncclCommInitRank(&mut comm, 2, id, -1),
            ncclInvalidArgument,
            &["-1/2"],
        );
        let mut foreign = id;
        foreign.internal[..6].copy_from_slice(&[b'x' as _; 6]);
        expect(
            ncclCommInitRank(&mut comm, 1, foreign, 0),
            ncclInvalidArgument,
            &["ncclUniqueId"],
        );
        expect(
            ncclCommInitRankScalable(&mut comm, 2, 0, 3, [id, id, id].as_mut_ptr(), null_mut()),
            ncclInvalidArgument,
            &["nId"],
        );
        if !no_gpu() {
            eprintln!("this host has a GPU: the no-CUDA errors were not checked");
            return;
        }
        expect(
            ncclCommInitRank(&mut comm, 1, id, 0),
            ncclSystemError,
            &["ncclCommInitRank", "no usable GPU"],
        );
        assert!(comm.is_null());
        expect(
            ncclCommInitRankScalable(&mut comm, 2, 0, 2, [id, id].as_mut_ptr(), null_mut()),
            ncclSystemError,
            &["ncclCommInitRankScalable", "no usable GPU"],
        );
        expect(
            ncclCommInitAll([null_mut(); 2].as_mut_ptr(), 2, null()),
            ncclSystemError,
            &["ncclCommInitAll", "no usable GPU"],
        );
        expect(
            ncclCommInitAll(&mut comm, 0, null()),
            ncclInvalidArgument,
            &["device count"],
        );
        // Inside a group the failed init also fails the group's end.
        assert_eq!(ncclGroupStart(), ncclSuccess);
        expect(
            ncclCommInitRank(&mut comm, 1, id, 0),
            ncclSystemError,
            &["no usable GPU"],
        );
        expect(
            ncclGroupEnd(),
            ncclSystemError,
            &["ncclCommInitRank", "no usable GPU"],
        );
        assert_eq!(depth(), 0);
        let mut p: *mut c_void = null_mut();
        expect(
            ncclMemAlloc(&mut p, 1024),
            ncclSystemError,
            &["ncclMemAlloc", "no usable GPU"],
        );
        expect(
            ncclMemFree(null_mut()),
            ncclInvalidArgument,
            &["ncclMemFree"],
        );
    }
}

#[test]
fn config_magic_version_and_ranges() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let id = unique_id();
    let mut comm: ncclComm_t = null_mut();
    let init = |cfg: &mut ncclConfig_t, comm: &mut ncclComm_t| {
        // SAFETY: a writable handle and a config of the header's size.
        unsafe { ncclCommInitRankConfig(comm, 1, id, 0, cfg) }
    };
    // Past the config checks, a host without a GPU stops at the device.
    let passes = if no_gpu() {
        ncclSystemError
    } else {
        ncclSuccess
    };
    let mut c = ncclConfig_t::INITIALIZER;
    c.magic = 0;
    expect(
        init(&mut c, &mut comm),
        ncclInvalidArgument,
        &["NCCL_CONFIG_INITIALIZER"],
    );
    for (field, set) in [
        (
            "blocking",
            (|c: &mut ncclConfig_t| c.blocking = 2) as fn(&mut ncclConfig_t),
        ),
        ("min/max CTAs", |c| (c.minCTAs, c.maxCTAs) = (8, 4)),
        ("CTAs", |c| c.minCTAs = 0),
        ("CTAPolicy", |c| c.CTAPolicy = 3),
        ("nChannelsPerNetPeer", |c| c.nChannelsPerNetPeer = 65),
        ("nvlinkCentricSched", |c| c.nvlinkCentricSched = -3),
        ("graphUsageMode", |c| c.graphUsageMode = 5),
        ("maxP2pPeers", |c| c.maxP2pPeers = -2),
    ] {
        let mut c = ncclConfig_t::INITIALIZER;
        set(&mut c);
        let r = init(&mut c, &mut comm);
        let word = field.split('/').next().unwrap();
        expect(r, ncclInvalidArgument, &[word]);
    }
    // A config from an older header: fields newer than its version are reset, not checked.
    let mut old = ncclConfig_t::INITIALIZER;
    old.version = nccl_version(2, 13, 0) as u32;
    old.blocking = 7;
    old.nChannelsPerNetPeer = 1000;
    let r = init(&mut old, &mut comm);
    assert_eq!(r, passes, "{}", last_error());
    // Only `size` bytes are read: garbage past a short config is ignored.
    let mut short = ncclConfig_t::INITIALIZER;
    short.size = 16;
    short.blocking = 42;
    let r = init(&mut short, &mut comm);
    assert_eq!(r, passes, "{}", last_error());
    // blocking = 0 is accepted (the init completes before returning).
    let mut nb = ncclConfig_t::INITIALIZER;
    nb.blocking = 0;
    let r = init(&mut nb, &mut comm);
    assert_eq!(r, passes, "{}", last_error());
    if r == ncclSuccess {
        // SAFETY: made just above.
        assert_eq!(unsafe { ncclCommDestroy(comm) }, ncclSuccess);
    }
}

/// A one-rank host communicator in a C handle.
fn host_comm() -> ncclComm_t {
    let c = rnccl::Communicator::init_all(1).unwrap().pop().unwrap();
    comm_from_rnccl(c)
}

#[test]
fn bad_arguments_on_a_live_communicator() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let comm = host_comm();
    let stream: cudaStream_t = null_mut();
    let buf = 0x1000 as *mut c_void;
    // SAFETY: `comm` is live until destroyed at the end; the buffers are never touched
    // because every call fails before launching (a host communicator has no GPU).
    unsafe {
        let (mut n, mut r) = (0, 0);
        assert_eq!(ncclCommCount(comm, &mut n), ncclSuccess);
        assert_eq!(ncclCommUserRank(comm, &mut r), ncclSuccess);
        assert_eq!((n, r), (1, 0));
        expect(
            ncclCommCount(comm, null_mut()),
            ncclInvalidArgument,
            &["count"],
        );
        expect(
            ncclCommCount(null_mut(), &mut n),
            ncclInvalidArgument,
            &["comm"],
        );
        let mut d = 0;
        expect(
            ncclCommCuDevice(comm, &mut d),
            ncclInvalidUsage,
            &["no GPU"],
        );
        let mut e = -1;
        assert_eq!(ncclCommGetAsyncError(comm, &mut e), ncclSuccess);
        assert_eq!(e, ncclSuccess);

        expect(
            ncclAllReduce(buf, buf, 4, 42, ncclSum, comm, stream),
            ncclInvalidArgument,
            &["ncclAllReduce", "data type 42"],
        );
        expect(
            ncclAllReduce(buf, buf, 4, ncclFloat, 17, comm, stream),
            ncclInvalidArgument,
            &["operation 17"],
        );
        expect(
            ncclBroadcast(buf, buf, 4, ncclFloat, 1, comm, stream),
            ncclInvalidArgument,
            &["ncclBroadcast", "root 1"],
        );
        expect(
            ncclReduce(buf, buf, 4, ncclFloat, ncclSum, -1, comm, stream),
            ncclInvalidArgument,
            &["root -1"],
        );
        expect(
            ncclSend(buf, 4, ncclFloat, 3, comm, stream),
            ncclInvalidArgument,
            &["peer 3"],
        );
        expect(
            ncclAllGather(buf, buf, 4, ncclFloat, null_mut(), stream),
            ncclInvalidArgument,
            &["ncclAllGather", "comm"],
        );
        // Good arguments reach rnccl, which refuses device buffers on a host communicator.
        expect(
            ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, stream),
            ncclInvalidUsage,
            &["GPU"],
        );

        // PreMulSum operations are per communicator and per data type.
        let mut op: ncclRedOp_t = -1;
        let scalar = 0.5f32;
        let sp = &scalar as *const f32 as *mut c_void;
        assert_eq!(
            ncclRedOpCreatePreMulSum(&mut op, sp, ncclFloat, ncclScalarHostImmediate, comm),
            ncclSuccess
        );
        assert_eq!(op, ncclNumOps);
        expect(
            ncclAllReduce(buf, buf, 4, ncclDouble, op, comm, stream),
            ncclInvalidArgument,
            &["created for"],
        );
        // A device scalar is only an address until a kernel reads it (perf/capi_scalar.c runs
        // one on GPUs).
        assert_eq!(
            ncclRedOpCreatePreMulSum(&mut op, sp, ncclFloat, ncclScalarDevice, comm),
            ncclSuccess
        );
        assert_eq!(op, ncclNumOps + 1);
        assert_eq!(ncclRedOpDestroy(ncclNumOps + 1, comm), ncclSuccess);
        expect(
            ncclRedOpCreatePreMulSum(&mut op, sp, ncclFloat, 7, comm),
            ncclInvalidArgument,
            &["residence 7"],
        );
        assert_eq!(ncclRedOpDestroy(ncclNumOps, comm), ncclSuccess);
        expect(
            ncclRedOpDestroy(ncclNumOps, comm),
            ncclInvalidArgument,
            &["not created"],
        );
        expect(
            ncclRedOpDestroy(ncclSum, comm),
            ncclInvalidArgument,
            &["built in"],
        );

        // Groups: an end without a start is misuse; a failed call fails its group's end.
        expect(ncclGroupEnd(), ncclInvalidUsage, &["not in a group"]);
        assert_eq!(ncclGroupStart(), ncclSuccess);
        assert_eq!(ncclGroupStart(), ncclSuccess);
        assert_eq!(depth(), 2);
        expect(
            ncclRecv(buf, 4, 99, 0, comm, stream),
            ncclInvalidArgument,
            &["data type 99"],
        );
        assert_eq!(ncclGroupEnd(), ncclSuccess);
        expect(ncclGroupEnd(), ncclInvalidArgument, &["data type 99"]);
        assert_eq!(depth(), 0);

        // Registration hands out a handle that only its communicator takes back.
        let mut h: *mut c_void = null_mut();
        assert_eq!(ncclCommRegister(comm, buf, 64, &mut h), ncclSuccess);
        assert!(!h.is_null());
        let other = host_comm();
        expect(
            ncclCommDeregister(other, h),
            ncclInvalidArgument,
            &["another communicator"],
        );
        assert_eq!(ncclCommDeregister(comm, h), ncclSuccess);
        assert_eq!(ncclCommDestroy(other), ncclSuccess);

        // Windows: a handle of their own kind, flags checked.
        let mut w: ncclWindow_t = null_mut();
        expect(
            ncclCommWindowRegister(comm, buf, 4096, &mut w, 4),
            ncclInvalidArgument,
            &["window flags 0x4", "NCCL_WIN_STRICT_ORDERING (2)"],
        );
        // NCCL_WIN_STRICT_ORDERING (nccl.h 2.30) is accepted.
        let mut so: ncclWindow_t = null_mut();
        assert_eq!(
            ncclCommWindowRegister(comm, buf, 4096, &mut so, 2),
            ncclSuccess,
            "{}",
            last_error()
        );
        assert_eq!(ncclCommWindowDeregister(comm, so), ncclSuccess);
        assert_eq!(
            ncclCommWindowRegister(comm, buf, 4096, &mut w, 1),
            ncclSuccess
        );
        assert!(!w.is_null());
        let mut user: *mut c_void = null_mut();
        assert_eq!(ncclWinGetUserPtr(comm, w, &mut user), ncclSuccess);
        assert_eq!(user, buf);
        expect(
            ncclWinGetUserPtr(comm, w, null_mut()),
            ncclInvalidArgument,
            &["outUserPtr"],
        );
        let mut h: *mut c_void = null_mut();
        assert_eq!(ncclCommRegister(comm, buf, 64, &mut h), ncclSuccess);
        expect(
            ncclWinGetUserPtr(comm, h.cast(), &mut user),
            ncclInvalidArgument,
            &["not a window"],
        );
        assert_eq!(ncclCommDeregister(comm, h), ncclSuccess);
        expect(
            ncclCommDeregister(comm, w.cast()),
            ncclInvalidArgument,
            &["came from ncclCommWindowRegister"],
        );
        assert_eq!(ncclCommWindowDeregister(comm, w), ncclSuccess);

        // Functions rnccl does not implement yet say so.
        expect(
            ncclDevCommCreate(comm, null(), null_mut()),
            ncclInvalidUsage,
            &["ncclDevCommCreate"],
        );
        expect(
            ncclDevCommDestroy(comm, null()),
            ncclInvalidUsage,
            &["ncclDevCommDestroy"],
        );
        let mut child: ncclComm_t;
        let mut sim = ncclSimInfo_t {
            size: size_of::<ncclSimInfo_t>(),
            magic: 0x7468_5283,
            version: NCCL_VERSION_CODE as u32,
            estimatedTime: -1.0,
        };
        expect(
            ncclGroupSimulateEnd(&mut sim),
            ncclInvalidUsage,
            &["ncclGroupSimulateEnd", "not in a group"],
        );
        let mut raw = sim;
        raw.magic = 0;
        expect(
            ncclGroupSimulateEnd(&mut raw),
            ncclInvalidArgument,
            &["NCCL_SIM_INFO_INITIALIZER"],
        );

        // Split with NOCOLOR gives NULL; a real color gives a one-rank child.
        child = 0x8 as ncclComm_t;
        assert_eq!(
            ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &mut child, null_mut()),
            ncclSuccess
        );
        assert!(child.is_null());
        assert_eq!(
            ncclCommSplit(comm, 3, 0, &mut child, null_mut()),
            ncclSuccess
        );
        assert_eq!(ncclCommCount(child, &mut n), ncclSuccess);
        assert_eq!(n, 1);
        assert_eq!(ncclCommDestroy(child), ncclSuccess);

        // After finalize only queries and destroy work.
        assert_eq!(ncclCommFinalize(comm), ncclSuccess);
        assert_eq!(ncclCommCount(comm, &mut n), ncclSuccess);
        expect(
            ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, stream),
            ncclInvalidUsage,
            &["finalized"],
        );
        assert_eq!(ncclCommDestroy(comm), ncclSuccess);

        // Abort frees a live communicator at once.
        let c = host_comm();
        assert_eq!(ncclCommAbort(c), ncclSuccess);
    }
}

/// `ncclGroupSimulateEnd` on a group of two ranks' all-reduces (one thread queues both): the
/// estimate is the tuning model's for one of them (the communicators run side by side), nothing
/// is launched (the buffers are not even memory), and the group is closed.
#[test]
fn group_simulation_estimates_without_launching() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let comms = rnccl::Communicator::init_all(2).unwrap();
    let args = rnccl::CollArgs {
        func: rnccl::Func::AllReduce,
        count: 1 << 20,
        dtype: rnccl::DataType::Float32,
        op: rnccl::RedOp::Sum,
        root: 0,
        in_place: false,
    };
    let want = comms[0].predicted_time_us(&args).unwrap();
    assert!(want > 0.0);
    let handles: Vec<ncclComm_t> = comms.into_iter().map(comm_from_rnccl).collect();
    let (send, recv) = (0x1000 as *const c_void, 0x2000_0000 as *mut c_void);
    let mut sim = ncclSimInfo_t {
        size: size_of::<ncclSimInfo_t>(),
        magic: 0x7468_5283,
        version: NCCL_VERSION_CODE as u32,
        estimatedTime: -1.0,
    };
    // SAFETY: live handles; the buffers are never touched (nothing is launched).
    unsafe {
        assert_eq!(ncclGroupStart(), ncclSuccess);
        for &c in &handles {
            let r = ncclAllReduce(send, recv, 1 << 20, ncclFloat, ncclSum, c, null_mut());
            assert_eq!(r, ncclSuccess, "{}", last_error());
        }
        assert_eq!(
            ncclGroupSimulateEnd(&mut sim),
            ncclSuccess,
            "{}",
            last_error()
        );
        assert_eq!(depth(), 0);
        for c in handles {
            assert_eq!(ncclCommDestroy(c), ncclSuccess);
        }
    }
    assert_eq!(sim.estimatedTime, want);
}

#[test]
fn unaligned_pointers_are_refused() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut v = [0u8; 8];
    let p = v.as_mut_ptr().wrapping_add(1) as *mut c_int;
    // SAFETY: refused before any write.
    let r = unsafe { ncclGetVersion(p) };
    expect(r, ncclInvalidArgument, &["aligned"]);
}
