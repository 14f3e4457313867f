//! Results and errors at the C boundary: the guard every entry point runs its body in (no
//! panic crosses into C), the last-error message (`ncclGetLastError`), `ncclGetErrorString` and
//! `ncclGetVersion`.

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, Once};

use rnccl::{Error, ResultCode};

use crate::types::*;

/// A failed call: the result code to return and the message `ncclGetLastError` gives.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The `ncclResult_t` returned.
    pub code: ncclResult_t,
    /// What went wrong, starting with the function's name.
    pub msg: String,
}

impl Failure {
    /// A failure of `func` with `code`.
    pub fn new(code: ncclResult_t, func: &str, msg: impl std::fmt::Display) -> Failure {
        Failure {
            code,
            msg: format!("{func}: {msg}"),
        }
    }

    /// `ncclInvalidArgument` from `func`.
    pub fn arg(func: &str, msg: impl std::fmt::Display) -> Failure {
        Failure::new(ncclInvalidArgument, func, msg)
    }

    /// `ncclInvalidUsage` from `func`.
    pub fn usage(func: &str, msg: impl std::fmt::Display) -> Failure {
        Failure::new(ncclInvalidUsage, func, msg)
    }

    /// `ncclInvalidUsage` for a function rnccl has no implementation of yet.
    pub fn unimplemented(func: &str, what: &str) -> Failure {
        Failure::usage(
            func,
            format!("rnccl does not implement {what} yet; nothing was done"),
        )
    }

    /// The failure for an rnccl error inside `func`.
    pub fn from_error(func: &str, e: &Error) -> Failure {
        Failure::new(result_code(e), func, e)
    }

    /// The failure when `func` needs a GPU and the host has none usable (`e` from the probe):
    /// `ncclSystemError`.
    pub fn no_gpu(func: &str, e: &Error) -> Failure {
        Failure::new(
            ncclSystemError,
            func,
            format!("no usable GPU on this host: {e}"),
        )
    }
}

/// nccl.h's result code for an rnccl error. A timeout is a peer that stopped answering,
/// `ncclRemoteError`, as NCCL reports it: NCCL 2.30 returns its `ncclTimeout` only from the
/// device API's barriers, and programs built against 2.28's nccl.h (which lacks it) would not
/// know the code.
pub fn result_code(e: &Error) -> ncclResult_t {
    match e.code() {
        ResultCode::Success => ncclSuccess,
        ResultCode::UnhandledCudaError => ncclUnhandledCudaError,
        ResultCode::SystemError => ncclSystemError,
        ResultCode::InternalError => ncclInternalError,
        ResultCode::InvalidArgument => ncclInvalidArgument,
        ResultCode::InvalidUsage => ncclInvalidUsage,
        ResultCode::RemoteError | ResultCode::Timeout => ncclRemoteError,
        ResultCode::InProgress => ncclInProgress,
    }
}

/// The latest error message of the process. NCCL keeps one process-wide buffer
/// (`ncclLastError`); a watchdog thread reads what the thread driving the communicator hit.
static LAST_ERROR: Mutex<String> = Mutex::new(String::new());

thread_local! {
    /// The copy of [`LAST_ERROR`] whose pointer `ncclGetLastError` returned to this thread:
    /// valid until this thread's next `ncclGetLastError` call.
    static LAST_ERROR_COPY: RefCell<CString> = RefCell::new(CString::default());
}

/// Sets up rnccl's NCCL_DEBUG log from the environment, once (communicator init does the same
/// with its own knobs; whichever comes first wins, as NCCL reads its debug knobs once).
pub fn init_log() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Ok(cfg) = rnccl::config::Config::from_env() {
            let _ = rnccl::log::init(&cfg);
        }
    });
}

/// `ncclResetDebugInit` (deprecated in NCCL 2.30's nccl.h, which still declares it): reads
/// `NCCL_DEBUG` and `NCCL_DEBUG_SUBSYS` from the environment again, so the log's level and
/// subsystems change at once (`rnccl::log::reset`; the destination stays the first one). A
/// knob that does not parse leaves the log as it was.
#[unsafe(no_mangle)]
pub extern "C" fn ncclResetDebugInit() {
    init_log();
    if let Ok(cfg) = rnccl::config::Config::from_env() {
        let _ = rnccl::log::reset(&cfg);
    }
}

/// `pncclResetDebugInit`: the profiling alias of [`ncclResetDebugInit`].
#[unsafe(no_mangle)]
pub extern "C" fn pncclResetDebugInit() {
    ncclResetDebugInit()
}

/// Records `f` as the last error and logs it as an NCCL `WARN` line.
pub fn record(f: &Failure) {
    init_log();
    tracing::warn!(target: "rnccl::init", "{}", f.msg);
    let mut last = LAST_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    last.clear();
    last.push_str(&f.msg);
}

/// Runs an entry point's body: a panic becomes `ncclInternalError`, a failure is recorded for
/// `ncclGetLastError` and logged; the result code is returned.
pub fn guard(func: &'static str, body: impl FnOnce() -> Result<(), Failure>) -> ncclResult_t {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return ncclSuccess,
        Ok(Err(f)) => f,
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Failure::new(
                ncclInternalError,
                func,
                format!("internal error (please report this to the rnccl developers): {why}"),
            )
        }
    };
    record(&failure);
    failure.code
}

/// Checks that `p` is non-null and aligned for `T`, as NCCL's `PtrCheck` does for its output
/// and input pointers.
///
/// Errors: `ncclInvalidArgument` naming the function and the argument.
pub fn check_ptr<T>(p: *const T, func: &str, what: &str) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::arg(func, format!("{what} argument is NULL")));
    }
    if !p.is_aligned() {
        return Err(Failure::arg(
            func,
            format!(
                "{what} argument {p:p} is not aligned to {} bytes",
                std::mem::align_of::<T>()
            ),
        ));
    }
    Ok(())
}

/// `ncclGetVersion`: writes `NCCL_VERSION_CODE` of the API this library implements, 23007
/// (NCCL 2.30.7), to `*version`. rnccl reports NCCL's code rather than its own because
/// programs gate features on it (PyTorch and nccl-tests compare it against
/// `NCCL_VERSION(2, x, y)` to decide which calls exist); rnccl implements 2.30's API.
///
/// Returns `ncclInvalidArgument` when `version` is NULL.
///
/// # Safety
/// `version` must be NULL or point to a writable `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetVersion(version: *mut c_int) -> ncclResult_t {
    guard("ncclGetVersion", || {
        check_ptr(version, "ncclGetVersion", "version")?;
        // SAFETY: checked non-null and aligned; the caller passes a writable int.
        unsafe { version.write(NCCL_VERSION_CODE) };
        Ok(())
    })
}

/// `ncclGetErrorString`: NCCL's fixed text for a result code ("unknown result code" for values
/// outside the enum). The string is static.
#[unsafe(no_mangle)]
pub extern "C" fn ncclGetErrorString(result: ncclResult_t) -> *const c_char {
    let s: &'static std::ffi::CStr = match result {
        ncclSuccess => c"no error",
        ncclUnhandledCudaError => c"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        ncclSystemError => c"unhandled system error (run with NCCL_DEBUG=INFO for details)",
        ncclInternalError => c"internal error - please report this issue to the NCCL developers",
        ncclInvalidArgument => c"invalid argument (run with NCCL_DEBUG=WARN for details)",
        ncclInvalidUsage => c"invalid usage (run with NCCL_DEBUG=WARN for details)",
        ncclRemoteError => c"remote process exited or there was a network error",
        ncclInProgress => c"NCCL operation in progress",
        ncclTimeout => c"timeout",
        _ => c"unknown result code",
    };
    s.as_ptr()
}

/// `ncclGetLastError`: the message of the latest failed call in this process ("" when none),
/// as NCCL's process-wide buffer. `comm` is ignored, as in NCCL. The string stays valid until
/// the calling thread calls `ncclGetLastError` again.
#[unsafe(no_mangle)]
pub extern "C" fn ncclGetLastError(_comm: crate::comm::ncclComm_t) -> *const c_char {
    let run = catch_unwind(|| {
        let text = LAST_ERROR
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace('\0', " ");
        let text = CString::new(text).unwrap_or_default();
        LAST_ERROR_COPY.with(|c| {
            let mut c = c.borrow_mut();
            *c = text;
            c.as_ptr()
        })
    });
    run.unwrap_or(c"".as_ptr())
}
