//! The hang report of a collective that timed out: the rank asks every rank of its
//! communicator's job for its status ([`super::job`]), says what is wrong with the
//! communicator ([`super::diagnose`]), and sends that to the NCCL_DEBUG log of every rank that
//! is not stuck in the same operation (those time out and report for themselves).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use super::client::{job, send_report};
use super::diagnosis::{RankState, diagnose};
use super::wire::StatusPeer;

/// How long each rank's status service gets to answer.
const ASK: Duration = Duration::from_secs(2);
/// Seconds in an operation that make a rank stuck (the reporting rank has been stuck for its
/// whole timeout).
const STUCK_AFTER_S: f64 = 1.0;
/// Reports sent at once.
const PARALLEL: usize = 64;

/// What is wrong with communicator `comm_id` whose ranks are `peers`, in one paragraph, after
/// sending `error` and it to the ranks not stuck with this one. `None` when the job's status
/// shows nothing more than the error says.
pub(crate) fn report(
    comm_id: u64,
    peers: &[StatusPeer],
    magic: u64,
    error: &str,
) -> Option<String> {
    let addrs: Vec<SocketAddr> = peers
        .iter()
        .filter_map(|p| p.status)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let status = job(&addrs, ASK);
    let d = diagnose(&status, STUCK_AFTER_S)
        .into_iter()
        .find(|d| d.comm_id == comm_id)?;
    let findings = d.findings(crate::stats::coarse_unix_ns());
    if findings.is_empty() {
        return None;
    }
    let text = findings.join("; ");
    let me = super::address();
    let stuck_seq = d.stuck.iter().map(|s| s.seq).max();
    let tell: BTreeSet<SocketAddr> = d
        .ranks
        .iter()
        .filter(|v| match &v.state {
            RankState::Answered(c) => c.op.as_ref().map(|o| o.seq) != stuck_seq,
            _ => false,
        })
        .filter_map(|v| v.peer.as_ref()?.status)
        .filter(|a| Some(*a) != me)
        .collect();
    let full = format!("{error}; job status: {text}");
    let tell: Vec<SocketAddr> = tell.into_iter().collect();
    for batch in tell.chunks(PARALLEL) {
        std::thread::scope(|s| {
            for &a in batch {
                let full = &full;
                s.spawn(move || send_report(a, magic, full, ASK));
            }
        });
    }
    Some(text)
}
