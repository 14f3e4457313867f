//! [`TransportError`]: how a connection failed, naming the peer.

/// A connection failure. `peer` is the peer as messages name it ("rank 3 (host b, pid 812)").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TransportError {
    /// The peer closed its end while this end still had data to move.
    #[error("{peer} closed the connection {when} (it exited or aborted)")]
    Closed {
        /// The peer.
        peer: String,
        /// When: "while this rank was sending", "in the middle of a slot".
        when: &'static str,
    },
    /// A system call on the connection failed.
    #[error("{action} {peer}: {message}")]
    Io {
        /// The peer.
        peer: String,
        /// What this end was doing ("sending to", "receiving from").
        action: &'static str,
        /// The OS error kind.
        kind: std::io::ErrorKind,
        /// The OS error, in words.
        message: String,
    },
    /// The peer's host stopped answering on the connection (`ETIMEDOUT` after
    /// [`crate::bootstrap::silence::detect_silence`]'s probes).
    #[error(
        "the TCP link to {peer} at {addr} went silent: its host acknowledged nothing within \
         RNCCL_SILENT_LINK while this rank was {action} it; the host is down, or the network \
         between is cut or so congested that nothing got through"
    )]
    Silent {
        /// The peer.
        peer: String,
        /// The peer's address on the link.
        addr: String,
        /// What this end was doing ("sending to", "receiving from").
        action: &'static str,
    },
    /// A work request on an RDMA connection failed (or a verb did): the peer exited, the path
    /// or GID is wrong, or the fabric dropped it.
    #[error("{detail} ({peer}, over {port})")]
    Fabric {
        /// The peer.
        peer: String,
        /// The local port (`mlx5_0:1`).
        port: String,
        /// What failed and why, in words.
        detail: String,
    },
    /// The peer said goodbye after an abort (or a failure of its own).
    #[error(
        "{peer} aborted its communicator (it said so on the connection); see that rank's own error for why"
    )]
    Aborted {
        /// The peer.
        peer: String,
    },
    /// The peer sent something that does not follow the protocol.
    #[error("malformed frame from {peer}: {detail}")]
    Malformed {
        /// The peer.
        peer: String,
        /// What was wrong.
        detail: String,
    },
}

impl TransportError {
    /// The error for `e` on a TCP link with `peer` at `addr`: [`TransportError::Silent`] for a
    /// timed-out link, else [`TransportError::Io`].
    pub(crate) fn tcp(
        action: &'static str,
        peer: &str,
        addr: &str,
        e: &std::io::Error,
    ) -> TransportError {
        if e.kind() == std::io::ErrorKind::TimedOut {
            return TransportError::Silent {
                peer: peer.to_string(),
                addr: addr.to_string(),
                action,
            };
        }
        TransportError::io(action, peer, e)
    }

    /// An [`TransportError::Io`] from an I/O error.
    pub(crate) fn io(action: &'static str, peer: &str, e: &std::io::Error) -> TransportError {
        TransportError::Io {
            peer: peer.to_string(),
            action,
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}
