//! Group calls (`ncclGroupStart`/`ncclGroupEnd`), per thread as in NCCL: a nesting depth and
//! the operations and communicator initialisations queued since the outermost start. Outside a
//! group each call is a group of its own.

use std::cell::RefCell;

use rnccl::{CollArgs, Communicator};

use crate::comm::{State, ncclComm, not_ready};
use crate::errors::{Failure, guard};
use crate::init::InitJob;
use crate::register::{WindowJob, run_windows};
use crate::types::*;

/// One operation waiting for the group's end.
pub struct Queued {
    /// The communicator (a live handle: NCCL forbids destroying it inside a group).
    pub comm: *const ncclComm,
    /// The operation.
    pub work: Work,
    /// The CUDA stream.
    pub stream: cudaStream_t,
}

/// What a queued operation does.
pub enum Work {
    /// A collective or Send/Recv.
    Coll {
        /// The operation.
        args: CollArgs,
        /// Send buffer, a device address (0 for in-place operations and Recv).
        send: u64,
        /// Receive buffer, a device address (the one buffer of an in-place operation).
        recv: u64,
    },
    /// A one-sided operation (`ncclPutSignal`, `ncclSignal`, `ncclWaitSignal`).
    OneSided(crate::rma::OneSided),
}

#[derive(Default)]
struct GroupState {
    depth: usize,
    ops: Vec<Queued>,
    inits: Vec<InitJob>,
    /// Window registrations, exchanged after the initialisations.
    windows: Vec<WindowJob>,
    /// The first failure of a call inside the group; `ncclGroupEnd` returns it.
    error: Option<Failure>,
}

thread_local! {
    static GROUP: RefCell<GroupState> = RefCell::new(GroupState::default());
}

/// How deeply the calling thread is nested in `ncclGroupStart`s.
pub fn depth() -> usize {
    GROUP.with(|g| g.borrow().depth)
}

/// Queues a communicator initialisation for the group's end.
pub fn defer_init(job: InitJob) {
    GROUP.with(|g| g.borrow_mut().inits.push(job));
}

/// Queues a window registration for the group's end.
pub fn defer_window(job: WindowJob) {
    GROUP.with(|g| g.borrow_mut().windows.push(job));
}

/// Records a call's failure inside a group, for `ncclGroupEnd` to return.
pub fn note_failure(f: &Failure) {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 && g.error.is_none() {
            g.error = Some(f.clone());
        }
    });
}

/// Queues `op` inside a group, or runs it at once outside one.
///
/// Errors: outside a group, as [`run_ops`].
pub fn submit(op: Queued, func: &str) -> Result<(), Failure> {
    let op = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 {
            g.ops.push(op);
            None
        } else {
            Some(op)
        }
    });
    match op {
        Some(op) => run_ops(vec![op], func),
        None => Ok(()),
    }
}

/// Launches `ops` in order: every communicator involved is locked (in address order, so two
/// threads cannot deadlock), collectives and Send/Recv are pushed as device operations of one
/// rnccl group, which ends (enqueueing them on their streams) before each one-sided operation
/// runs, so every stream gets its operations in call order.
///
/// Errors: `ncclInvalidUsage` for a communicator that is not ready; rnccl's launch errors.
pub fn run_ops(ops: Vec<Queued>, func: &str) -> Result<(), Failure> {
    if ops.is_empty() {
        return Ok(());
    }
    let mut comms: Vec<*const ncclComm> = ops.iter().map(|o| o.comm).collect();
    comms.sort();
    comms.dedup();
    // SAFETY: every queued handle was checked live when queued, and NCCL's rules forbid
    // destroying a communicator with operations pending in a group.
    let states: Vec<_> = comms.iter().map(|&c| unsafe { &*c }.state()).collect();
    let mut ready: Vec<&Communicator> = Vec::with_capacity(states.len());
    for s in &states {
        match &**s {
            State::Ready(c) => ready.push(c),
            other => return Err(not_ready(func, other)),
        }
    }
    let mut group = rnccl::group_start();
    for op in &ops {
        let i = comms.binary_search(&op.comm).unwrap_or_default();
        let c = ready[i];
        match &op.work {
            &Work::Coll { args, send, recv } => {
                // SAFETY: the caller of the nccl.h function promised device buffers valid for
                // the operation on the communicator's GPU and a live stream of it, until the
                // stream has run the operation.
                unsafe { group.push_device(c, args, send, recv, op.stream.cast()) }
                    .map(|_| ())
                    .map_err(|e| Failure::from_error(func, &e))?
            }
            Work::OneSided(o) => {
                std::mem::replace(&mut group, rnccl::group_start())
                    .end()
                    .map_err(|e| Failure::from_error(func, &e))?;
                // SAFETY: as above, for the one-sided operation's buffers, window and stream.
                unsafe { o.run(c, op.stream, func) }?;
            }
        }
    }
    group.end().map_err(|e| Failure::from_error(func, &e))
}

/// Runs queued initialisations: one in the calling thread, several on one thread each (every
/// rank's init blocks until all ranks arrived, so a thread initialising several GPUs' ranks
/// needs them to run together).
fn run_inits(inits: Vec<InitJob>) -> Option<Failure> {
    let results: Vec<Result<Communicator, Failure>> = if inits.len() == 1 {
        vec![inits[0].run()]
    } else {
        let jobs: Vec<_> = inits
            .iter()
            .map(|j| (j.nranks, j.ids.clone(), j.rank, j.config.clone()))
            .collect();
        std::thread::scope(|s| {
            let hs: Vec<_> = jobs
                .into_iter()
                .map(|(n, ids, r, cfg)| {
                    s.spawn(move || {
                        Communicator::init_rank_scalable(n, &ids, r, cfg)
                            .map_err(|e| Failure::from_error("ncclCommInitRank", &e))
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Failure::new(
                            ncclInternalError,
                            "ncclGroupEnd",
                            "a communicator's initialisation panicked",
                        ))
                    })
                })
                .collect()
        })
    };
    let mut first = None;
    for (job, r) in inits.iter().zip(results) {
        if let Err(f) = &r {
            first.get_or_insert_with(|| f.clone());
        }
        // SAFETY: the handle was handed out by this thread's init call and cannot be
        // destroyed while initialising (ncclCommDestroy refuses).
        unsafe { &*job.handle }.set_result(r);
    }
    first
}

/// `ncclGroupStart`: opens (or nests) a group on the calling thread.
#[unsafe(no_mangle)]
pub extern "C" fn ncclGroupStart() -> ncclResult_t {
    guard("ncclGroupStart", || {
        GROUP.with(|g| g.borrow_mut().depth += 1);
        Ok(())
    })
}

/// `ncclGroupEnd`: closes a group; the outermost end initialises the communicators created in
/// the group, then launches every queued operation on its stream. Returns the first failure of
/// a call inside the group, or of the launch.
#[unsafe(no_mangle)]
pub extern "C" fn ncclGroupEnd() -> ncclResult_t {
    const F: &str = "ncclGroupEnd";
    guard(F, || {
        let Some(ops) = end_group(F)? else {
            return Ok(());
        };
        run_ops(ops, F)
    })
}

/// Closes a group level. At the outermost end the communicators created in the group are
/// initialised (or all fail with the first failure of a call inside the group, which is
/// returned) and the queued operations are handed back; `None` for an inner end.
///
/// Errors: `ncclInvalidUsage` outside a group; a call's failure inside the group; the
/// initialisations' first failure.
fn end_group(func: &str) -> Result<Option<Vec<Queued>>, Failure> {
    let taken = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return Err(Failure::usage(
                func,
                "not in a group call (no ncclGroupStart)",
            ));
        }
        g.depth -= 1;
        if g.depth > 0 {
            return Ok(None);
        }
        Ok(Some((
            std::mem::take(&mut g.ops),
            std::mem::take(&mut g.inits),
            std::mem::take(&mut g.windows),
            g.error.take(),
        )))
    })?;
    let Some((ops, inits, windows, error)) = taken else {
        return Ok(None);
    };
    if let Some(f) = error {
        for job in &inits {
            // SAFETY: as in run_inits.
            unsafe { &*job.handle }.set_result(Err(f.clone()));
        }
        return Err(f);
    }
    if let Some(f) = run_inits(inits) {
        return Err(f);
    }
    if let Some(f) = run_windows(windows) {
        return Err(f);
    }
    Ok(Some(ops))
}

/// The magic `NCCL_SIM_INFO_INITIALIZER` writes.
const SIM_INFO_MAGIC: u32 = 0x7468_5283;

/// `ncclGroupSimulateEnd`: ends the group as `ncclGroupEnd` does, except that its collectives
/// are not launched: `simInfo->estimatedTime` gets the time the tuning model predicts for them,
/// µs (each communicator's operations one after another, communicators side by side: the
/// longest communicator's sum). Communicators created in the group are initialised and
/// windows registered in it exchanged. Send and Recv, which the model does not tune, and
/// one-sided operations count 0. Nested: only the outermost end simulates.
///
/// Errors: `ncclInvalidArgument` for a NULL or uninitialised `simInfo` (not from
/// `NCCL_SIM_INFO_INITIALIZER`); otherwise as `ncclGroupEnd`.
///
/// # Safety
/// `simInfo` NULL or pointing to a writable `ncclSimInfo_t` of at least the size it states.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGroupSimulateEnd(simInfo: *mut ncclSimInfo_t) -> ncclResult_t {
    const F: &str = "ncclGroupSimulateEnd";
    guard(F, || {
        crate::errors::check_ptr(simInfo, F, "simInfo")?;
        // SAFETY: checked non-null and aligned; the caller passes a writable struct.
        let sim = unsafe { &mut *simInfo };
        if sim.magic != SIM_INFO_MAGIC || sim.size < std::mem::size_of::<ncclSimInfo_t>() {
            return Err(Failure::arg(
                F,
                "simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER",
            ));
        }
        let Some(ops) = end_group(F)? else {
            return Ok(());
        };
        let mut per_comm: Vec<(*const ncclComm, f32)> = Vec::new();
        for op in &ops {
            // SAFETY: as in run_ops.
            let h = unsafe { &*op.comm };
            let t = match (&*h.state(), &op.work) {
                (State::Ready(c), Work::Coll { args, .. }) => {
                    c.predicted_time_us(args).unwrap_or(0.0)
                }
                (State::Ready(_), Work::OneSided(_)) => 0.0,
                (other, _) => return Err(not_ready(F, other)),
            };
            match per_comm.iter_mut().find(|(c, _)| *c == op.comm) {
                Some((_, sum)) => *sum += t,
                None => per_comm.push((op.comm, t)),
            }
        }
        sim.estimatedTime = per_comm.iter().map(|&(_, t)| t).fold(0.0, f32::max);
        Ok(())
    })
}
