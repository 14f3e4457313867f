//! The communicator handle C holds (`ncclComm_t`): its state, how a C pointer is checked and
//! turned back into it, unique ids, the current CUDA device. Creation, lifecycle, queries,
//! configuration and registration live in their own modules.

use std::sync::{Mutex, MutexGuard};

use cudarc::driver::sys;
use rnccl::{AbortHandle, Communicator, DataType, RedOp, UniqueId};

use crate::errors::{Failure, check_ptr};
use crate::types::*;

/// Marks a live [`ncclComm`]; anything else behind an `ncclComm_t` is refused.
const COMM_MAGIC: u64 = 0x726e_6363_6c43_6f6d;

/// A per-communicator reduction made by `ncclRedOpCreatePreMulSum`: the operation and the
/// data type it was made for.
#[derive(Debug, Clone, Copy)]
pub struct DynOp {
    /// The operation.
    pub op: RedOp,
    /// The only data type it may be used with.
    pub dtype: DataType,
}

/// Where a communicator is in its life.
pub enum State {
    /// Created inside a group; `ncclGroupEnd` runs the initialisation.
    Initializing,
    /// Usable (boxed: a communicator is large, the other states small).
    Ready(Box<Communicator>),
    /// `ncclCommFinalize` ran (or the communicator was aborted): only queries and destroy work.
    Finalized,
    /// Initialisation failed; destroy is all that is left.
    Failed(Failure),
}

/// `struct ncclComm`: what an `ncclComm_t` points to. C never sees inside it.
pub struct ncclComm {
    /// [`COMM_MAGIC`] while the handle is live, 0 once freed.
    pub(crate) magic: u64,
    /// This rank, `0..nranks`.
    pub rank: usize,
    /// Number of ranks.
    pub nranks: usize,
    /// The CUDA device ordinal the rank runs on.
    pub device: Option<usize>,
    /// Raises the abort flag without waiting for an operation in flight.
    pub(crate) abort: Mutex<Option<AbortHandle>>,
    /// Where the communicator is in its life.
    pub(crate) state: Mutex<State>,
    /// Dynamic reductions; id `ncclNumOps + i` is entry `i` (`None` once destroyed).
    pub ops: Mutex<Vec<Option<DynOp>>>,
}

/// `ncclComm_t`: a communicator handle.
pub type ncclComm_t = *mut ncclComm;

/// Locks `m`, going on after a panic elsewhere poisoned it (every state stays consistent).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ncclComm {
    pub(crate) fn new(rank: usize, nranks: usize, device: Option<usize>, state: State) -> ncclComm {
        ncclComm {
            magic: COMM_MAGIC,
            rank,
            nranks,
            device,
            abort: Mutex::new(None),
            state: Mutex::new(state),
            ops: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn from_communicator(c: Communicator) -> ncclComm {
        let h = ncclComm::new(c.rank(), c.nranks(), c.gpu_ordinal(), State::Initializing);
        h.set_ready(c);
        h
    }

    /// Leaks a boxed handle to C.
    pub(crate) fn into_raw(self) -> ncclComm_t {
        Box::into_raw(Box::new(self))
    }

    /// Stores the outcome of a deferred initialisation.
    pub fn set_result(&self, r: Result<Communicator, Failure>) {
        match r {
            Ok(c) => self.set_ready(c),
            Err(f) => *lock(&self.state) = State::Failed(f),
        }
    }

    pub(crate) fn set_ready(&self, c: Communicator) {
        *lock(&self.abort) = Some(c.abort_handle());
        *lock(&self.state) = State::Ready(Box::new(c));
    }

    /// The state, locked (an operation in flight on another thread holds it).
    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Runs `f` on the communicator.
    ///
    /// Errors: `ncclInvalidUsage` for a communicator still initialising, finalized, or whose
    /// initialisation failed (with that failure's message).
    pub fn with_ready<R>(
        &self,
        func: &str,
        f: impl FnOnce(&Communicator) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        match &*self.state() {
            State::Ready(c) => f(c),
            other => Err(not_ready(func, other)),
        }
    }
}

/// The failure for using a communicator in state `s` that is not ready.
pub fn not_ready(func: &str, s: &State) -> Failure {
    match s {
        State::Initializing => Failure::usage(
            func,
            "the communicator is still initialising (call ncclGroupEnd first)",
        ),
        State::Finalized => Failure::usage(func, "the communicator was finalized or aborted"),
        State::Failed(f) => Failure::usage(
            func,
            format!("the communicator's initialisation failed: {}", f.msg),
        ),
        State::Ready(_) => Failure::new(ncclInternalError, func, "communicator state mix-up"),
    }
}

/// The communicator behind `comm`.
///
/// Errors: `ncclInvalidArgument` for NULL, misaligned, or something that is not a live
/// communicator.
///
/// # Safety
/// `comm` must be NULL or a pointer this library returned and that was not destroyed (a
/// destroyed one is caught only while its memory was not reused).
pub unsafe fn handle<'a>(comm: ncclComm_t, func: &str) -> Result<&'a ncclComm, Failure> {
    check_ptr(comm, func, "comm")?;
    // SAFETY: non-null and aligned; the caller promises it came from this library.
    let c = unsafe { &*comm };
    if c.magic != COMM_MAGIC {
        return Err(Failure::arg(
            func,
            "comm is not a live communicator (destroyed, or not made by ncclCommInit*)",
        ));
    }
    Ok(c)
}

/// The 128 bytes of an rnccl unique id: its text form, NUL-terminated and NUL-padded.
///
/// Errors: `ncclInternalError` if the text does not fit (it always does: at most ~90 bytes).
pub fn id_to_c(id: &UniqueId, func: &str) -> Result<ncclUniqueId, Failure> {
    let text = id.to_string();
    let mut out = ncclUniqueId {
        internal: [0; NCCL_UNIQUE_ID_BYTES],
    };
    if text.len() >= NCCL_UNIQUE_ID_BYTES {
        return Err(Failure::new(
            ncclInternalError,
            func,
            format!("unique id '{text}' does not fit in {NCCL_UNIQUE_ID_BYTES} bytes"),
        ));
    }
    for (o, b) in out.internal.iter_mut().zip(text.bytes()) {
        *o = b as std::ffi::c_char;
    }
    Ok(out)
}

/// The rnccl unique id in an `ncclUniqueId`.
///
/// Errors: `ncclInvalidArgument` when the bytes are not an id from `ncclGetUniqueId`.
pub fn id_from_c(id: &ncclUniqueId, func: &str) -> Result<UniqueId, Failure> {
    let bytes: Vec<u8> = id
        .internal
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    let bad = |why: String| {
        Failure::arg(
            func,
            format!("the ncclUniqueId was not made by this library's ncclGetUniqueId ({why})"),
        )
    };
    let text = String::from_utf8(bytes).map_err(|_| bad("not text".into()))?;
    text.parse::<UniqueId>().map_err(|e| bad(e.to_string()))
}

/// The calling thread's current CUDA device, as `cudaGetDevice` reports it (device 0 when no
/// context is current, the runtime's default).
///
/// Errors: `ncclSystemError` when the host has no usable GPU; `ncclUnhandledCudaError` when
/// the driver refuses the query.
pub fn current_device(func: &str) -> Result<usize, Failure> {
    rnccl::gpus().map_err(|e| Failure::no_gpu(func, &e))?;
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is loaded and initialised (gpus() succeeded); writes one handle.
    let r = unsafe { sys::cuCtxGetCurrent(&mut ctx) };
    cuda_ok(r, func, "cuCtxGetCurrent")?;
    if ctx.is_null() {
        return Ok(0);
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: a context is current; writes one device handle.
    let r = unsafe { sys::cuCtxGetDevice(&mut dev) };
    cuda_ok(r, func, "cuCtxGetDevice")?;
    Ok(dev.max(0) as usize)
}

/// `ncclUnhandledCudaError` unless `r` is success.
pub fn cuda_ok(r: sys::CUresult, func: &str, call: &str) -> Result<(), Failure> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Failure::new(
            ncclUnhandledCudaError,
            func,
            format!("{call} failed: {r:?}"),
        ))
    }
}

/// Wraps an rnccl communicator in a C handle, for Rust programs that create communicators
/// with rnccl's API and hand them to C code (and for tests, with host communicators). Free it
/// with `ncclCommDestroy`.
pub fn comm_from_rnccl(c: Communicator) -> ncclComm_t {
    ncclComm::from_communicator(c).into_raw()
}
