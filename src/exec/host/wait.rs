//! Waiting without burning the CPU others need: spin briefly (the fastest hand-off when each
//! rank has a core), then yield, then sleep in growing steps; check peers' liveness now and then
//! and give up at the timeout.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How a rank waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitPolicy {
    /// Idle polls spent spinning before yielding (0 when ranks outnumber cores).
    pub spins: u32,
    /// Idle time after which the waiter sleeps between polls.
    pub yield_for: Duration,
    /// Stall after which the wait fails.
    pub timeout: Duration,
}

impl WaitPolicy {
    /// The policy for a rank sharing the host with `local_ranks` ranks on `cores` cores.
    pub(crate) fn new(local_ranks: usize, cores: usize, timeout: Duration) -> WaitPolicy {
        let spins = if local_ranks <= cores { 20_000 } else { 0 };
        WaitPolicy {
            spins,
            yield_for: Duration::from_millis(5),
            timeout,
        }
    }
}

/// How many CPUs this host's ranks may spin on, for [`WaitPolicy::new`]: the CPUs this process
/// may run on, except that a process pinned to a single CPU (`rnccl bench --bind core`,
/// `mpirun --bind-to core`, `srun --cpu-bind=cores`) was given that CPU as its own, so it counts
/// every online CPU.
pub(crate) fn spin_cores() -> usize {
    let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
    if allowed > 1 {
        return allowed;
    }
    nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map_or(1, |n| n.max(1) as usize)
}

/// Tracks one stall.
#[derive(Debug)]
pub(super) struct Waiter {
    policy: WaitPolicy,
    idle: u32,
    since: Option<Instant>,
    next_check: Option<Instant>,
}

impl Waiter {
    /// A waiter with `policy`.
    pub(super) fn new(policy: WaitPolicy) -> Waiter {
        Waiter {
            policy,
            idle: 0,
            since: None,
            next_check: None,
        }
    }

    /// Something moved: the stall is over.
    #[inline]
    pub(super) fn reset(&mut self) {
        self.idle = 0;
        self.since = None;
        self.next_check = None;
    }

    /// Nothing moved: wait a little. `check` runs every 50 ms of stall (peer liveness);
    /// `on_timeout` builds the error once the stall reaches the timeout. Past the spin phase
    /// `block` may wait in the kernel for the awaited events (sockets becoming ready) for at
    /// most the duration it is given; it returns false when it has nothing to wait on, and the
    /// waiter then yields or sleeps instead. Blocking in `poll(2)` leaves the CPU to the network
    /// stack and wakes as soon as data moves.
    ///
    /// Errors: whatever `check` returns, or `on_timeout`'s error.
    #[inline]
    pub(super) fn idle_or_block(
        &mut self,
        check: impl FnOnce() -> Result<()>,
        on_timeout: impl FnOnce() -> Error,
        block: impl FnOnce(Duration) -> bool,
    ) -> Result<()> {
        self.idle = self.idle.saturating_add(1);
        if self.idle <= self.policy.spins {
            std::hint::spin_loop();
            return Ok(());
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        let stalled = now - since;
        match self.next_check {
            None => self.next_check = Some(now + Duration::from_millis(50)),
            Some(t) if now >= t => {
                self.next_check = Some(now + Duration::from_millis(50));
                check()?;
            }
            Some(_) => {}
        }
        if stalled >= self.policy.timeout {
            return Err(on_timeout());
        }
        if block(Duration::from_millis(1)) {
            return Ok(());
        }
        if stalled < self.policy.yield_for {
            std::thread::yield_now();
        } else {
            let nap = (stalled / 64).clamp(Duration::from_micros(50), Duration::from_millis(2));
            std::thread::sleep(nap);
        }
        Ok(())
    }
}

/// Waits until one of `fds` is ready for what it asks, or `limit` passes. Returns false (without
/// waiting) when `fds` is empty.
///
/// # Safety
/// Every descriptor in `fds` must stay open for the duration of the call.
pub(super) unsafe fn block_on(
    fds: &[(std::os::fd::RawFd, nix::poll::PollFlags)],
    limit: Duration,
) -> bool {
    use nix::poll::{PollFd, PollTimeout, poll};
    use std::os::fd::BorrowedFd;
    if fds.is_empty() {
        return false;
    }
    let mut pfds: Vec<PollFd> = fds
        .iter()
        // SAFETY: the caller keeps every descriptor open for the duration of the call.
        .map(|&(fd, f)| PollFd::new(unsafe { BorrowedFd::borrow_raw(fd) }, f))
        .collect();
    let ms = u16::try_from(limit.as_millis()).unwrap_or(u16::MAX).max(1);
    let _ = poll(&mut pfds, PollTimeout::from(ms));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_out_with_the_callers_error() {
        let mut w = Waiter::new(WaitPolicy {
            spins: 10,
            yield_for: Duration::from_millis(1),
            timeout: Duration::from_millis(30),
        });
        let start = Instant::now();
        let err = loop {
            if let Err(e) =
                w.idle_or_block(|| Ok(()), || Error::invalid_usage("stalled"), |_| false)
            {
                break e;
            }
        };
        assert!(err.to_string().contains("stalled"));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn liveness_check_fails_fast() {
        let mut w = Waiter::new(WaitPolicy {
            spins: 0,
            yield_for: Duration::from_millis(1),
            timeout: Duration::from_secs(60),
        });
        let mut calls = 0;
        let err = loop {
            calls += 1;
            if let Err(e) = w.idle_or_block(
                || {
                    if calls > 3 {
                        Err(Error::Remote("peer died".into()))
                    } else {
                        Ok(())
                    }
                },
                || Error::invalid_usage("t"),
                |_| false,
            ) {
                break e;
            }
        };
        assert!(err.to_string().contains("peer died"));
    }
}
