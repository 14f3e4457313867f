//! A GPU communicator's launcher thread. When one thread ends a group over several GPUs
//! (nccl-tests' and `rnccl bench`'s `-g N`, `ncclCommInitAll`), launching every GPU's kernels
//! from that thread costs the sum of their launch calls: 3.7 µs each on H200 with CUDA 13
//! (`perf/launch_floor.cu`), so 8 bytes on 4 GPUs took four of them. The driver runs launches to
//! different GPUs from different threads side by side — the same floor measured 5.05 µs per
//! iteration on 2 GPUs with a thread per GPU against 8.88 from one thread, 6.72 against 15.47 on
//! 4 — so [`run_beside`] hands each further GPU's launches to that GPU's launcher, runs the first
//! GPU's on the calling thread, and returns once all are done: the kernels are on their streams
//! when `ncclGroupEnd` returns, as before.
//!
//! A launcher runs one borrowed job at a time and its caller waits for it. After a job it spins
//! for the next one for [`SPIN`], then sleeps. Waking a sleeping thread costs tens of
//! microseconds on a virtual machine (its CPU has to be woken too), more than the launch it
//! would take over, so a group never waits for that: a job for a sleeping launcher runs on the
//! caller's thread, as it would without launchers, and the caller wakes the launcher for the
//! groups that follow. Back-to-back groups (a benchmark's loop, a training step's buckets) so
//! launch side by side from the second on; a lone group costs what it did, plus the wake-up.
//! Each communicator has its own launcher, started the first time one of its groups has
//! company. The launchers a group uses spin beside the thread that ends it, so a thread that
//! may run on `n` CPUs hands at most `n - 1` launches to them ([`spare_cpus`]): one pinned to a
//! single CPU launches everything itself, as launchers sharing its CPU would wait for it a
//! scheduler time slice at a time.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a launcher spins for its next job, and a caller for its job's end, before sleeping:
/// far longer than one launch (3.7 µs) and the gap between a loop's groups, short next to a
/// training step.
const SPIN: Duration = Duration::from_micros(500);

/// Nothing posted.
const IDLE: u8 = 0;
/// A caller claimed the launcher and is writing its job.
const CLAIMED: u8 = 4;
/// A job waits in [`Shared::job`] for the launcher.
const POSTED: u8 = 1;
/// The job ran ([`Shared::panicked`] says how it ended); the caller may read what it wrote.
const DONE: u8 = 2;
/// The launcher should leave.
const STOP: u8 = 3;
/// The launcher sleeps (parked) until a caller moves it to [`WAKING`] or [`STOP`].
const SLEEPING: u8 = 5;
/// A caller woke the launcher, which is not running yet: jobs run on their callers' threads.
const WAKING: u8 = 6;

/// A borrowed job with its lifetime erased: valid until its poster has seen [`DONE`].
type JobPtr = *mut (dyn FnMut() + Send + 'static);

/// What the caller and the launcher thread share.
struct Shared {
    state: AtomicU8,
    /// How long the launcher spins without a job before it sleeps ([`SPIN`]).
    spin: Duration,
    /// The posted job and the thread waiting for it. Written by the poster that claimed the
    /// launcher ([`CLAIMED`]), read by the launcher after it saw [`POSTED`]: never both at once.
    job: UnsafeCell<Option<(JobPtr, Thread)>>,
    /// Whether the last job panicked (read by the poster after [`DONE`]).
    panicked: UnsafeCell<bool>,
}

// SAFETY: `job` and `panicked` are only touched by one side at a time, handed over by the
// acquire/release transitions of `state` (IDLE→CLAIMED→POSTED by the one poster that won the
// claim, POSTED→DONE by the launcher, DONE→IDLE by that poster); the job pointer is `Send` by
// its type, and `Thread` is `Send + Sync`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer is only dereferenced by the launcher while its poster
// waits.
unsafe impl Send for Shared {}

/// One communicator's launcher thread (see the module's documentation).
pub(crate) struct Launcher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Launcher {
    /// Starts the launcher of GPU `gpu`'s communicator (the thread is named for it).
    ///
    /// Errors: [`Error::Internal`] when the system refuses another thread.
    pub(crate) fn start(gpu: usize) -> Result<Launcher> {
        Launcher::spinning(gpu, SPIN)
    }

    /// [`Launcher::start`] with `spin` for [`SPIN`].
    fn spinning(gpu: usize, spin: Duration) -> Result<Launcher> {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(IDLE),
            spin,
            job: UnsafeCell::new(None),
            panicked: UnsafeCell::new(false),
        });
        let s = shared.clone();
        let thread = thread::Builder::new()
            .name(format!("rnccl-launch-gpu{gpu}"))
            .spawn(move || serve(&s))
            .map_err(|e| {
                Error::Internal(format!("cannot start GPU {gpu}'s launcher thread: {e}"))
            })?;
        Ok(Launcher {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands `job` to the launcher if it is awake and idle; false (nothing posted) when it is
    /// asleep (it is woken for the next job) or holds another caller's job.
    ///
    /// # Safety
    /// When it returns true, `job` must stay valid and untouched until [`Launcher::finish`]
    /// returned.
    unsafe fn post(&self, job: &mut (dyn FnMut() + Send + '_)) -> bool {
        let state = &self.shared.state;
        match state.compare_exchange(IDLE, CLAIMED, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => {}
            Err(SLEEPING) => {
                if state
                    .compare_exchange(SLEEPING, WAKING, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                    && let Some(t) = &self.thread
                {
                    t.thread().unpark();
                }
                return false;
            }
            Err(_) => return false,
        }
        let ptr: *mut (dyn FnMut() + Send + '_) = job;
        // SAFETY: only the lifetime changes (same fat pointer layout); the caller keeps the job
        // alive until `finish` saw it done, and nothing dereferences the pointer after that.
        let ptr: JobPtr = unsafe { std::mem::transmute(ptr) };
        // SAFETY: this caller claimed the launcher (IDLE→CLAIMED above), so nobody else writes
        // `job`, and the launcher does not read it until it sees the POSTED stored below.
        unsafe { *self.shared.job.get() = Some((ptr, thread::current())) };
        state.store(POSTED, Ordering::Release);
        true
    }

    /// Waits until the posted job ran; false when it panicked.
    fn finish(&self) -> bool {
        let t0 = Instant::now();
        while self.shared.state.load(Ordering::Acquire) != DONE {
            if t0.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                // The launcher unparks this thread once the job is done.
                thread::park_timeout(Duration::from_millis(1));
            }
        }
        // SAFETY: DONE (acquired above) hands `panicked` back to this side.
        let ok = !unsafe { *self.shared.panicked.get() };
        self.shared.state.store(IDLE, Ordering::Release);
        ok
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        self.shared.state.store(STOP, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The launcher thread: runs each posted job, says it is done, and wakes its poster; sleeps
/// after [`SPIN`] without a job.
fn serve(s: &Shared) {
    loop {
        let mut t0 = Instant::now();
        loop {
            match s.state.load(Ordering::Acquire) {
                POSTED => break,
                STOP => return,
                IDLE if t0.elapsed() >= s.spin => {
                    if s.state
                        .compare_exchange(IDLE, SLEEPING, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                    {
                        // Unparked by a caller (SLEEPING→WAKING) or by Drop (STOP).
                        while s.state.load(Ordering::Acquire) == SLEEPING {
                            thread::park();
                        }
                        let _ = s.state.compare_exchange(
                            WAKING,
                            IDLE,
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        );
                        t0 = Instant::now();
                    }
                }
                _ => std::hint::spin_loop(),
            }
        }
        // SAFETY: POSTED (acquired above) hands `job` to this side until DONE is stored.
        let Some((job, poster)) = (unsafe { (*s.job.get()).take() }) else {
            continue;
        };
        // SAFETY: the poster keeps the job alive and untouched until it sees DONE
        // (`Launcher::post`'s contract, kept by `run_beside`).
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { (*job)() }));
        // SAFETY: the poster reads `panicked` only after DONE, stored below.
        unsafe { *s.panicked.get() = ran.is_err() };
        s.state.store(DONE, Ordering::Release);
        poster.unpark();
    }
}

/// How many launchers this thread may keep busy beside itself: one fewer than the CPUs it may
/// run on, read once per thread (a benchmark pins its threads before their first group).
pub(crate) fn spare_cpus() -> usize {
    thread_local! {
        static SPARE: usize = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .map(|set| {
                (0..nix::sched::CpuSet::count())
                    .filter(|&c| set.is_set(c).unwrap_or(false))
                    .count()
            })
            .unwrap_or(1)
            .saturating_sub(1);
    }
    SPARE.with(|s| *s)
}

/// Runs each job on its launcher and `here` on this thread, all at the same time (a job whose
/// launcher sleeps or is busy with another caller's runs here, after `here`); returns `here`'s result
/// once every job has finished (also when `here` or a job panics), with, for each job, whether
/// it finished without panicking.
pub(crate) fn run_beside<R>(
    jobs: &mut [(&Launcher, &mut (dyn FnMut() + Send + '_))],
    here: impl FnOnce() -> R,
) -> (R, Vec<bool>) {
    /// Waits for every posted job, also while unwinding, so no job outlives its borrows.
    struct Posted<'l>(Vec<Option<&'l Launcher>>);
    impl Drop for Posted<'_> {
        fn drop(&mut self) {
            for l in self.0.iter_mut().filter_map(Option::take) {
                l.finish();
            }
        }
    }
    let mut posted = Posted(Vec::with_capacity(jobs.len()));
    for (l, job) in jobs.iter_mut() {
        // SAFETY: `posted` waits for a posted job before this function returns or unwinds,
        // and the job's borrow outlives this function.
        let took = unsafe { l.post(&mut **job) };
        posted.0.push(took.then_some(*l));
    }
    let r = here();
    let taken: Vec<bool> = posted.0.iter().map(Option::is_some).collect();
    let mut ok: Vec<bool> = posted
        .0
        .iter_mut()
        .map(|l| l.take().is_none_or(Launcher::finish))
        .collect();
    // Every posted job has finished: the ones no launcher took run here.
    for (((_, job), taken), ok) in jobs.iter_mut().zip(taken).zip(&mut ok) {
        if !taken {
            *ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut **job)).is_ok();
        }
    }
    (r, ok)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    use super::*;

    /// A launcher that stays awake through a test on a loaded machine.
    fn awake(gpu: usize) -> Result<Launcher> {
        Launcher::spinning(gpu, Duration::from_secs(60))
    }

    fn name() -> String {
        thread::current().name().unwrap_or("").to_string()
    }

    /// Runs a job through `l` until it ran on the launcher's thread (a sleeping launcher leaves
    /// the first ones to the caller and wakes), for at most 20 s (a loaded 2-core machine runs
    /// these tests' threads in turn).
    fn until_on_launcher(l: &Launcher, gpu: usize) {
        let t0 = Instant::now();
        let mut who = String::new();
        while who != format!("rnccl-launch-gpu{gpu}") {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the launcher never took a job"
            );
            let mut job = || who = name();
            assert_eq!(run_beside(&mut [(l, &mut job)], || ()).1, [true]);
            thread::yield_now();
        }
    }

    #[test]
    fn jobs_run_on_their_launchers_beside_the_caller() {
        let (a, b) = (awake(1).unwrap(), awake(2).unwrap());
        // All three inside at once, each waiting (at most 10 s) for the others: one thread each.
        let inside = AtomicUsize::new(0);
        let meet = || {
            inside.fetch_add(1, Ordering::AcqRel);
            let t0 = Instant::now();
            while inside.load(Ordering::Acquire) < 3 && t0.elapsed() < Duration::from_secs(10) {
                thread::yield_now();
            }
            (name(), inside.load(Ordering::Acquire) == 3)
        };
        let (mut na, mut nb) = ((String::new(), false), (String::new(), false));
        let mut ja = || na = meet();
        let mut jb = || nb = meet();
        let mut jobs: [(&Launcher, &mut (dyn FnMut() + Send)); 2] = [(&a, &mut ja), (&b, &mut jb)];
        let (here, ok) = run_beside(&mut jobs, meet);
        assert_eq!(ok, [true, true]);
        assert_eq!(
            (na.0.as_str(), nb.0.as_str()),
            ("rnccl-launch-gpu1", "rnccl-launch-gpu2")
        );
        assert!(
            na.1 && nb.1 && here.1,
            "the jobs did not run at the same time"
        );
        assert_eq!(here.0, name());
    }

    #[test]
    fn a_sleeping_launcher_leaves_the_job_to_the_caller_and_wakes() {
        let l = Launcher::start(0).unwrap();
        for _ in 0..3 {
            // Without jobs the launcher falls asleep after its spin.
            let t0 = Instant::now();
            while l.shared.state.load(Ordering::Acquire) != SLEEPING {
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "the launcher never slept"
                );
                thread::sleep(SPIN);
            }
            let mut who = String::new();
            let mut job = || who = name();
            assert_eq!(run_beside(&mut [(&l, &mut job)], || ()).1, [true]);
            assert_eq!(who, name(), "a sleeping launcher took a job");
            // Woken by that call: it takes the next jobs.
            until_on_launcher(&l, 0);
        }
    }

    #[test]
    fn a_thread_pinned_to_one_cpu_spares_none() {
        use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
        use nix::unistd::Pid;
        let mine = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| mine.is_set(c).unwrap_or(false))
            .collect();
        let first = cpus[0];
        let spare = thread::spawn(move || {
            let mut one = CpuSet::new();
            one.set(first).unwrap();
            sched_setaffinity(Pid::from_raw(0), &one).unwrap();
            spare_cpus()
        });
        assert_eq!(spare.join().unwrap(), 0);
        assert_eq!(thread::spawn(spare_cpus).join().unwrap(), cpus.len() - 1);
    }

    #[test]
    fn a_panicking_job_is_reported_and_the_launcher_goes_on() {
        let l = awake(0).unwrap();
        let mut bad = || panic!("a job that fails");
        let ((), ok) = run_beside(&mut [(&l, &mut bad)], || ());
        assert_eq!(ok, [false]);
        until_on_launcher(&l, 0);
        let mut bad = || panic!("a job that fails");
        let ((), ok) = run_beside(&mut [(&l, &mut bad)], || ());
        assert_eq!(ok, [false]);
        until_on_launcher(&l, 0);
    }

    #[test]
    fn a_busy_launcher_leaves_the_job_to_the_caller() {
        let l = awake(0).unwrap();
        let (started, release) = (AtomicBool::new(false), AtomicBool::new(false));
        thread::scope(|s| {
            s.spawn(|| {
                loop {
                    let mut slow = || {
                        if name() == "rnccl-launch-gpu0" {
                            started.store(true, Ordering::Release);
                            while !release.load(Ordering::Acquire) {
                                thread::sleep(Duration::from_millis(1));
                            }
                        }
                    };
                    run_beside(&mut [(&l, &mut slow)], || ());
                    if started.load(Ordering::Acquire) {
                        break;
                    }
                }
            });
            while !started.load(Ordering::Acquire) {
                thread::yield_now();
            }
            let mut who = String::new();
            let mut job = || who = name();
            let ((), ok) = run_beside(&mut [(&l, &mut job)], || ());
            release.store(true, Ordering::Release);
            assert_eq!(ok, [true]);
            assert_eq!(who, name());
        });
    }

    #[test]
    fn a_panic_here_still_waits_for_the_jobs() {
        let l = awake(0).unwrap();
        for _ in 0..100 {
            until_on_launcher(&l, 0);
            let done = Mutex::new(false);
            let mut job = || {
                thread::sleep(Duration::from_millis(20));
                *done.lock().unwrap() = true;
            };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_beside(&mut [(&l, &mut job)], || {
                    panic!("the caller's own launch failed")
                })
            }));
            assert!(r.is_err());
            if *done.lock().unwrap() {
                return;
            }
            // Not done: either the launcher fell asleep and never took it (it then never
            // runs: try again), or run_beside returned while it ran.
            thread::sleep(Duration::from_millis(50));
            assert!(!*done.lock().unwrap(), "returned before the job ended");
        }
        panic!("the launcher never took the job");
    }
}
