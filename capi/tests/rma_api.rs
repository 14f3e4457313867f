//! The one-sided calls (`ncclPutSignal`, `ncclSignal`, `ncclWaitSignal`) through their C
//! entry points, on hosts without a GPU: every argument check NCCL 2.30 makes (context, signal
//! index and flags 0, peers in range, a window of this communicator, descriptors), the refusal
//! on a communicator without a GPU, and a group that carries the refusal to `ncclGroupEnd`.
//! Puts that move bytes run on the device machine (perf/capi_rma.cu).

mod common;

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use common::expect;
use nccl::comm::*;
use nccl::group::*;
use nccl::lifecycle::*;
use nccl::register::*;
use nccl::rma::*;
use nccl::types::*;

/// Two host communicators of one job (ranks 0 and 1), as C handles.
fn two_host_comms() -> Vec<ncclComm_t> {
    rnccl::Communicator::init_all(2)
        .unwrap()
        .into_iter()
        .map(comm_from_rnccl)
        .collect()
}

fn desc(count: i32, peer: i32, sig_idx: i32, ctx: i32) -> ncclWaitSignalDesc_t {
    ncclWaitSignalDesc_t {
        opCnt: count,
        peer,
        sigIdx: sig_idx,
        ctx,
    }
}

#[test]
fn arguments_are_checked_as_nccl_does() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let comms = two_host_comms();
    let c = comms[0];
    let buf = 0x1000 as *const c_void;
    let s: cudaStream_t = null_mut();
    // SAFETY: live handles; every call fails before anything touches the buffers.
    unsafe {
        let mut win: ncclWindow_t = null_mut();
        assert_eq!(
            ncclCommWindowRegister(c, 0x2000 as *mut c_void, 4096, &mut win, 1),
            ncclSuccess
        );
        let put = |count, dt, peer, w, off, sig, ctx, flags, comm| {
            ncclPutSignal(buf, count, dt, peer, w, off, sig, ctx, flags, comm, s)
        };
        expect(
            put(4, ncclFloat, 1, win, 0, 0, 0, 0, null_mut()),
            ncclInvalidArgument,
            &["ncclPutSignal", "comm"],
        );
        expect(
            put(4, ncclFloat, 1, win, 0, 0, 1, 0, c),
            ncclInvalidArgument,
            &["ncclPutSignal", "ctx 1"],
        );
        expect(
            put(4, ncclFloat, 1, win, 0, 2, 0, 0, c),
            ncclInvalidArgument,
            &["sigIdx 2"],
        );
        expect(
            put(4, ncclFloat, 1, win, 0, 0, 0, 8, c),
            ncclInvalidArgument,
            &["flags 8"],
        );
        expect(
            put(4, ncclFloat, 2, win, 0, 0, 0, 0, c),
            ncclInvalidArgument,
            &["peer 2", "0..1"],
        );
        expect(
            put(4, ncclFloat, -1, win, 0, 0, 0, 0, c),
            ncclInvalidArgument,
            &["peer -1"],
        );
        expect(
            put(4, 99, 1, win, 0, 0, 0, 0, c),
            ncclInvalidArgument,
            &["data type 99"],
        );
        expect(
            put(4, ncclFloat, 1, null_mut(), 0, 0, 0, 0, c),
            ncclInvalidArgument,
            &["win"],
        );
        // A window of the other communicator.
        expect(
            put(4, ncclFloat, 0, win, 0, 0, 0, 0, comms[1]),
            ncclInvalidArgument,
            &["another communicator"],
        );
        expect(
            ncclPutSignal(null(), 4, ncclFloat, 1, win, 0, 0, 0, 0, c, s),
            ncclInvalidArgument,
            &["localbuff is NULL"],
        );
        expect(
            ncclSignal(1, 0, 3, 0, c, s),
            ncclInvalidArgument,
            &["ncclSignal", "ctx 3"],
        );
        expect(
            ncclSignal(5, 0, 0, 0, c, s),
            ncclInvalidArgument,
            &["ncclSignal", "peer 5"],
        );
        let mut d = [desc(1, 1, 0, 0), desc(0, 1, 0, 0)];
        expect(
            ncclWaitSignal(2, d.as_mut_ptr(), c, s),
            ncclInvalidArgument,
            &["descriptor 1", "opCnt 0"],
        );
        d[1] = desc(1, 7, 0, 0);
        expect(
            ncclWaitSignal(2, d.as_mut_ptr(), c, s),
            ncclInvalidArgument,
            &["descriptor 1", "peer 7"],
        );
        d[1] = desc(1, 1, 1, 0);
        expect(
            ncclWaitSignal(2, d.as_mut_ptr(), c, s),
            ncclInvalidArgument,
            &["descriptor 1", "sigIdx 1"],
        );
        expect(
            ncclWaitSignal(0, d.as_mut_ptr(), c, s),
            ncclInvalidArgument,
            &["nDesc 0"],
        );
        expect(
            ncclWaitSignal(1, null_mut(), c, s),
            ncclInvalidArgument,
            &["signalDescs"],
        );
        assert_eq!(ncclCommWindowDeregister(c, win), ncclSuccess);
        for c in comms {
            assert_eq!(ncclCommDestroy(c), ncclSuccess);
        }
    }
}

#[test]
fn host_communicators_refuse_one_sided_operations() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let comms = two_host_comms();
    let c = comms[0];
    let s: cudaStream_t = null_mut();
    // SAFETY: live handles; nothing is launched on a communicator without a GPU.
    unsafe {
        expect(
            ncclSignal(1, 0, 0, 0, c, s),
            ncclInvalidUsage,
            &["ncclSignal", "on a GPU"],
        );
        let mut d = [desc(2, 1, 0, 0)];
        expect(
            ncclWaitSignal(1, d.as_mut_ptr(), c, s),
            ncclInvalidUsage,
            &["ncclWaitSignal", "on a GPU"],
        );
        // A window of a host communicator is recorded, not exchanged: puts into it are refused.
        let mut win: ncclWindow_t = null_mut();
        assert_eq!(
            ncclCommWindowRegister(c, 0x2000 as *mut c_void, 4096, &mut win, 0),
            ncclSuccess
        );
        expect(
            ncclPutSignal(
                0x1000 as *const c_void,
                1,
                ncclInt8,
                1,
                win,
                0,
                0,
                0,
                0,
                c,
                s,
            ),
            ncclInvalidUsage,
            &["ncclPutSignal", "communicator with a GPU"],
        );
        // Inside a group the refusal comes from ncclGroupEnd, which runs the queued operations.
        assert_eq!(ncclGroupStart(), ncclSuccess);
        assert_eq!(ncclSignal(1, 0, 0, 0, c, s), ncclSuccess);
        expect(
            ncclGroupEnd(),
            ncclInvalidUsage,
            &["ncclGroupEnd", "on a GPU"],
        );
        assert_eq!(ncclCommWindowDeregister(c, win), ncclSuccess);
        for c in comms {
            assert_eq!(ncclCommDestroy(c), ncclSuccess);
        }
    }
}

/// `NCCL_NUM_RMA_CTX=0` (what `ncclConfig_t.numRmaCtx = 0` sets) turns one-sided operations off,
/// as in NCCL 2.30: they are refused, naming the knob, before anything else is looked at.
#[test]
fn numrmactx_zero_turns_one_sided_operations_off() {
    use rnccl::config::{Config, Source};
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut knobs = Config::defaults();
    knobs.set(
        "NCCL_NUM_RMA_CTX",
        "0",
        Source::Program("ncclConfig_t.numRmaCtx".into()),
    );
    let config = rnccl::CommConfig::with_knobs(std::sync::Arc::new(knobs));
    let comms: Vec<_> = rnccl::Communicator::init_all_with(2, config)
        .unwrap()
        .into_iter()
        .map(comm_from_rnccl)
        .collect();
    let s: cudaStream_t = null_mut();
    // SAFETY: live handles; the call is refused before anything is launched.
    unsafe {
        expect(
            ncclSignal(1, 0, 0, 0, comms[0], s),
            ncclInvalidUsage,
            &["ncclSignal", "NCCL_NUM_RMA_CTX", "is 0"],
        );
        for c in comms {
            assert_eq!(ncclCommDestroy(c), ncclSuccess);
        }
    }
}
