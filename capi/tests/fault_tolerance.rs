//! NCCL 2.27-2.30's fault-tolerance calls through the C ABI (`ncclCommRevoke`,
//! `ncclCommShrink`, `ncclCommGetUniqueId`, `ncclCommGrow`) and the ending calls' NULL rule,
//! on host communicators of thread ranks wrapped in handles (collectives through the C ABI need
//! GPUs: the device machine's C test runs those; `tests/fault_tolerance.rs` runs the library's
//! collectives after each change).

mod common;

use common::{expect, last_error};

use std::ffi::c_int;
use std::ptr::{null, null_mut};

use nccl::comm::*;
use nccl::grow::*;
use nccl::init::*;
use nccl::lifecycle::*;
use nccl::query::*;
use nccl::suspend::*;
use nccl::types::*;

/// A handle that may cross to a rank's thread.
struct Comm(ncclComm_t);
// SAFETY: an rnccl handle is a heap object whose communicator sits behind a mutex; NCCL's
// rule (one thread drives a communicator at a time) is kept by each test.
unsafe impl Send for Comm {}

/// `n` host communicators of thread ranks, in handles.
fn host_comms(n: usize) -> Vec<Comm> {
    rnccl::Communicator::init_all(n)
        .unwrap()
        .into_iter()
        .map(|c| Comm(comm_from_rnccl(c)))
        .collect()
}

/// Rank and size of a handle.
fn rank_of(c: ncclComm_t) -> (c_int, c_int) {
    let (mut r, mut n) = (-1, -1);
    // SAFETY: a live handle and writable ints.
    unsafe {
        assert_eq!(ncclCommUserRank(c, &mut r), ncclSuccess);
        assert_eq!(ncclCommCount(c, &mut n), ncclSuccess);
    }
    (r, n)
}

#[test]
fn ending_calls_take_null_as_nothing_to_do() {
    // SAFETY: NULL is what is tested.
    unsafe {
        assert_eq!(ncclCommAbort(null_mut()), ncclSuccess);
        assert_eq!(ncclCommDestroy(null_mut()), ncclSuccess);
        assert_eq!(ncclCommFinalize(null_mut()), ncclSuccess);
        assert_eq!(ncclCommRevoke(null_mut(), 0), ncclSuccess);
    }
}

/// Ranks 0-2 of four shrink rank 3 out (rank 3 never calls): the children are ranks 0-2 of 3;
/// then, with NCCL_SHRINK_ABORT, ranks 0 and 2 of the child shrink rank 1 out.
#[test]
fn shrink_makes_children_of_the_ranks_that_stay() {
    let comms = host_comms(4);
    let threads: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || {
                let c = c;
                let (rank, _) = rank_of(c.0);
                if rank == 3 {
                    // SAFETY: a live handle, given back.
                    assert_eq!(unsafe { ncclCommDestroy(c.0) }, ncclSuccess);
                    return None;
                }
                let mut child: ncclComm_t = null_mut();
                let mut list = [3 as c_int];
                // SAFETY: a live handle, a readable list, a writable handle, NULL config.
                let r =
                    unsafe { ncclCommShrink(c.0, list.as_mut_ptr(), 1, &mut child, null_mut(), 0) };
                assert_eq!(r, ncclSuccess, "{}", last_error());
                let first = rank_of(child);
                let mut second = None;
                if first.0 != 1 {
                    let mut grandchild: ncclComm_t = null_mut();
                    let mut list = [1 as c_int];
                    // SAFETY: as above.
                    let r = unsafe {
                        ncclCommShrink(
                            child,
                            list.as_mut_ptr(),
                            1,
                            &mut grandchild,
                            null_mut(),
                            NCCL_SHRINK_ABORT,
                        )
                    };
                    assert_eq!(r, ncclSuccess, "{}", last_error());
                    second = Some(rank_of(grandchild));
                    // SAFETY: live handles, given back.
                    assert_eq!(unsafe { ncclCommDestroy(grandchild) }, ncclSuccess);
                }
                // SAFETY: live handles, given back.
                unsafe {
                    assert_eq!(ncclCommDestroy(child), ncclSuccess);
                    assert_eq!(ncclCommDestroy(c.0), ncclSuccess);
                }
                Some((first, second))
            })
        })
        .collect();
    let got: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        got,
        vec![
            Some(((0, 3), Some((0, 2)))),
            Some(((1, 3), None)),
            Some(((2, 3), Some((1, 2)))),
            None
        ]
    );
}

#[test]
fn shrink_revoke_and_grow_refuse_bad_arguments() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let c = host_comms(1).pop().unwrap().0;
    let mut child: ncclComm_t = null_mut();
    let mut list = [0 as c_int, 5];
    let mut id = ncclUniqueId {
        internal: [0; NCCL_UNIQUE_ID_BYTES],
    };
    // SAFETY: a live handle throughout; NULL and bad values where refusal is tested.
    unsafe {
        expect(
            ncclCommShrink(c, list.as_mut_ptr(), 1, &mut child, null_mut(), 2),
            ncclInvalidArgument,
            &["shrink flags 0x2"],
        );
        expect(
            ncclCommShrink(c, null_mut(), 1, &mut child, null_mut(), 0),
            ncclInvalidArgument,
            &["excludeRanksList"],
        );
        expect(
            ncclCommShrink(c, list.as_mut_ptr(), -1, &mut child, null_mut(), 0),
            ncclInvalidArgument,
            &["negative"],
        );
        expect(
            ncclCommShrink(c, list.as_mut_ptr(), 1, &mut child, null_mut(), 0),
            ncclInvalidArgument,
            &["excluded ranks do not call shrink"],
        );
        expect(
            ncclCommShrink(c, list.as_mut_ptr().add(1), 1, &mut child, null_mut(), 0),
            ncclInvalidArgument,
            &["rank 5", "outside"],
        );
        expect(
            ncclCommShrink(c, list.as_mut_ptr(), 0, null_mut(), null_mut(), 0),
            ncclInvalidArgument,
            &["newcomm"],
        );

        // Grow: one id at a time; an existing rank keeps its rank (-1); a new rank needs an id.
        assert_eq!(
            ncclCommGetUniqueId(c, &mut id),
            ncclSuccess,
            "{}",
            last_error()
        );
        expect(
            ncclCommGetUniqueId(c, &mut id),
            ncclInvalidUsage,
            &["was not used yet"],
        );
        expect(
            ncclCommGetUniqueId(c, null_mut()),
            ncclInvalidArgument,
            &["uniqueId"],
        );
        expect(
            ncclCommGrow(c, 2, &id, 0, &mut child, null_mut()),
            ncclInvalidArgument,
            &["rank = -1"],
        );
        expect(
            ncclCommGrow(c, 1, &id, -1, &mut child, null_mut()),
            ncclInvalidArgument,
            &["more than the current 1 ranks"],
        );
        expect(
            ncclCommGrow(null_mut(), 2, null(), 1, &mut child, null_mut()),
            ncclInvalidArgument,
            &["needs the grow's unique id"],
        );
        let mut other = id;
        assert_eq!(ncclGetUniqueId(&mut other), ncclSuccess);
        expect(
            ncclCommGrow(c, 2, &other, -1, &mut child, null_mut()),
            ncclInvalidArgument,
            &["was not made by ncclCommGetUniqueId"],
        );

        // Revoke: flags checked, once only; a revoked communicator refuses finalize, still
        // shrinks (to itself here) and is destroyed.
        expect(
            ncclCommRevoke(c, 1),
            ncclInvalidArgument,
            &["revoke flags 0x1"],
        );
        assert_eq!(
            ncclCommRevoke(c, NCCL_REVOKE_DEFAULT),
            ncclSuccess,
            "{}",
            last_error()
        );
        expect(
            ncclCommRevoke(c, 0),
            ncclInvalidArgument,
            &["already revoked"],
        );
        expect(ncclCommFinalize(c), ncclInvalidUsage, &["revoked"]);
        assert_eq!(
            ncclCommShrink(c, list.as_mut_ptr(), 0, &mut child, null_mut(), 0),
            ncclSuccess,
            "{}",
            last_error()
        );
        assert_eq!(rank_of(child), (0, 1));
        assert_eq!(ncclCommDestroy(child), ncclSuccess);
        assert_eq!(ncclCommDestroy(c), ncclSuccess);
    }
}

/// Two existing ranks grow by a third: rank 0 makes the id; the new rank joins through the
/// C ABI (comm = NULL), which needs a GPU here, so on a host without one it is refused with
/// `ncclSystemError` and the existing ranks' grow is exercised through the library's
/// newcomer instead.
#[test]
fn existing_ranks_grow_with_the_id_of_one_of_them() {
    let comms = host_comms(2);
    let mut id = ncclUniqueId {
        internal: [0; NCCL_UNIQUE_ID_BYTES],
    };
    // SAFETY: a live handle and a writable id.
    let r = unsafe { ncclCommGetUniqueId(comms[0].0, &mut id) };
    assert_eq!(r, ncclSuccess);
    let text: String = id
        .internal
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as u8 as char)
        .collect();
    if rnccl::gpus().is_err() {
        let mut c: ncclComm_t = null_mut();
        // SAFETY: a readable id and a writable handle.
        let r = unsafe { ncclCommGrow(null_mut(), 3, &id, 2, &mut c, null_mut()) };
        assert_eq!(r, ncclSystemError, "{}", last_error());
    }
    let newcomer = std::thread::spawn(move || {
        let id: rnccl::UniqueId = text.parse().unwrap();
        let c = rnccl::Communicator::init_rank(3, &id, 2, rnccl::CommConfig::default()).unwrap();
        (c.rank(), c.nranks())
    });
    let olds: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || {
                let c = c;
                let mine = (rank_of(c.0).0 == 0).then_some(id);
                let mut grown: ncclComm_t = null_mut();
                // SAFETY: a live handle, the id or NULL, a writable handle.
                let r = unsafe {
                    ncclCommGrow(
                        c.0,
                        3,
                        mine.as_ref().map_or(null(), |i| i),
                        -1,
                        &mut grown,
                        null_mut(),
                    )
                };
                assert_eq!(r, ncclSuccess, "{}", last_error());
                let got = rank_of(grown);
                // SAFETY: live handles, given back.
                unsafe {
                    assert_eq!(ncclCommDestroy(grown), ncclSuccess);
                    assert_eq!(ncclCommDestroy(c.0), ncclSuccess);
                }
                got
            })
        })
        .collect();
    let got: Vec<_> = olds.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(got, vec![(0, 3), (1, 3)]);
    assert_eq!(newcomer.join().unwrap(), (2, 3));
}

/// Suspension and memory statistics on a host communicator (it holds no GPU memory): flags
/// checked, suspend once, resume once; the statistics follow the state.
#[test]
fn suspend_resume_and_memory_statistics() {
    let _l = common::LAST_ERROR_LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let c = host_comms(1).pop().unwrap().0;
    let stat = |s: ncclCommMemStat_t| {
        let mut v = u64::MAX;
        // SAFETY: a live handle and a writable u64.
        let r = unsafe { ncclCommMemStats(c, s, &mut v) };
        assert_eq!(r, ncclSuccess, "{}", last_error());
        v
    };
    // SAFETY: a live handle throughout; bad values where refusal is tested.
    unsafe {
        for s in [
            ncclStatGpuMemSuspend,
            ncclStatGpuMemPersist,
            ncclStatGpuMemTotal,
            ncclStatGpuMemSuspended,
        ] {
            assert_eq!(stat(s), 0);
        }
        let mut v = 0u64;
        expect(
            ncclCommMemStats(c, 4, &mut v),
            ncclInvalidArgument,
            &["statistic 4"],
        );
        expect(
            ncclCommMemStats(c, 0, null_mut()),
            ncclInvalidArgument,
            &["value"],
        );
        expect(
            ncclCommSuspend(c, 2),
            ncclInvalidArgument,
            &["suspend flags 0x2"],
        );
        expect(ncclCommResume(c), ncclInvalidUsage, &["not suspended"]);
        assert_eq!(
            ncclCommSuspend(c, NCCL_SUSPEND_MEM),
            ncclSuccess,
            "{}",
            last_error()
        );
        assert_eq!(stat(ncclStatGpuMemSuspended), 1);
        expect(
            ncclCommSuspend(c, 0),
            ncclInvalidUsage,
            &["already suspended"],
        );
        assert_eq!(ncclCommResume(c), ncclSuccess, "{}", last_error());
        assert_eq!(stat(ncclStatGpuMemSuspended), 0);
        assert_eq!(ncclCommSuspend(c, 0), ncclSuccess);
        assert_eq!(stat(ncclStatGpuMemSuspended), 0);
        assert_eq!(ncclCommResume(c), ncclSuccess);
        assert_eq!(ncclCommDestroy(c), ncclSuccess);
    }
}
