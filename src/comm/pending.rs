//! [`Pending`]: a group that was enqueued (planned and connected) and runs when waited on.

use std::marker::PhantomData;

use crate::error::{Error, Result};
use crate::exec::host::Running;

/// Operations launched by [`super::Group::enqueue`], borrowing their buffers (`'a`) and their
/// communicators until [`Pending::wait`] returns. A group dropped before it is waited on is
/// abandoned: its communicators become unusable and their peers are told why, so nobody waits
/// for operations that will never run. Operations on GPU memory are already on their streams:
/// waiting does nothing for them.
#[must_use = "a pending group does nothing until it is waited on"]
pub struct Pending<'a> {
    running: Running<'a>,
    _buffers: PhantomData<&'a mut [u8]>,
}

impl<'a> Pending<'a> {
    pub(super) fn new(running: Running<'a>) -> Pending<'a> {
        Pending {
            running,
            _buffers: PhantomData,
        }
    }

    /// Runs every operation to completion (the wait half of `ncclGroupEnd`).
    ///
    /// Errors: the first failure of any operation ([`Error::Remote`], [`Error::Timeout`],
    /// [`Error::Aborted`]…), a timeout with what the job's status shows
    /// ([`crate::status`]); the communicators involved are unusable afterwards.
    pub fn wait(mut self) -> Result<()> {
        let result = self
            .running
            .run()
            .map_err(|e| match (&e, self.running.first_core()) {
                (Error::Timeout { .. }, Some(core)) => core.with_hang_report(e),
                _ => e,
            });
        if let Err(e) = &result {
            self.running.fail(e);
        }
        result
    }
}
