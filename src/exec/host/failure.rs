//! How an execution fails and what it waits for, in words: link failures, peers found gone,
//! timeouts naming each lane's wait.

use super::conns::Connections;
use super::execution::Execution;
use crate::conn::ConnKey;
use crate::error::Error;
use crate::transport::{PeerState, TransportError};

/// Where a lane is stuck, for timeout and failure messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blocked {
    /// The connection.
    pub key: ConnKey,
    /// True when waiting to receive, false when waiting for send slots.
    pub receiving: bool,
}

/// Why a connection failed during an execution.
#[derive(Debug)]
pub(crate) enum LinkCause {
    /// The transport failed.
    Transport(TransportError),
    /// The peer sent what the plan did not expect, or the plan itself is wrong.
    Protocol(Error),
}

/// A failure of one connection during execution.
#[derive(Debug)]
pub(crate) struct LinkFailure {
    /// The connection, when the failing step has one.
    pub key: Option<ConnKey>,
    /// What happened.
    pub cause: LinkCause,
}

impl LinkFailure {
    /// A transport failure on `key`.
    pub(crate) fn transport(key: ConnKey, e: TransportError) -> LinkFailure {
        LinkFailure {
            key: Some(key),
            cause: LinkCause::Transport(e),
        }
    }

    /// A protocol or plan error in a step using `key`.
    pub(crate) fn plan(key: Option<ConnKey>, e: Error) -> LinkFailure {
        LinkFailure {
            key,
            cause: LinkCause::Protocol(e),
        }
    }
}

/// The error for a failed link. `what` names the operation, `describe` a rank, and `notice`
/// gives what a peer reported when it gave up, appended as the root cause.
pub(super) fn link_error(
    what: &str,
    f: LinkFailure,
    describe: &dyn Fn(usize) -> String,
    notice: &dyn Fn(usize) -> Option<String>,
) -> Error {
    let message = match f.cause {
        LinkCause::Transport(e) => e.to_string(),
        LinkCause::Protocol(Error::Remote(m)) => m,
        LinkCause::Protocol(e) => {
            return match e {
                Error::Internal(m) => Error::Internal(format!("{what}: {m}")),
                other => other,
            };
        }
    };
    let Some(key) = f.key else {
        return Error::Internal(format!("{what}: {message}"));
    };
    Error::Remote(format!(
        "{what} failed on channel {} with {}: {message}{}",
        key.channel,
        describe(key.peer),
        reported(notice(key.peer))
    ))
}

fn reported(notice: Option<String>) -> String {
    notice
        .map(|n| format!("; first failure: {n}"))
        .unwrap_or_default()
}

/// A peer found gone or dead, as an error.
///
/// Errors: [`Error::Remote`] naming the peer, the channel and, when it left one, its notice.
pub(super) fn liveness(
    exec: &Execution,
    conns: &Connections,
    what: &dyn Fn() -> String,
    describe: &dyn Fn(usize) -> String,
    notice: &dyn Fn(usize) -> Option<String>,
) -> Result<(), Error> {
    match exec.dead_peer(conns) {
        Some((key, PeerState::Dead)) => Err(Error::Remote(format!(
            "{}: {} exited (process gone) while this rank waited on channel {}{}",
            what(),
            describe(key.peer),
            key.channel,
            reported(notice(key.peer))
        ))),
        Some((key, _)) => Err(Error::Remote(format!(
            "{}: {} went away (closed its connection or dropped its communicator) on channel {}{}",
            what(),
            describe(key.peer),
            key.channel,
            reported(notice(key.peer))
        ))),
        None => Ok(()),
    }
}

/// The timeout error for `exec`, naming what each lane waits for.
pub(super) fn timeout(
    exec: &Execution,
    what: &str,
    after: std::time::Duration,
    describe: &dyn Fn(usize) -> String,
) -> Error {
    let mut waits: Vec<String> = exec
        .blocked()
        .iter()
        .map(|b| {
            format!(
                "{} {} on channel {}",
                if b.receiving {
                    "data from"
                } else {
                    "send space to"
                },
                describe(b.key.peer),
                b.key.channel
            )
        })
        .collect();
    waits.dedup();
    Error::Timeout {
        what: what.to_string(),
        waited_for: waits.join("; "),
        after,
    }
}
