//! The kernel's flag traffic on host atomics: waits with abort and timeout
//! (`wait_at_least`), the first-failure report (`report`), and the memory orders that stand
//! for the kernel's: `ld.acquire.sys` is an `Acquire` load, `__threadfence_system()` followed
//! by a volatile store is a `Release` store, a lone volatile access is `Relaxed`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::decode::Header;
use crate::device::cuda::abi::DevConn;

use crate::device::cuda::abi::Status;

/// Polls before the kernel looks at the abort flag and the clock (`wait_at_least`'s 1024).
const SPINS: u32 = 1024;

/// The `u64` at address `addr`.
///
/// # Safety
/// `addr` is 8-byte aligned, and the memory there lives as long as the program runs and is
/// accessed only atomically while it does.
pub(crate) unsafe fn word<'a>(addr: u64) -> &'a AtomicU64 {
    let p = std::ptr::with_exposed_provenance_mut::<u64>(addr as usize);
    // SAFETY: the caller's contract is `AtomicU64::from_ptr`'s.
    unsafe { AtomicU64::from_ptr(p) }
}

/// The `u32` at address `addr`.
///
/// # Safety
/// As [`word`], 4-byte aligned.
pub(crate) unsafe fn word32<'a>(addr: u64) -> &'a AtomicU32 {
    let p = std::ptr::with_exposed_provenance_mut::<u32>(addr as usize);
    // SAFETY: the caller's contract is `AtomicU32::from_ptr`'s.
    unsafe { AtomicU32::from_ptr(p) }
}

/// Spins until `*p >= want` (`wait_at_least`), as [`poll`] does, with `mark` (the waiting
/// end's live word 2) at 1 from the first round of polls that finds it short until the wait
/// ends.
///
/// # Safety
/// The header's `abort` is a live `u32` flag ([`word32`]'s contract).
pub(crate) unsafe fn wait_at_least(
    p: &AtomicU64,
    want: u64,
    h: &Header,
    mark: &AtomicU64,
) -> Result<(), Status> {
    let mut marked = false;
    let ready = || (p.load(Ordering::Acquire) >= want).then_some(());
    // SAFETY: forwarded caller contract.
    let r = unsafe {
        poll(h, ready, || {
            mark.store(1, Ordering::Relaxed);
            marked = true;
        })
    };
    if marked {
        mark.store(0, Ordering::Relaxed);
    }
    r
}

/// Polls `ready` until it returns a value: after every [`SPINS`] polls it gives up when the
/// abort flag is raised or when the time since its first such check passes the timeout (the
/// kernels' waits), and calls `waiting` at the first such check. Between polls it yields, as a
/// warp waiting on memory leaves the SM to others.
///
/// # Safety
/// The header's `abort` is a live `u32` flag ([`word32`]'s contract).
pub(crate) unsafe fn poll<T>(
    h: &Header,
    mut ready: impl FnMut() -> Option<T>,
    waiting: impl FnOnce(),
) -> Result<T, Status> {
    let mut waiting = Some(waiting);
    // SAFETY: forwarded caller contract.
    let abort = unsafe { word32(h.abort) };
    let mut start: Option<Instant> = None;
    let mut spins = 0u32;
    loop {
        if let Some(v) = ready() {
            return Ok(v);
        }
        std::thread::yield_now();
        spins += 1;
        if spins < SPINS {
            continue;
        }
        spins = 0;
        if abort.load(Ordering::Relaxed) != 0 {
            return Err(Status::Aborted);
        }
        let now = Instant::now();
        match start {
            None => {
                start = Some(now);
                if let Some(w) = waiting.take() {
                    w();
                }
            }
            Some(s) if now - s > Duration::from_nanos(h.timeout_ns) => {
                return Err(Status::Timeout);
            }
            Some(_) => {}
        }
    }
}

/// What a lane waited for when it failed (`Report::waiting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// A peer's data (a receive).
    Data = 1,
    /// A free slot (a send).
    Slot = 2,
}

/// Byte offsets of `struct Report`'s fields.
pub(crate) mod report_field {
    /// `u32 code`.
    pub(crate) const CODE: u64 = 0;
    /// `u32 lane`.
    pub(crate) const LANE: u64 = 4;
    /// `u32 peer`.
    pub(crate) const PEER: u64 = 8;
    /// `u32 channel`.
    pub(crate) const CHANNEL: u64 = 12;
    /// `u64 step`.
    pub(crate) const STEP: u64 = 16;
    /// `u64 waiting`.
    pub(crate) const WAITING: u64 = 24;
}

/// The kernel's `report`: the first failing lane of the program's communicator (the one that
/// takes the claim) fills the report, publishing `code` last; every failing lane raises the
/// abort flag.
///
/// # Safety
/// The header's `claim`, `abort` and `report` (a 32-byte `struct Report`, 8-byte aligned) are
/// live ([`word`]'s contract).
pub(crate) unsafe fn report(
    h: &Header,
    code: Status,
    lane: u32,
    c: &DevConn,
    step: u64,
    waiting: Waiting,
) {
    use report_field as f;
    // SAFETY: forwarded caller contract, for every field of the report.
    unsafe {
        let claim = word32(h.claim);
        if claim
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            word32(h.report + f::LANE).store(lane, Ordering::Relaxed);
            word32(h.report + f::PEER).store(c.peer, Ordering::Relaxed);
            word32(h.report + f::CHANNEL).store(u32::from(c.channel), Ordering::Relaxed);
            word(h.report + f::STEP).store(step, Ordering::Relaxed);
            word(h.report + f::WAITING).store(waiting as u64, Ordering::Relaxed);
            word32(h.report + f::CODE).store(code as u32, Ordering::Release);
        }
        word32(h.abort).store(1, Ordering::Release);
    }
}
