//! The steps a plan is made of (NCCL's `prims` vocabulary): each kind of step carries exactly the
//! buffer locations and connections it needs, so a plan cannot name a send without a
//! connection or a copy without a destination.

use crate::conn::ConnKey;

/// Which buffer a location refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Buf {
    /// The caller's send buffer.
    Input,
    /// The caller's receive buffer.
    Output,
    /// Plan-owned temporary memory.
    Scratch,
}

/// A byte offset into one of the buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    /// The buffer.
    pub buf: Buf,
    /// Byte offset.
    pub off: usize,
}

impl Loc {
    /// Offset `off` of the input buffer.
    pub(crate) fn input(off: usize) -> Loc {
        Loc {
            buf: Buf::Input,
            off,
        }
    }

    /// Offset `off` of the output buffer.
    pub(crate) fn output(off: usize) -> Loc {
        Loc {
            buf: Buf::Output,
            off,
        }
    }

    /// Offset `off` of the scratch buffer.
    pub(crate) fn scratch(off: usize) -> Loc {
        Loc {
            buf: Buf::Scratch,
            off,
        }
    }

    /// The location `by` bytes further on.
    pub(crate) fn at(self, by: usize) -> Loc {
        Loc {
            buf: self.buf,
            off: self.off + by,
        }
    }
}

/// What a step does, with its local locations (`src` read, `dst` written) and its connections
/// (`to` sent on, `from` received on). `⊕` is the operation's combine; `pre` and `post` are the
/// step's [`Step::pre`] and [`Step::post`] transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `dst = post(pre(src))`, no communication.
    Copy {
        /// Read.
        src: Loc,
        /// Written.
        dst: Loc,
    },
    /// Send `pre(src)`.
    Send {
        /// Read.
        src: Loc,
        /// Sent on.
        to: ConnKey,
    },
    /// Copy `pre(src)` to `dst` (unless equal) and send it.
    CopySend {
        /// Read.
        src: Loc,
        /// Written.
        dst: Loc,
        /// Sent on.
        to: ConnKey,
    },
    /// Receive into `dst`.
    Recv {
        /// Written.
        dst: Loc,
        /// Received on.
        from: ConnKey,
    },
    /// Receive into `dst` and forward the same bytes.
    RecvCopySend {
        /// Written.
        dst: Loc,
        /// Received on.
        from: ConnKey,
        /// Sent on.
        to: ConnKey,
    },
    /// Send `recv ⊕ pre(src)`.
    RecvReduceSend {
        /// Read.
        src: Loc,
        /// Received on.
        from: ConnKey,
        /// Sent on.
        to: ConnKey,
    },
    /// `dst = post(recv ⊕ pre(src))`.
    RecvReduceCopy {
        /// Read.
        src: Loc,
        /// Written.
        dst: Loc,
        /// Received on.
        from: ConnKey,
    },
    /// `dst = post(recv ⊕ pre(src))` and send it.
    RecvReduceCopySend {
        /// Read.
        src: Loc,
        /// Written.
        dst: Loc,
        /// Received on.
        from: ConnKey,
        /// Sent on.
        to: ConnKey,
    },
    /// Send `buf`, receive the peer's, `buf = buf ⊕ recv` (recursive doubling): one connection
    /// key names both directions with the peer.
    Exchange {
        /// Read, then combined in place.
        buf: Loc,
        /// The connection with the partner, both ways.
        with: ConnKey,
    },
}

/// One step of a lane: an [`Op`] over `bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// What to do, where and with whom.
    pub op: Op,
    /// Bytes moved.
    pub bytes: usize,
    /// Apply the operation's pre-multiplier to the local source.
    pub pre: bool,
    /// Apply the operation's post-divisor to the result.
    pub post: bool,
}

impl Step {
    /// A step with no transforms.
    pub(crate) fn new(op: Op, bytes: usize) -> Step {
        Step {
            op,
            bytes,
            pre: false,
            post: false,
        }
    }

    /// The same step applying `pre` and `post`.
    pub(crate) fn transforms(self, pre: bool, post: bool) -> Step {
        Step { pre, post, ..self }
    }

    /// The connection this step sends on, if any.
    pub(crate) fn send_key(&self) -> Option<ConnKey> {
        match self.op {
            Op::Send { to, .. }
            | Op::CopySend { to, .. }
            | Op::RecvCopySend { to, .. }
            | Op::RecvReduceSend { to, .. }
            | Op::RecvReduceCopySend { to, .. } => Some(to),
            Op::Exchange { with, .. } => Some(with),
            Op::Copy { .. } | Op::Recv { .. } | Op::RecvReduceCopy { .. } => None,
        }
    }

    /// The connection this step receives on, if any.
    pub(crate) fn recv_key(&self) -> Option<ConnKey> {
        match self.op {
            Op::Recv { from, .. }
            | Op::RecvCopySend { from, .. }
            | Op::RecvReduceSend { from, .. }
            | Op::RecvReduceCopy { from, .. }
            | Op::RecvReduceCopySend { from, .. } => Some(from),
            Op::Exchange { with, .. } => Some(with),
            Op::Copy { .. } | Op::Send { .. } | Op::CopySend { .. } => None,
        }
    }
}

/// What a lane serialises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum LaneKey {
    /// A collective channel.
    Channel(u16),
    /// Point-to-point sends to a peer.
    SendTo(usize),
    /// Point-to-point receives from a peer.
    RecvFrom(usize),
    /// Local copies.
    Local,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_op() {
        let (a, b) = (ConnKey::collective(1, 0), ConnKey::collective(2, 0));
        let s = Step::new(
            Op::RecvReduceCopySend {
                src: Loc::input(0),
                dst: Loc::output(0),
                from: a,
                to: b,
            },
            64,
        );
        assert_eq!((s.recv_key(), s.send_key()), (Some(a), Some(b)));
        let x = Step::new(
            Op::Exchange {
                buf: Loc::output(0),
                with: a,
            },
            8,
        );
        assert_eq!((x.recv_key(), x.send_key()), (Some(a), Some(a)));
        let c = Step::new(
            Op::Copy {
                src: Loc::input(0),
                dst: Loc::output(8),
            },
            8,
        );
        assert_eq!((c.recv_key(), c.send_key()), (None, None));
        assert_eq!(Loc::output(8).at(8), Loc::output(16));
    }
}
