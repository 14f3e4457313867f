//! Typed errors, modelled on NCCL's `ncclResult_t` (nccl.h; strings from `ncclGetErrorString`).
//!
//! Every variant carries a message that says what went wrong and what to do, and names the rank,
//! peer, channel, transport or knob involved. [`Error::code`] gives the NCCL result code so callers
//! that speak NCCL can map errors one to one.

use std::time::Duration;

/// NCCL's result codes (`ncclResult_t`, nccl.h), for callers that need the numeric value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultCode {
    /// `ncclSuccess` = 0.
    Success = 0,
    /// `ncclUnhandledCudaError` = 1.
    UnhandledCudaError = 1,
    /// `ncclSystemError` = 2: a system call failed.
    SystemError = 2,
    /// `ncclInternalError` = 3: a bug in rnccl.
    InternalError = 3,
    /// `ncclInvalidArgument` = 4: a bad argument to a call.
    InvalidArgument = 4,
    /// `ncclInvalidUsage` = 5: a bad sequence of calls or a bad configuration.
    InvalidUsage = 5,
    /// `ncclRemoteError` = 6: a peer exited or the network failed.
    RemoteError = 6,
    /// `ncclInProgress` = 7.
    InProgress = 7,
    /// `ncclTimeout` = 8.
    Timeout = 8,
}

/// The error type of the rnccl library. Non-exhaustive: later versions may add kinds (match
/// with a wildcard arm, or use [`Error::code`] for NCCL's result codes).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A call got an argument it cannot use (bad count, root, peer, buffer length, dtype name…).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The calls or the configuration do not fit together (bad knob value, group misuse…).
    #[error("invalid usage: {0}")]
    InvalidUsage(String),
    /// A system call failed; `context` says what rnccl was doing. The message includes the
    /// OS error (so it is not also reported as the error's `source`, which would print it twice).
    #[error("system error while {context}: {os_error}")]
    System {
        /// What rnccl was doing when the call failed.
        context: String,
        /// The OS error.
        os_error: std::io::Error,
    },
    /// A peer went away, sent something malformed, or the network broke.
    #[error("remote error: {0}")]
    Remote(String),
    /// A bounded wait ran out. `waited_for` names the ranks or peers that never answered.
    #[error("timeout after {:.1} s {what}; still waiting for {waited_for}", .after.as_secs_f64())]
    Timeout {
        /// What was being waited for (e.g. "in bootstrap", "in all_reduce on channel 1").
        what: String,
        /// The ranks or peers that did not answer, in words (e.g. "rank 3 (host b, pid 812)").
        waited_for: String,
        /// How long rnccl waited.
        after: Duration,
    },
    /// The communicator was aborted (by [`crate::comm::Communicator::abort`] or a failed peer).
    #[error("communicator aborted: {0}")]
    Aborted(String),
    /// A CUDA driver or NVRTC call failed (`ncclUnhandledCudaError`); the message names the call,
    /// the device and what to do.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// A bug in rnccl: please report it.
    #[error("internal error (please report this to the rnccl developers): {0}")]
    Internal(String),
}

impl Error {
    /// The NCCL result code this error maps to.
    pub fn code(&self) -> ResultCode {
        match self {
            Error::InvalidArgument(_) => ResultCode::InvalidArgument,
            Error::InvalidUsage(_) => ResultCode::InvalidUsage,
            Error::System { .. } => ResultCode::SystemError,
            Error::Remote(_) | Error::Aborted(_) => ResultCode::RemoteError,
            Error::Timeout { .. } => ResultCode::Timeout,
            Error::Internal(_) => ResultCode::InternalError,
            Error::Cuda(_) => ResultCode::UnhandledCudaError,
        }
    }

    /// A [`Error::System`] from an I/O error and what rnccl was doing.
    pub fn system(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::System {
            context: context.into(),
            os_error: source,
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid_arg(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::InvalidUsage`].
    pub fn invalid_usage(msg: impl Into<String>) -> Error {
        Error::InvalidUsage(msg.into())
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
