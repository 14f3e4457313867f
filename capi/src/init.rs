//! Creating communicators: `ncclGetUniqueId`, `ncclCommInitRank`, `ncclCommInitRankConfig`,
//! `ncclCommInitRankScalable`, `ncclCommInitAll`, deferred to `ncclGroupEnd` inside a group.

use std::ffi::c_int;
use std::sync::Arc;

use rnccl::{CommConfig, Communicator, UniqueId};

use crate::comm::*;
use crate::config::parse_config;
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// A communicator initialisation waiting for `ncclGroupEnd` (or run at once outside a group).
pub struct InitJob {
    /// The handle already given to the caller.
    pub handle: *const ncclComm,
    /// Number of ranks.
    pub nranks: usize,
    /// The rendezvous: one id, or `ncclCommInitRankScalable`'s several (see
    /// [`Communicator::init_rank_scalable`]).
    pub ids: Vec<UniqueId>,
    /// This rank.
    pub rank: usize,
    /// Knobs and device.
    pub config: CommConfig,
}

impl InitJob {
    /// Joins the communicator (blocks until every rank has).
    ///
    /// Errors: rnccl's init errors, as failures of `ncclCommInitRank`.
    pub fn run(&self) -> Result<Communicator, Failure> {
        Communicator::init_rank_scalable(self.nranks, &self.ids, self.rank, self.config.clone())
            .map_err(|e| Failure::from_error("ncclCommInitRank", &e))
    }
}

/// The common part of `ncclCommInitRank*`: checks the arguments, hands out the handle, and
/// initialises now (outside a group) or at `ncclGroupEnd`.
///
/// Non-blocking configs (`blocking = 0`) are honoured by completing the initialisation before
/// returning, which NCCL allows: the call returns `ncclSuccess` (never `ncclInProgress`) and
/// `ncclCommGetAsyncError` then reports `ncclSuccess`.
///
/// # Safety
/// As [`parse_config`]; `newcomm` must be NULL or writable.
pub(crate) unsafe fn init_rank(
    func: &str,
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    ids: &[ncclUniqueId],
    rank: c_int,
    config: *const ncclConfig_t,
) -> Result<(), Failure> {
    // SAFETY: forwarded from the caller.
    let r = unsafe { init_rank_now(func, newcomm, nranks, ids, rank, config) };
    if let Err(f) = &r {
        // Inside a group, the group's end fails too, as in NCCL.
        crate::group::note_failure(f);
    }
    r
}

/// [`init_rank`] without the group bookkeeping.
///
/// # Safety
/// As [`init_rank`].
pub(crate) unsafe fn init_rank_now(
    func: &str,
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    ids: &[ncclUniqueId],
    rank: c_int,
    config: *const ncclConfig_t,
) -> Result<(), Failure> {
    check_ptr(newcomm, func, "newcomm")?;
    if nranks < 1 || rank < 0 || rank >= nranks {
        return Err(Failure::arg(
            func,
            format!("invalid rank requested: {rank}/{nranks}"),
        ));
    }
    // SAFETY: forwarded from the caller.
    let parsed = unsafe { parse_config(config, func) }?;
    let ids = ids
        .iter()
        .map(|id| id_from_c(id, func))
        .collect::<Result<Vec<UniqueId>, Failure>>()?;
    let device = current_device(func)?;
    let job = InitJob {
        handle: std::ptr::null(),
        nranks: nranks as usize,
        ids,
        rank: rank as usize,
        config: CommConfig::with_knobs(Arc::new(parsed.knobs)).device(device),
    };
    let h = ncclComm::new(job.rank, job.nranks, Some(device), State::Initializing);
    if crate::group::depth() > 0 {
        let raw = h.into_raw();
        crate::group::defer_init(InitJob { handle: raw, ..job });
        // SAFETY: checked writable above.
        unsafe { newcomm.write(raw) };
        return Ok(());
    }
    let c = job.run()?;
    h.set_ready(c);
    // SAFETY: checked writable above.
    unsafe { newcomm.write(h.into_raw()) };
    Ok(())
}

/// `ncclGetUniqueId`: makes a new rendezvous id (this host's bootstrap root starts listening),
/// or the fixed id of `NCCL_COMM_ID` when that is set. Needs no GPU.
///
/// Returns `ncclInvalidArgument` for NULL; `ncclSystemError` when no socket can be opened.
///
/// # Safety
/// `uniqueId` must be NULL or point to a writable `ncclUniqueId`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetUniqueId(uniqueId: *mut ncclUniqueId) -> ncclResult_t {
    const F: &str = "ncclGetUniqueId";
    guard(F, || {
        check_ptr(uniqueId, F, "uniqueId")?;
        let id = UniqueId::new().map_err(|e| Failure::from_error(F, &e))?;
        let c = id_to_c(&id, F)?;
        // SAFETY: checked non-null and aligned; the caller passes writable memory.
        unsafe { uniqueId.write(c) };
        Ok(())
    })
}

/// `ncclCommInitRank`: joins communicator `commId` as `rank` of `nranks` on the calling
/// thread's current CUDA device. Blocks until every rank joined, unless called inside a group
/// (then `ncclGroupEnd` does it).
///
/// Returns `ncclSystemError` on a host without a usable GPU, `ncclInvalidArgument` for a bad
/// rank, a NULL `comm` or a foreign id.
///
/// # Safety
/// `comm` must be NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommInitRank";
    // SAFETY: forwarded from the caller; no config.
    guard(F, || unsafe {
        init_rank(
            F,
            comm,
            nranks,
            std::slice::from_ref(&commId),
            rank,
            std::ptr::null(),
        )
    })
}

/// `ncclCommInitRankConfig`: [`ncclCommInitRank`] with an `ncclConfig_t` (NULL for defaults);
/// the config's knob fields apply where the environment leaves them unset (NCCL lets the
/// environment override the config). `blocking = 0` is accepted and the initialisation
/// completes before the call returns `ncclSuccess`, which NCCL allows of a non-blocking
/// communicator; `ncclCommGetAsyncError` then reports `ncclSuccess` at once. `commName` and
/// `trafficClass` are checked but not used.
///
/// # Safety
/// `comm` as [`ncclCommInitRank`]; `config` as [`parse_config`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankConfig(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const F: &str = "ncclCommInitRankConfig";
    // SAFETY: forwarded from the caller.
    guard(F, || unsafe {
        init_rank(F, comm, nranks, std::slice::from_ref(&commId), rank, config)
    })
}

/// `ncclCommInitRankScalable`: initialisation from `nId` ids, the same on every rank. With one
/// id it is [`ncclCommInitRankConfig`]; with several, the rendezvous runs on the first and rank
/// 0 stops the others' roots ([`Communicator::init_rank_scalable`]): the same communicator,
/// without NCCL's spreading of the check-ins over several roots.
///
/// # Safety
/// `commIds` must point to `nId` readable ids; otherwise as [`ncclCommInitRankConfig`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankScalable(
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    myrank: c_int,
    nId: c_int,
    commIds: *mut ncclUniqueId,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const F: &str = "ncclCommInitRankScalable";
    guard(F, || {
        if nId <= 0 || nId > nranks {
            return Err(Failure::arg(
                F,
                format!("nId = {nId} must be in 1..=nranks ({nranks})"),
            ));
        }
        check_ptr(commIds, F, "commIds")?;
        // SAFETY: checked non-null and aligned; the caller passes nId (>= 1) readable ids.
        let ids = unsafe { std::slice::from_raw_parts(commIds, nId as usize) };
        // SAFETY: forwarded from the caller.
        unsafe { init_rank(F, newcomm, nranks, ids, myrank, config) }
    })
}

/// `ncclCommInitAll`: `ndev` communicators of this process, rank `i` on CUDA device
/// `devlist[i]` (devices `0..ndev` when `devlist` is NULL), written to `comm[0..ndev]`.
///
/// Returns `ncclSystemError` on a host without a usable GPU.
///
/// # Safety
/// `comm` must point to `ndev` writable handles; `devlist` NULL or `ndev` readable ints.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitAll(
    comm: *mut ncclComm_t,
    ndev: c_int,
    devlist: *const c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommInitAll";
    guard(F, || {
        check_ptr(comm, F, "comm")?;
        if ndev < 1 {
            return Err(Failure::arg(
                F,
                format!("invalid device count requested: {ndev}"),
            ));
        }
        let devs: Vec<usize> = if devlist.is_null() {
            (0..ndev as usize).collect()
        } else {
            check_ptr(devlist, F, "devlist")?;
            // SAFETY: the caller passes ndev readable ints.
            let l = unsafe { std::slice::from_raw_parts(devlist, ndev as usize) };
            l.iter()
                .map(|&d| {
                    usize::try_from(d)
                        .map_err(|_| Failure::arg(F, format!("invalid device {d} in devlist")))
                })
                .collect::<Result<_, _>>()?
        };
        rnccl::gpus().map_err(|e| Failure::no_gpu(F, &e))?;
        let comms = Communicator::init_all_devices(&devs, CommConfig::default())
            .map_err(|e| Failure::from_error(F, &e))?;
        for (i, c) in comms.into_iter().enumerate() {
            // SAFETY: i < ndev and the caller passes ndev writable handles.
            unsafe { comm.add(i).write(ncclComm::from_communicator(c).into_raw()) };
        }
        Ok(())
    })
}
