//! Runs operations: the launch seam between a communicator's groups and its engine.
//!
//! A communicator holds one [`Engine`], chosen when it is created:
//! - the host engine ([`host`]) runs plans in the caller's thread: it moves each lane's steps
//!   forward slot by slot over the transports' connections, applying the CPU backend's
//!   reduction kernels, and joins the operations of every communicator of a group in one
//!   progress loop (one thread may drive several ranks);
//! - the GPU engine ([`gpu`]) encodes each collective's plan as a device program and launches
//!   the step-interpreter kernel (or the one-shot LL kernel) on the caller's CUDA stream, and
//!   returns: completion is seen through the stream, failures through the communicator's
//!   async-error query. A GPU rank's operations on host memory (a benchmark's barrier) run on
//!   its own host engine, over host connections.
//!
//! `crate::comm`'s `Group::end` hands its operations to [`start`], one [`Share`] per
//! communicator, and never looks at where their memory lives; the engines decide. What
//! [`start`] leaves to do is a [`host::Running`] group that the caller drives to the end.
//! Nothing here blocks but that drive, and every wait in it has the communicator's deadline;
//! a group over several GPU communicators also waits for their launcher threads, which launch
//! side by side with the caller ([`gpu::launcher`]) and return once their kernels are queued.

pub(crate) mod core;
pub(crate) mod gpu;
pub(crate) mod host;
pub(crate) mod plans;

use std::cell::RefMut;
use std::sync::atomic::Ordering;

use cudarc::driver::sys::CUstream;

pub(crate) use self::core::{Core, Watch};
use self::gpu::group_buffers::GroupBuffers;
use crate::coll::CollArgs;
use crate::device::{MemKind, Region};
use crate::error::{Error, Result};

/// One queued operation: its arguments and the parts of its buffers this rank reads and
/// writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    /// What to run.
    pub args: CollArgs,
    /// Read (the part of the send buffer this rank uses).
    pub input: Region,
    /// Written (the part of the receive buffer this rank uses).
    pub output: Region,
    /// The CUDA stream a device operation is enqueued on (null for host operations).
    pub stream: CUstream,
}

// SAFETY: an operation only names memory and a stream (addresses and a CUDA handle, valid on
// any thread of the process); what makes them valid to use is the group's borrow of the
// buffers, which lasts until the group's end, whichever thread launches the operation.
unsafe impl Send for Op {}
// SAFETY: as for Send: an `Op` has no interior mutability.
unsafe impl Sync for Op {}

impl Op {
    /// Whether the operation's memory is a GPU's.
    fn on_device(&self) -> bool {
        matches!(self.output.kind, MemKind::Device { .. })
    }
}

/// What runs a communicator's operations (one per communicator).
pub(crate) enum Engine {
    /// Host memory, progressed by the caller's thread (CPU ranks).
    Host(Box<host::HostEngine>),
    /// A GPU: kernels on the caller's streams for its memory, a host engine for host memory.
    Gpu(Box<gpu::GpuEngine>),
}

impl Engine {
    /// The host executor's state: a host rank's engine, or the one a GPU rank runs its
    /// host-memory operations on.
    pub(crate) fn host(&mut self) -> &mut host::HostEngine {
        match self {
            Engine::Host(h) => h,
            Engine::Gpu(g) => &mut g.host,
        }
    }

    /// The host executor's state, to read.
    pub(crate) fn host_ref(&self) -> &host::HostEngine {
        match self {
            Engine::Host(h) => h,
            Engine::Gpu(g) => &g.host,
        }
    }
}

/// A communicator's mutable state, touched only by the thread driving it.
pub(crate) struct State {
    /// Set after an error: the communicator can only be dropped.
    pub failed: Option<String>,
    /// Set while suspended (`ncclCommSuspend`): whether its GPU scratch was released.
    pub suspended: Option<bool>,
    /// Set when the communicator takes no new operations although nothing failed (shrunk with
    /// `NCCL_SHRINK_ABORT`): why. Unlike `failed`, not an asynchronous error.
    pub retired: Option<&'static str>,
    /// Operations queued so far (the last one's number).
    pub ops: u64,
    /// Plans of operations seen before.
    pub plans: plans::PlanCache,
    /// What runs the operations.
    pub engine: Engine,
}

impl State {
    /// A fresh state around `engine`.
    pub(crate) fn new(engine: Engine) -> State {
        State {
            failed: None,
            suspended: None,
            retired: None,
            ops: 0,
            plans: plans::PlanCache::default(),
            engine,
        }
    }

    /// Whether the communicator may take new operations.
    ///
    /// Errors: [`Error::InvalidUsage`] after an earlier failure, [`Error::Aborted`] after an
    /// abort.
    pub(crate) fn usable(&self, core: &Core) -> Result<()> {
        if let Some(why) = &self.failed {
            return Err(Error::invalid_usage(format!(
                "this communicator is unusable after an earlier failure ({why}); drop it and \
                 create a new one"
            )));
        }
        if core.abort.load(Ordering::SeqCst) {
            return Err(Error::Aborted("the communicator was aborted".into()));
        }
        if self.suspended.is_some() {
            return Err(Error::invalid_usage(
                "the communicator is suspended (ncclCommSuspend): resume it first",
            ));
        }
        if let Some(why) = self.retired {
            return Err(Error::invalid_usage(format!(
                "this communicator takes no new operations: {why}"
            )));
        }
        Ok(())
    }
}

/// One communicator's operations of a group, with its core and its borrowed state.
pub(crate) struct Share<'g> {
    /// The communicator's core.
    pub core: &'g Core,
    /// Its state, borrowed for the group's life.
    pub state: RefMut<'g, State>,
    /// Its operations, in the order they were queued.
    pub ops: Vec<Op>,
}

/// Starts a group (the launch half of `ncclGroupEnd`): operations on GPU memory go to their
/// communicators' GPU engines and run on their streams; operations on host memory are planned
/// and connected by the host engines and come back as a [`host::Running`] group to drive.
///
/// Errors: [`Error::InvalidUsage`] for a group that mixes GPU and host memory, device buffers
/// on a communicator without a GPU, or a communicator that failed earlier; [`Error::Aborted`]
/// after an abort; the engines' planning, connection and launch errors (the communicators
/// involved are unusable afterwards).
pub(crate) fn start(mut shares: Vec<Share<'_>>) -> Result<host::Running<'_>> {
    let ops = || shares.iter().flat_map(|s| s.ops.iter());
    let device = ops().filter(|o| o.on_device()).count();
    if device != 0 && device != ops().count() {
        return Err(Error::invalid_usage(
            "a group mixes operations on GPU memory with operations on host memory: end them \
             in separate groups",
        ));
    }
    for s in &shares {
        s.state.usable(s.core)?;
    }
    if device == 0 {
        return host::enqueue(shares);
    }
    let results = launch_gpus(&mut shares);
    for (s, r) in shares.iter_mut().zip(&results) {
        if let Err(e) = r {
            s.state.failed.get_or_insert_with(|| e.to_string());
        }
    }
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(host::Running::default())
}

/// Launches each share's operations on its GPU, one result per share. With several shares (one
/// thread driving several GPUs) the first share's launch runs on this thread and every other's
/// on its communicator's launcher thread at the same time ([`gpu::launcher`]); all are on their
/// streams when this returns. Where the shares hold every rank of a communicator, its
/// collectives may run on the ranks' own buffers ([`gpu::group_buffers`]).
fn launch_gpus(shares: &mut [Share<'_>]) -> Vec<Result<()>> {
    fn launch(core: &Core, st: &mut State, ops: &[Op], group: &GroupBuffers) -> Result<()> {
        match &mut st.engine {
            Engine::Gpu(g) => g.launch(core, &mut st.ops, &mut st.plans, ops, group),
            Engine::Host(_) => Err(Error::invalid_usage(
                "device buffers need a communicator created on a GPU",
            )),
        }
    }
    let groups = group_buffers(shares);
    let mut results: Vec<Result<()>> = shares.iter().map(|_| Ok(())).collect();
    let spare = match shares.len() {
        1 => 0,
        _ => gpu::launcher::spare_cpus(),
    };
    let mut here = Vec::new();
    let mut jobs = Vec::with_capacity(shares.len());
    for (i, ((s, r), group)) in shares.iter_mut().zip(&mut results).zip(&groups).enumerate() {
        let (core, st, ops): (&Core, &mut State, &[Op]) = (s.core, &mut s.state, &s.ops);
        // The first share, any beyond this thread's spare CPUs, and any without a launcher (a
        // host communicator, or no thread to be had) run on this thread.
        let launched = (i > 0 && jobs.len() < spare)
            .then(|| s.core.watch.gpu())
            .flatten();
        match launched.map(|g| g.launcher()) {
            Some(Ok(l)) => jobs.push((i, l, move || *r = launch(core, st, ops, group))),
            _ => here.push((core, st, ops, group, r)),
        }
    }
    let mut posted: Vec<(&gpu::launcher::Launcher, &mut (dyn FnMut() + Send))> = jobs
        .iter_mut()
        .map(|(_, l, job)| (*l, job as &mut (dyn FnMut() + Send)))
        .collect();
    let ((), ran) = gpu::launcher::run_beside(&mut posted, || {
        for (core, st, ops, group, r) in here {
            *r = launch(core, st, ops, group);
        }
    });
    drop(posted);
    let panicked: Vec<usize> = jobs
        .iter()
        .zip(ran)
        .filter(|(_, ran)| !ran)
        .map(|((i, _, _), _)| *i)
        .collect();
    drop(jobs);
    for i in panicked {
        results[i] = Err(Error::Internal(format!(
            "launching the operations of rank {} panicked on its launcher thread",
            shares[i].core.rank
        )));
    }
    results
}

/// The group's buffers per share ([`gpu::group_buffers::of_group`]), over the shares on GPU
/// engines; empty for the others and for a group of one share.
fn group_buffers(shares: &[Share<'_>]) -> Vec<GroupBuffers> {
    if shares.len() < 2 {
        return vec![GroupBuffers::default(); shares.len()];
    }
    let on_gpu: Vec<(usize, &gpu::GpuComm)> = shares
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match &s.state.engine {
            Engine::Gpu(g) => Some((i, &*g.comm)),
            Engine::Host(_) => None,
        })
        .collect();
    let members: Vec<gpu::group_buffers::Member<'_>> = on_gpu
        .iter()
        .map(|&(i, g)| gpu::group_buffers::Member {
            core: shares[i].core,
            gpu: g.info.ordinal,
            direct: g.direct_pointers && g.direct_areas(),
            ops: &shares[i].ops,
        })
        .collect();
    let mut out = vec![GroupBuffers::default(); shares.len()];
    for ((i, _), g) in on_gpu.iter().zip(gpu::group_buffers::of_group(&members)) {
        out[*i] = g;
    }
    out
}
