//! Buffer registration: `ncclCommRegister`/`Deregister` and `ncclCommWindowRegister`/
//! `Deregister`, and the device-communicator calls rnccl does not implement yet.
//!
//! NCCL documents both registrations as optimisations for collectives (zero-copy transfers,
//! symmetric-memory kernels): a collective on a registered buffer gives the same result as on
//! any other. A `ncclCommRegister` registration is recorded and its handle only taken back by
//! the same call's deregistration, on the same communicator. On a ready GPU communicator it is
//! also offered to the peers, which map it (`rnccl::Communicator::register_buffer`): an
//! all-reduce, reduce-scatter or all-gather whose buffers every rank registered loads and
//! stores them in place, one whose buffers some rank did not runs through rnccl's own buffers
//! as on any other. A window on a GPU communicator is more: every rank learns where the
//! others' ranges are ([`rnccl::DeviceWindow`], collective like NCCL's: inside a group the
//! ranks' ranges are exchanged at `ncclGroupEnd`, so one thread can register on several GPUs),
//! one-sided operations (`crate::rma`) store into them, and with
//! `NCCL_WIN_COLL_SYMMETRIC` all-reduces, reduce-scatters and all-gathers whose buffers lie in
//! windows load and store the peers' buffers in place (rnccl's symmetric kernels).

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use rnccl::{BufferRegistration, DeviceWindow};

use crate::comm::*;
use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// `NCCL_WIN_DEFAULT | NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING`: the window flags
/// nccl.h 2.30 defines. Strict ordering asks the NIC to keep a GIN window's network writes in
/// order (NCCL 2.30 src/gin/gin_host.cc, `NCCL_NET_MR_FLAG_FORCE_SO`); rnccl's one-sided
/// operations store through NVLink in stream order, so it changes nothing here.
const WIN_FLAGS: c_int = 0x03;
/// `NCCL_WIN_COLL_SYMMETRIC`: every rank registers the same size, and collectives pass buffers
/// at the same offsets of it.
const WIN_COLL_SYMMETRIC: c_int = 0x01;

/// What either registration hands out.
pub struct Registration {
    comm: usize,
    buff: usize,
    size: usize,
    /// Made by `ncclCommWindowRegister` (else `ncclCommRegister`).
    window: bool,
    /// A window registered with `NCCL_WIN_COLL_SYMMETRIC`.
    symmetric: bool,
    /// A window of a GPU communicator: the ranks' ranges once exchanged (at `ncclGroupEnd`
    /// inside a group), or why the exchange failed.
    device: OnceLock<Result<DeviceWindow, Failure>>,
    /// A `ncclCommRegister` registration on a GPU communicator, offered to the peers
    /// (released by the deregistration).
    buffer: std::sync::Mutex<Option<BufferRegistration>>,
}

impl Registration {
    /// The ranks' ranges of this window, for a one-sided operation in `func`.
    ///
    /// Errors: `ncclInvalidUsage` for a window of a communicator without a GPU, one whose
    /// group has not ended, or whose exchange failed (with that failure).
    pub fn device_window(&self, func: &str) -> Result<&DeviceWindow, Failure> {
        match self.device.get() {
            Some(Ok(w)) => Ok(w),
            Some(Err(f)) => Err(Failure::usage(
                func,
                format!("the window's registration failed: {}", f.msg),
            )),
            None if self.window => Err(Failure::usage(
                func,
                "the window's registration has not completed: end the group it was registered \
                 in (ncclGroupEnd) first, or register it on a communicator with a GPU",
            )),
            None => Err(Failure::arg(
                func,
                "the handle came from ncclCommRegister, not a window",
            )),
        }
    }
}

/// A window registration waiting for its group's end.
pub struct WindowJob {
    comm: *const ncclComm,
    reg: *const Registration,
}

/// Exchanges the ranges of `jobs`' windows: every rank's offer is posted first, then all are
/// collected, so one thread registering on several communicators of a job does not wait for
/// itself. Returns the first failure; every window records its own outcome.
pub fn run_windows(jobs: Vec<WindowJob>) -> Option<Failure> {
    const F: &str = "ncclCommWindowRegister";
    let started: Vec<_> = jobs
        .iter()
        .map(|j| {
            // SAFETY: handles and registrations queued by this thread's calls stay live until
            // the group ends (NCCL forbids destroying them inside a group).
            let (h, r) = unsafe { (&*j.comm, &*j.reg) };
            h.with_ready(F, |c| {
                c.device_window_start(r.buff as u64, r.size, r.symmetric)
                    .map_err(|e| Failure::from_error(F, &e))
            })
        })
        .collect();
    let mut first = None;
    for (j, p) in jobs.iter().zip(started) {
        // SAFETY: as above.
        let (h, r) = unsafe { (&*j.comm, &*j.reg) };
        let w = p.and_then(|p| {
            h.with_ready(F, |c| {
                c.device_window_finish(p)
                    .map_err(|e| Failure::from_error(F, &e))
            })
        });
        if let Err(f) = &w {
            first.get_or_insert_with(|| f.clone());
        }
        let _ = r.device.set(w);
    }
    first
}

/// Records `size` bytes at `buff` for `comm`; the handle for the matching deregistration.
///
/// # Safety
/// `comm` as [`handle`].
unsafe fn register(
    f: &'static str,
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    window: bool,
    symmetric: bool,
) -> Result<*mut Registration, Failure> {
    // SAFETY: forwarded from the caller.
    let h = unsafe { handle(comm, f) }?;
    if buff.is_null() || size == 0 {
        return Err(Failure::arg(
            f,
            format!("buff {buff:p} / size {size} is not a buffer"),
        ));
    }
    // A buffer on a ready GPU communicator is offered to the peers, which map it: collectives
    // whose buffers every rank registered then load and store them in place. On one still
    // initialising (or finalised) it is only recorded, as before, and collectives copy.
    let buffer = match &*h.state() {
        State::Ready(c) if !window && c.gpu_ordinal().is_some() => Some(
            c.register_buffer(buff as u64, size)
                .map_err(|e| Failure::from_error(f, &e))?,
        ),
        _ => None,
    };
    Ok(Box::into_raw(Box::new(Registration {
        comm: h as *const ncclComm as usize,
        buff: buff as usize,
        size,
        window,
        symmetric,
        device: OnceLock::new(),
        buffer: std::sync::Mutex::new(buffer),
    })))
}

/// The registration behind `reg`, checked to be of the `window` kind and made on `comm`.
///
/// Errors: `ncclInvalidArgument` for NULL, the other kind, or another communicator.
///
/// # Safety
/// `comm` as [`handle`]; `reg` NULL or a live handle from [`register`].
pub(crate) unsafe fn owned<'a>(
    f: &'static str,
    comm: ncclComm_t,
    reg: *mut Registration,
    window: bool,
) -> Result<&'a Registration, Failure> {
    // SAFETY: forwarded from the caller.
    let h = unsafe { handle(comm, f) }?;
    check_ptr(reg, f, if window { "win" } else { "handle" })?;
    // SAFETY: the caller passes a live handle from `register` (made by Box::into_raw).
    let r = unsafe { &*reg };
    if r.window != window {
        let why = match r.window {
            true => "came from ncclCommWindowRegister: release it with ncclCommWindowDeregister",
            false => "came from ncclCommRegister, not a window: release it with ncclCommDeregister",
        };
        return Err(Failure::arg(
            f,
            format!("the handle of buffer {:#x} {why}", r.buff),
        ));
    }
    if r.comm != h as *const ncclComm as usize {
        return Err(Failure::arg(
            f,
            format!(
                "the handle of buffer {:#x} ({} bytes) was registered with another communicator",
                r.buff, r.size
            ),
        ));
    }
    Ok(r)
}

/// Takes back a handle from [`register`] of the same kind and communicator.
///
/// # Safety
/// `comm` as [`handle`]; `reg` NULL or a live handle from [`register`].
unsafe fn deregister(
    f: &'static str,
    comm: ncclComm_t,
    reg: *mut Registration,
    window: bool,
) -> Result<(), Failure> {
    // SAFETY: forwarded from the caller.
    let r = unsafe { owned(f, comm, reg, window) }?;
    let buffer = r.buffer.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(b) = buffer {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, f) }?;
        h.with_ready(f, |c| {
            c.deregister_buffer(b)
                .map_err(|e| Failure::from_error(f, &e))
        })?;
    }
    // SAFETY: as above; ownership comes back here once.
    drop(unsafe { Box::from_raw(reg) });
    Ok(())
}

/// `ncclCommRegister`: records `buff` (`size` bytes of device memory) and writes an opaque
/// handle for [`ncclCommDeregister`] (see the module docs for what registration does here).
///
/// # Safety
/// `comm` as [`handle`]; `handle` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommRegister(
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    handle_out: *mut *mut c_void,
) -> ncclResult_t {
    const F: &str = "ncclCommRegister";
    guard(F, || {
        check_ptr(handle_out, F, "handle")?;
        // SAFETY: forwarded from the caller.
        let r = unsafe { register(F, comm, buff, size, false, false) }?;
        // SAFETY: checked non-null and aligned; the caller passes a writable pointer.
        unsafe { handle_out.write(r.cast()) };
        Ok(())
    })
}

/// `ncclCommDeregister`: releases a handle from [`ncclCommRegister`] of the same communicator.
///
/// # Safety
/// `comm` as [`handle`]; `handle` must be NULL or a live registration handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDeregister(
    comm: ncclComm_t,
    handle_in: *mut c_void,
) -> ncclResult_t {
    const F: &str = "ncclCommDeregister";
    // SAFETY: forwarded from the caller.
    guard(F, || unsafe {
        deregister(F, comm, handle_in.cast(), false)
    })
}

/// `ncclCommWindowRegister`: registers the window `buff` (`size` bytes of device memory, flags
/// `NCCL_WIN_DEFAULT`, `NCCL_WIN_COLL_SYMMETRIC`, `NCCL_WIN_STRICT_ORDERING`) and writes its
/// handle for [`ncclCommWindowDeregister`]. Collective on a GPU communicator, as in NCCL: every rank
/// registers its windows in the same order, and the call returns once every rank did; inside a
/// group the exchange runs at `ncclGroupEnd` (see the module docs).
///
/// Errors: `ncclInvalidArgument` for a null buffer or window pointer, a zero size or flags
/// nccl.h does not define; bootstrap errors when a rank does not register.
///
/// # Safety
/// `comm` as [`handle`]; `win` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommWindowRegister(
    comm: ncclComm_t,
    buff: *mut c_void,
    size: usize,
    win: *mut ncclWindow_t,
    winFlags: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommWindowRegister";
    guard(F, || {
        check_ptr(win, F, "win")?;
        if winFlags & !WIN_FLAGS != 0 {
            return Err(Failure::arg(
                F,
                format!(
                    "window flags {winFlags:#x}: nccl.h defines NCCL_WIN_DEFAULT (0), \
                     NCCL_WIN_COLL_SYMMETRIC (1) and NCCL_WIN_STRICT_ORDERING (2)"
                ),
            ));
        }
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        // SAFETY: forwarded from the caller.
        let r = unsafe {
            register(
                F,
                comm,
                buff,
                size,
                true,
                winFlags & WIN_COLL_SYMMETRIC != 0,
            )
        }?;
        if h.device.is_some() {
            let job = WindowJob { comm: h, reg: r };
            if crate::group::depth() > 0 {
                crate::group::defer_window(job);
            } else if let Some(f) = run_windows(vec![job]) {
                // SAFETY: made above by Box::into_raw and handed to no one.
                drop(unsafe { Box::from_raw(r) });
                return Err(f);
            }
        }
        // SAFETY: checked non-null and aligned; the caller passes a writable pointer.
        unsafe { win.write(r.cast()) };
        Ok(())
    })
}

/// `ncclCommWindowDeregister`: releases a window from [`ncclCommWindowRegister`] of the same
/// communicator.
///
/// # Safety
/// `comm` as [`handle`]; `win` must be NULL or a live window.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommWindowDeregister(
    comm: ncclComm_t,
    win: ncclWindow_t,
) -> ncclResult_t {
    const F: &str = "ncclCommWindowDeregister";
    // SAFETY: forwarded from the caller.
    guard(F, || unsafe { deregister(F, comm, win.cast(), true) })
}

/// `ncclWinGetUserPtr` (NCCL 2.30): the buffer a window of `comm` was registered with.
///
/// Errors: `ncclInvalidArgument` for NULL arguments, a handle from `ncclCommRegister` rather
/// than a window, or a window of another communicator.
///
/// # Safety
/// `comm` as [`handle`]; `win` NULL or a live window; `outUserPtr` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclWinGetUserPtr(
    comm: ncclComm_t,
    win: ncclWindow_t,
    outUserPtr: *mut *mut c_void,
) -> ncclResult_t {
    const F: &str = "ncclWinGetUserPtr";
    guard(F, || {
        check_ptr(outUserPtr, F, "outUserPtr")?;
        // SAFETY: forwarded from the caller.
        let r = unsafe { owned(F, comm, win.cast(), true) }?;
        // SAFETY: checked non-null and aligned; the caller passes a writable pointer.
        unsafe { outUserPtr.write(r.buff as *mut c_void) };
        Ok(())
    })
}

/// `ncclDevCommCreate` (nccl_device/core.h): not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclDevCommCreate(
    _comm: ncclComm_t,
    _reqs: *const ncclDevCommRequirements,
    _outDevComm: *mut ncclDevComm,
) -> ncclResult_t {
    const F: &str = "ncclDevCommCreate";
    guard(F, || {
        Err(Failure::unimplemented(F, "the device API (ncclDevComm)"))
    })
}

/// `ncclDevCommDestroy` (nccl_device/core.h): not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclDevCommDestroy(
    _comm: ncclComm_t,
    _devComm: *const ncclDevComm,
) -> ncclResult_t {
    const F: &str = "ncclDevCommDestroy";
    guard(F, || {
        Err(Failure::unimplemented(F, "the device API (ncclDevComm)"))
    })
}
