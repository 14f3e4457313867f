//! A rank's check-in with the bootstrap root: its [`PeerInfo`] in, every rank's back (or the
//! root's refusal, or the list of ranks that never arrived).

use std::time::Duration;

use super::root::{CheckIn, RootReply, ToRoot, name_ranks};
use super::unique_id::UniqueId;
use super::wire::{FrameError, HelloKind, read_hello, write_hello};
use super::{Deadline, PeerInfo, Retry, connect_retry};
use crate::error::{Error, Result};

/// Checks in with the root of `id` and waits for every rank's info.
///
/// Errors: [`Error::Timeout`] when the root is unreachable or ranks never arrived (named);
/// [`Error::InvalidUsage`] when the root refused this rank; [`Error::Remote`] when the root
/// failed.
pub(super) fn check_in(
    id: &UniqueId,
    rank: usize,
    nranks: usize,
    info: PeerInfo,
    retry: Retry,
    deadline: Deadline,
) -> Result<Vec<PeerInfo>> {
    let root_what = if id.root_by_rank0 {
        "the bootstrap root (run by rank 0)".to_string()
    } else {
        "the bootstrap root".to_string()
    };
    let mut s = connect_retry(id.root, &root_what, retry, deadline).map_err(|e| match e {
        Error::Remote(m) => Error::Timeout {
            what: format!("reaching the bootstrap root ({m}); check that rank 0 is running and that the unique id / NCCL_COMM_ID / MASTER_ADDR:MASTER_PORT is right"),
            waited_for: "the bootstrap root".into(),
            after: deadline.timeout,
        },
        other => other,
    })?;
    let checkin = ToRoot::CheckIn(Box::new(CheckIn {
        rank: rank as u32,
        nranks: nranks as u32,
        info,
        job: id.job.clone(),
    }));
    write_hello(&mut s, id.magic, HelloKind::RootCheckIn, &checkin).map_err(|e| {
        Error::Remote(format!(
            "checking in with the bootstrap root at {}: {e}",
            id.root
        ))
    })?;
    // The root sends the missing-rank list at its own deadline; wait a little longer for it.
    s.set_read_timeout(Some(deadline.remaining() + Duration::from_secs(5)))
        .ok();
    let reply: RootReply = read_hello(&mut s, id.magic, HelloKind::RootReply, usize::MAX >> 1)
        .map_err(|e| match e {
            FrameError::Io(ref io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Error::Timeout {
                    what: "in bootstrap waiting for the root's peer table".into(),
                    waited_for: "the bootstrap root (it stopped answering)".into(),
                    after: deadline.timeout,
                }
            }
            other => Error::Remote(format!("the bootstrap root at {} failed: {other}", id.root)),
        })?;
    match reply {
        RootReply::Peers(p) if p.len() == nranks => Ok(p),
        RootReply::Peers(p) => Err(Error::Internal(format!(
            "root sent {} peers for nranks={nranks}",
            p.len()
        ))),
        RootReply::Refused(why) => Err(Error::invalid_usage(format!(
            "the rendezvous failed: {why}"
        ))),
        RootReply::Failed(why) => Err(Error::Remote(format!("the rendezvous failed: {why}"))),
        RootReply::Missing {
            missing,
            joined,
            nranks,
            waited_s,
        } => Err(Error::Timeout {
            what: format!("in bootstrap: {joined} of {nranks} ranks joined"),
            waited_for: format!("{} (never arrived)", name_ranks(&missing)),
            after: Duration::from_secs_f64(waited_s),
        }),
    }
}
