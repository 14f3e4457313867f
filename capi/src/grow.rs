//! Growing a communicator (NCCL 2.30): `ncclCommGetUniqueId` makes the id an existing rank
//! hands to the new ranks, `ncclCommGrow` joins old and new ranks in a larger communicator.

use std::ffi::c_int;

use crate::comm::*;
use crate::config::parse_config;
use crate::errors::{Failure, check_ptr, guard};
use crate::init::init_rank;
use crate::types::*;

/// `ncclCommGetUniqueId`: the unique id for growing `comm` (its rendezvous root starts in this
/// process). One at a time: a second call before a grow used the first fails.
///
/// Errors: `ncclInvalidArgument` for NULL arguments; `ncclInvalidUsage` while an earlier id is
/// unused or the communicator is not ready; `ncclSystemError` when no socket can be opened.
///
/// # Safety
/// `comm` as [`handle`]; `uniqueId` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetUniqueId(
    comm: ncclComm_t,
    uniqueId: *mut ncclUniqueId,
) -> ncclResult_t {
    const F: &str = "ncclCommGetUniqueId";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(uniqueId, F, "uniqueId")?;
        let id = h.with_ready(F, |c| c.grow_id().map_err(|e| Failure::from_error(F, &e)))?;
        let out = id_to_c(&id, F)?;
        // SAFETY: checked writable.
        unsafe { uniqueId.write(out) };
        Ok(())
    })
}

/// `ncclCommGrow`: makes a communicator of `nRanks` ranks from `comm`'s ranks and new ones.
/// Existing ranks pass `comm` and `rank = -1`; the one that made the id with
/// `ncclCommGetUniqueId` passes it, the others NULL; they keep their ranks. New ranks pass
/// `comm = NULL`, the id and their rank (from `comm`'s size up), and join as
/// `ncclCommInitRankConfig` does (inside a group, at `ncclGroupEnd`). The grown communicator of
/// an existing rank keeps its parent's knobs (`config` is checked; NULL inherits).
///
/// Errors: `ncclInvalidArgument` for a NULL `newcomm`, a new rank without an id or with a rank
/// out of range, an existing rank with `rank != -1`, `nRanks` not above the current size, or an
/// id not made on this rank; `ncclInvalidUsage` when no existing rank, or several, passed the
/// id; the rendezvous' errors (a rank that never arrives is named at the timeout).
///
/// # Safety
/// `comm` NULL or as [`handle`]; `uniqueId` NULL or readable; `newcomm` writable; `config` as
/// [`parse_config`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGrow(
    comm: ncclComm_t,
    nRanks: c_int,
    uniqueId: *const ncclUniqueId,
    rank: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const F: &str = "ncclCommGrow";
    guard(F, || {
        check_ptr(newcomm, F, "newcomm")?;
        // SAFETY: NULL or readable, as the caller promises.
        let id = unsafe { uniqueId.as_ref() };
        if comm.is_null() {
            let id = id.ok_or_else(|| {
                Failure::arg(F, "a new rank (comm = NULL) needs the grow's unique id")
            })?;
            // SAFETY: forwarded from the caller.
            return unsafe {
                init_rank(F, newcomm, nRanks, std::slice::from_ref(id), rank, config)
            };
        }
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if rank != -1 {
            return Err(Failure::arg(
                F,
                format!("an existing rank passes rank = -1 (it keeps its rank), not {rank}"),
            ));
        }
        let nranks = usize::try_from(nRanks)
            .map_err(|_| Failure::arg(F, format!("nRanks {nRanks} is negative")))?;
        let id = id.map(|i| id_from_c(i, F)).transpose()?;
        // SAFETY: forwarded from the caller.
        unsafe { parse_config(config, F) }?;
        let grown = h.with_ready(F, |c| {
            c.grow(nranks, id.as_ref())
                .map_err(|e| Failure::from_error(F, &e))
        })?;
        let raw = ncclComm::from_communicator(grown).into_raw();
        // SAFETY: checked writable.
        unsafe { newcomm.write(raw) };
        Ok(())
    })
}
