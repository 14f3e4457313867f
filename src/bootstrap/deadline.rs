//! [`Deadline`]: the bound every bootstrap wait carries.

use std::time::{Duration, Instant};

/// How long to keep retrying and how long to wait: every bootstrap wait has this deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    /// When the wait gives up.
    pub at: Instant,
    /// The configured timeout (for messages).
    pub timeout: Duration,
}

impl Deadline {
    /// A deadline `timeout` from now.
    pub(crate) fn after(timeout: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + timeout,
            timeout,
        }
    }

    /// Time left (zero once passed).
    pub(crate) fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// True once the deadline has passed.
    pub(crate) fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}
