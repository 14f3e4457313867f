//! rnccl's NCCL profiler plugin: loaded by NVIDIA's NCCL (2.28: profiler API v5) through
//! `NCCL_PROFILER_PLUGIN=/path/libnccl_profiler_rnccl.so` (or `=rnccl` with
//! `libnccl-profiler-rnccl.so` on the library path), it publishes every NCCL communicator rank
//! of the process on rnccl's counter page (`/dev/shm/rnccl-stats-<pid>`, see
//! `rnccl::stats::page`), so `rnccl top` shows jobs running NCCL beside jobs running rnccl.
//!
//! What NCCL reports and what the page shows:
//! - each collective or send/receive NCCL launches becomes the operation in flight (function,
//!   count, data type, algorithm, channels) until the kernel work of its last channel ends;
//! - each channel's kernel work, start to end: the channel is charged its share of the bytes
//!   the operation moves (see [`task`]), on a link of transport `nccl-kernel` to the peer when
//!   NCCL's profiler API makes it known (send/receive, or two ranks);
//! - each step of NCCL's proxy (network transfers): its bytes as NCCL reports them, on the
//!   channel and peer of its proxy operation (`nccl-net`).
//!
//! NCCL's kernels do not report waiting, so waiting time and stuck markers stay at 0 for NCCL.
//! `RNCCL_STATS=0` keeps the plugin loaded but publishes nothing. Every entry point catches
//! panics (nothing unwinds into NCCL) and accepts null handles.

pub mod abi;
pub mod context;
pub mod task;

use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

pub use abi::ProfilerV5;
use abi::StateArgs;
use abi::{EventDescr, Logger, NCCL_INTERNAL_ERROR, NCCL_INVALID_ARGUMENT, NCCL_SUCCESS};
use context::{Context, Slot};
use rnccl::Func;
use rnccl::config::Config;
use rnccl::stats::page::{Published, Registration};
use task::{Task, algo_from_nccl, dtype_from_nccl, func_from_nccl};

/// The table NCCL 2.28 looks up (`ncclProfiler_v5`).
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static ncclProfiler_v5: ProfilerV5 = ProfilerV5 {
    name: c"rnccl".as_ptr(),
    init,
    start_event,
    stop_event,
    record_event_state,
    finalize,
};

/// The events the plugin asks NCCL for: collectives, sends and receives, kernel channels, and
/// the proxy's operations and steps.
const ACTIVATION: u64 = abi::event::COLL
    | abi::event::P2P
    | abi::event::KERNEL_CH
    | abi::event::PROXY_OP
    | abi::event::PROXY_STEP;

/// What NCCL holds as the plugin's context for one communicator rank.
struct Plugin {
    ctx: Arc<Context>,
    /// The rank's place on the page (`None` with RNCCL_STATS=0).
    _page: Option<Registration>,
}

/// Runs an entry point's body, turning a panic into `ncclInternalError`.
fn entry(body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(NCCL_INTERNAL_ERROR)
}

/// A C string NCCL passed, or "" for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string alive for the call.
unsafe fn text<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        return "";
    }
    // SAFETY: non-null, NUL-terminated and alive for the call (the caller's contract).
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// The CUDA device current on this thread (NCCL initialises a communicator on its device).
fn current_device() -> Option<usize> {
    // SAFETY: only tries to load libcuda (cudarc panics on any other call when it is missing).
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    let mut dev = 0;
    // SAFETY: the driver library is present (checked above); writes one device handle.
    let r = unsafe { cudarc::driver::sys::cuCtxGetDevice(&mut dev) };
    (r == cudarc::driver::sys::CUresult::CUDA_SUCCESS).then_some(dev as usize)
}

/// `init`: a context for rank `rank` of `nranks` of communicator `comm_id`, published on the
/// process's counter page; asks NCCL for the events in [`ACTIVATION`].
///
/// # Safety
/// `context` and `mask` writable (or null: `ncclInvalidArgument`); `name` null or a C string.
unsafe extern "C" fn init(
    context: *mut *mut c_void,
    comm_id: u64,
    mask: *mut c_int,
    name: *const c_char,
    _nnodes: c_int,
    nranks: c_int,
    rank: c_int,
    log: Option<Logger>,
) -> c_int {
    entry(|| {
        if context.is_null() || mask.is_null() || nranks < 1 || rank < 0 || rank >= nranks {
            return NCCL_INVALID_ARGUMENT;
        }
        let ctx = Context::new(comm_id, rank as usize, nranks as usize, current_device());
        let source: Arc<dyn Published> = ctx.clone();
        let cfg = Config::from_env().unwrap_or_default();
        let page = rnccl::stats::page::register(&cfg, Arc::downgrade(&source));
        if let Some(log) = log {
            // SAFETY: forwarded from the caller: null or a C string.
            let name = unsafe { text(name) };
            let msg = format!(
                "rnccl profiler: communicator {comm_id:#x} {name} rank {rank}/{nranks} {}\0",
                match page {
                    Some(_) => format!(
                        "published on /dev/shm/rnccl-stats-{} for `rnccl top`",
                        std::process::id()
                    ),
                    None => "not published (RNCCL_STATS=0)".into(),
                }
            );
            // SAFETY: NCCL's logger takes a printf format; "%s" with one NUL-terminated
            // string, and file "" (NUL-terminated literals).
            unsafe {
                log(
                    abi::LOG_INFO,
                    abi::LOG_SUBSYS_INIT,
                    c"".as_ptr(),
                    0,
                    c"%s".as_ptr(),
                    msg.as_ptr(),
                )
            };
        }
        let plugin = Box::new(Plugin { ctx, _page: page });
        // SAFETY: both checked non-null; NCCL passes writable, aligned pointers.
        unsafe {
            context.write(Box::into_raw(plugin).cast());
            mask.write(ACTIVATION as c_int);
        }
        NCCL_SUCCESS
    })
}

/// The context and slot behind an event handle this plugin returned.
///
/// # Safety
/// `h` is null or a handle from [`start_event`] of a context not yet finalized.
unsafe fn slot_of<'a>(h: *mut c_void) -> Option<(&'a Context, usize)> {
    if h.is_null() {
        return None;
    }
    // SAFETY: a live handle points to a slot of a live context's pool (the caller's contract).
    let owner = unsafe { &*h.cast::<Slot>() }.owner();
    // SAFETY: a slot's owner is the context that holds it, alive as long as the slot.
    let ctx = unsafe { owner.as_ref() }?;
    Some((ctx, ctx.index_of(h.cast())?))
}

/// `startEvent`: records the event and writes its handle (null for events the plugin does not
/// follow).
///
/// # Safety
/// `context` from [`init`], not finalized; `handle` writable; `descr` null or NCCL's
/// descriptor, its strings alive for the call.
unsafe extern "C" fn start_event(
    context: *mut c_void,
    handle: *mut *mut c_void,
    descr: *mut EventDescr,
) -> c_int {
    entry(|| {
        if context.is_null() || handle.is_null() || descr.is_null() {
            return NCCL_INVALID_ARGUMENT;
        }
        // SAFETY: checked non-null; NCCL passes a writable pointer.
        unsafe { handle.write(std::ptr::null_mut()) };
        // SAFETY: a context from `init` (the caller's contract).
        let ctx = &unsafe { &*context.cast::<Plugin>() }.ctx;
        // SAFETY: checked non-null; NCCL's descriptor, read during the call only.
        let d = unsafe { &*descr };
        let parent = || {
            // SAFETY: NCCL passes as parent a handle this plugin returned, or null.
            unsafe { slot_of(d.parent_obj) }.map(|(_, i)| i)
        };
        let slot = match d.kind {
            abi::event::COLL => {
                // SAFETY: the kind says which variant of the union NCCL filled.
                let c = unsafe { d.u.coll };
                // SAFETY: NCCL's strings, alive for the call.
                let (func, dtype, algo) = unsafe { (text(c.func), text(c.datatype), text(c.algo)) };
                func_from_nccl(func).map(|func| {
                    ctx.start_task(Task {
                        func,
                        count: c.count,
                        dtype: dtype_from_nccl(dtype),
                        root_or_peer: c.root.max(0) as usize,
                        nchannels: usize::from(c.n_channels).max(1),
                        algo: algo_from_nccl(algo),
                    })
                })
            }
            abi::event::P2P => {
                // SAFETY: the kind says which variant NCCL filled.
                let p = unsafe { d.u.p2p };
                // SAFETY: NCCL's strings, alive for the call.
                let (func, dtype) = unsafe { (text(p.func), text(p.datatype)) };
                func_from_nccl(func)
                    .filter(|f| matches!(f, Func::Send | Func::Recv))
                    .map(|func| {
                        ctx.start_task(Task {
                            func,
                            count: p.count,
                            dtype: dtype_from_nccl(dtype),
                            root_or_peer: p.peer.max(0) as usize,
                            nchannels: usize::from(p.n_channels).max(1),
                            algo: "Direct",
                        })
                    })
            }
            abi::event::KERNEL_CH => {
                // SAFETY: the kind says which variant NCCL filled.
                let k = unsafe { d.u.kernel_ch };
                parent().and_then(|p| ctx.start_kernel_channel(p, k.channel_id))
            }
            abi::event::PROXY_OP => {
                // SAFETY: the kind says which variant NCCL filled.
                let o = unsafe { d.u.proxy_op };
                let p = parent().unwrap_or(usize::MAX);
                Some(ctx.start_proxy_op(p, o.channel_id, o.peer.max(0) as usize, o.is_send != 0))
            }
            abi::event::PROXY_STEP => parent().and_then(|p| ctx.start_proxy_step(p)),
            _ => None,
        };
        if let Some(i) = slot {
            // SAFETY: checked non-null above.
            unsafe { handle.write(ctx.handle(i).cast()) };
        }
        NCCL_SUCCESS
    })
}

/// `stopEvent`: the event ended (a collective's stop only means it was enqueued: it ends with
/// its last kernel channel).
///
/// # Safety
/// `h` null or a handle from [`start_event`] of a context not yet finalized.
unsafe extern "C" fn stop_event(h: *mut c_void) -> c_int {
    entry(|| {
        // SAFETY: forwarded from the caller.
        if let Some((ctx, i)) = unsafe { slot_of(h) } {
            ctx.stop(i);
        }
        NCCL_SUCCESS
    })
}

/// `recordEventState`: a proxy step's bytes (`transSize`) are noted; other states need
/// nothing (a kernel channel's end arrives with its stop).
///
/// # Safety
/// `h` as [`stop_event`]; `args` null or NCCL's arguments for the call.
unsafe extern "C" fn record_event_state(
    h: *mut c_void,
    _state: c_int,
    args: *mut StateArgs,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded from the caller.
        if let (Some((ctx, i)), false) = (unsafe { slot_of(h) }, args.is_null()) {
            // SAFETY: non-null; read as the proxy-step variant only for a step's slot.
            ctx.step_bytes(i, unsafe { (*args).trans_size });
        }
        NCCL_SUCCESS
    })
}

/// `finalize`: the communicator is gone; its rank leaves the page (the page goes with the
/// process's last rank).
///
/// # Safety
/// `context` null or from [`init`], finalized once; NCCL reports no event on it afterwards.
unsafe extern "C" fn finalize(context: *mut c_void) -> c_int {
    entry(|| {
        if !context.is_null() {
            // SAFETY: made by Box::into_raw in `init`; ownership comes back once.
            drop(unsafe { Box::from_raw(context.cast::<Plugin>()) });
        }
        NCCL_SUCCESS
    })
}
