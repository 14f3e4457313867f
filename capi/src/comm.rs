//! Communicators: creation (`ncclGetUniqueId`, `ncclCommInit*`), the handle C holds
//! (`ncclComm_t`), queries, split, finalize/destroy/abort, and buffer registration.

use std::ffi::{CStr, c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys;
use rnccl::config::{Config, Source};
use rnccl::{AbortHandle, CommConfig, Communicator, DataType, RedOp, UniqueId};

use crate::errors::{Failure, check_ptr, guard};
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
    magic: u64,
    /// This rank, `0..nranks`.
    pub rank: usize,
    /// Number of ranks.
    pub nranks: usize,
    /// The CUDA device ordinal the rank runs on.
    pub device: Option<usize>,
    /// Raises the abort flag without waiting for an operation in flight.
    abort: Mutex<Option<AbortHandle>>,
    state: Mutex<State>,
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
    fn new(rank: usize, nranks: usize, device: Option<usize>, state: State) -> ncclComm {
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

    fn from_communicator(c: Communicator) -> ncclComm {
        let h = ncclComm::new(c.rank(), c.nranks(), c.gpu_ordinal(), State::Initializing);
        h.set_ready(c);
        h
    }

    /// Leaks a boxed handle to C.
    fn into_raw(self) -> ncclComm_t {
        Box::into_raw(Box::new(self))
    }

    /// Stores the outcome of a deferred initialisation.
    pub fn set_result(&self, r: Result<Communicator, Failure>) {
        match r {
            Ok(c) => self.set_ready(c),
            Err(f) => *lock(&self.state) = State::Failed(f),
        }
    }

    fn set_ready(&self, c: Communicator) {
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

/// A checked `ncclConfig_t`: the knobs it sets and whether calls block.
#[derive(Debug)]
pub struct ParsedConfig {
    /// Knobs: the environment and conf files, plus the config's fields that those leave unset
    /// (NCCL lets the environment override `ncclConfig_t`).
    pub knobs: Config,
    /// `blocking` (1 unless the caller set 0).
    pub blocking: bool,
}

/// The `ncclConfig_t` fields that are NCCL knobs, with the knob each sets.
const CONFIG_KNOBS: [(&str, &str); 10] = [
    ("cgaClusterSize", "NCCL_CGA_CLUSTER_SIZE"),
    ("minCTAs", "NCCL_MIN_CTAS"),
    ("maxCTAs", "NCCL_MAX_CTAS"),
    ("splitShare", "NCCL_COMM_SPLIT_SHARE_RESOURCES"),
    ("collnetEnable", "NCCL_COLLNET_ENABLE"),
    ("CTAPolicy", "NCCL_CTA_POLICY"),
    ("shrinkShare", "NCCL_COMM_SHRINK_SHARE_RESOURCES"),
    ("nvlsCTAs", "NCCL_NVLS_NCHANNELS"),
    ("nChannelsPerNetPeer", "NCCL_NCHANNELS_PER_NET_PEER"),
    (
        "nvlinkCentricSched",
        "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE",
    ),
];

/// Reads an `ncclConfig_t` as NCCL 2.28's `parseCommConfig` does: only the caller's `size`
/// bytes are read, the magic must be `NCCL_API_MAGIC`, fields newer than the caller's
/// `version` are reset to their defaults, and out-of-range values are refused. NULL means
/// every default.
///
/// Errors: `ncclInvalidArgument` for a config not made with `NCCL_CONFIG_INITIALIZER` (bad
/// magic), a misaligned pointer, or a bad field value (named).
///
/// # Safety
/// `config` must be NULL or point to readable memory of at least `config->size` bytes (or
/// `sizeof(ncclConfig_t)`, whichever is smaller), with C strings in `netName`/`commName`.
pub unsafe fn parse_config(
    config: *const ncclConfig_t,
    func: &str,
) -> Result<ParsedConfig, Failure> {
    let mut knobs = Config::from_env().map_err(|e| {
        let e = rnccl::Error::from(e);
        Failure::from_error(func, &e)
    })?;
    if config.is_null() {
        return Ok(ParsedConfig {
            knobs,
            blocking: true,
        });
    }
    check_ptr(config, func, "config")?;
    let dflt = ncclConfig_t::INITIALIZER;
    let mut c = ncclConfig_t { magic: 0, ..dflt };
    // SAFETY: `config` is aligned and non-null; its first field is the size the caller's header
    // gives, and at least that many bytes (capped at ours) are readable.
    let size = unsafe { (config as *const usize).read() }.min(std::mem::size_of::<ncclConfig_t>());
    // SAFETY: copies `size` readable bytes into a local of at least that size.
    unsafe {
        std::ptr::copy_nonoverlapping(
            config as *const u8,
            (&mut c as *mut ncclConfig_t).cast::<u8>(),
            size,
        )
    };
    if c.magic != NCCL_API_MAGIC {
        return Err(Failure::arg(
            func,
            "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER",
        ));
    }
    let v = c.version as c_int;
    if v < nccl_version(2, 14, 0) {
        c.blocking = dflt.blocking;
    }
    if v < nccl_version(2, 17, 0) {
        (c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.netName) = (
            dflt.cgaClusterSize,
            dflt.minCTAs,
            dflt.maxCTAs,
            dflt.netName,
        );
    }
    if v < nccl_version(2, 25, 0) {
        c.trafficClass = dflt.trafficClass;
    }
    if v < nccl_version(2, 27, 0) {
        (c.collnetEnable, c.CTAPolicy, c.shrinkShare, c.nvlsCTAs) = (
            dflt.collnetEnable,
            dflt.CTAPolicy,
            dflt.shrinkShare,
            dflt.nvlsCTAs,
        );
    }
    if v < nccl_version(2, 28, 0) {
        (c.nChannelsPerNetPeer, c.nvlinkCentricSched) =
            (dflt.nChannelsPerNetPeer, dflt.nvlinkCentricSched);
    }
    validate_config(&c, func)?;
    let fields = [
        c.cgaClusterSize,
        c.minCTAs,
        c.maxCTAs,
        c.splitShare,
        c.collnetEnable,
        c.CTAPolicy,
        c.shrinkShare,
        c.nvlsCTAs,
        c.nChannelsPerNetPeer,
        c.nvlinkCentricSched,
    ];
    for ((field, knob), value) in CONFIG_KNOBS.iter().zip(fields) {
        if value != NCCL_CONFIG_UNDEF_INT && knobs.setting(knob).is_none() {
            knobs.set(
                knob,
                value.to_string(),
                Source::Program(format!("ncclConfig_t.{field}")),
            );
        }
    }
    if !c.netName.is_null() && knobs.setting("NCCL_NET").is_none() {
        // SAFETY: the caller promises netName is a NUL-terminated C string.
        let name = unsafe { CStr::from_ptr(c.netName) };
        let name = name
            .to_str()
            .map_err(|_| Failure::arg(func, "config->netName is not UTF-8"))?;
        knobs.set(
            "NCCL_NET",
            name,
            Source::Program("ncclConfig_t.netName".into()),
        );
    }
    Ok(ParsedConfig {
        knobs,
        blocking: c.blocking != 0,
    })
}

/// NCCL 2.28's range checks of `ncclConfig_t` fields. One deviation: min > max CTAs is
/// checked only when both are set (NCCL compares against the unset sentinel, `INT_MIN`, and
/// so refuses a config that sets `minCTAs` alone).
fn validate_config(c: &ncclConfig_t, func: &str) -> Result<(), Failure> {
    let undef = |v: c_int| v == NCCL_CONFIG_UNDEF_INT;
    let bool_ok = |v: c_int| undef(v) || v == 0 || v == 1;
    let bad = |what: &str, v: c_int| Failure::arg(func, format!("invalid config {what} value {v}"));
    if !bool_ok(c.blocking) {
        return Err(bad("blocking", c.blocking));
    }
    if !undef(c.cgaClusterSize) && c.cgaClusterSize < 0 {
        return Err(bad("cgaClusterSize", c.cgaClusterSize));
    }
    if (!undef(c.minCTAs) && c.minCTAs <= 0)
        || (!undef(c.maxCTAs) && c.maxCTAs <= 0)
        || (!undef(c.minCTAs) && !undef(c.maxCTAs) && c.minCTAs > c.maxCTAs)
    {
        return Err(Failure::arg(
            func,
            format!(
                "invalid config min/max CTAs values {}/{}",
                c.minCTAs, c.maxCTAs
            ),
        ));
    }
    if !bool_ok(c.splitShare) {
        return Err(bad("splitShare", c.splitShare));
    }
    if !bool_ok(c.collnetEnable) {
        return Err(bad("collnetEnable", c.collnetEnable));
    }
    if !undef(c.CTAPolicy) && !(0..=2).contains(&c.CTAPolicy) {
        return Err(bad("CTAPolicy", c.CTAPolicy));
    }
    if !bool_ok(c.shrinkShare) {
        return Err(bad("shrinkShare", c.shrinkShare));
    }
    if !undef(c.nvlsCTAs) && c.nvlsCTAs <= 0 {
        return Err(bad("nvlsCTAs", c.nvlsCTAs));
    }
    if !undef(c.nChannelsPerNetPeer) && !(1..=64).contains(&c.nChannelsPerNetPeer) {
        return Err(bad("nChannelsPerNetPeer", c.nChannelsPerNetPeer));
    }
    if !bool_ok(c.nvlinkCentricSched) {
        return Err(bad("nvlinkCentricSched", c.nvlinkCentricSched));
    }
    Ok(())
}

/// A communicator initialisation waiting for `ncclGroupEnd` (or run at once outside a group).
pub struct InitJob {
    /// The handle already given to the caller.
    pub handle: *const ncclComm,
    /// Number of ranks.
    pub nranks: usize,
    /// The rendezvous.
    pub id: UniqueId,
    /// This rank.
    pub rank: usize,
    /// Knobs and device.
    pub config: CommConfig,
}

impl InitJob {
    /// Joins the communicator (blocks until every rank has).
    ///
    /// Errors: rnccl's init errors, as failures of `ncclCommInitRank`.
    pub fn run(&self) -> Result<Communicator, Failure> {
        Communicator::init_rank(self.nranks, &self.id, self.rank, self.config.clone())
            .map_err(|e| Failure::from_error("ncclCommInitRank", &e))
    }
}

/// The common part of `ncclCommInitRank*`: checks the arguments, hands out the handle, and
/// initialises now (outside a group) or at `ncclGroupEnd`.
///
/// Non-blocking configs (`blocking = 0`) are honoured by completing the initialisation before
/// returning, which NCCL allows: the call returns `ncclSuccess` (never `ncclInProgress`) and
/// `ncclCommGetAsyncError` then reports `ncclSuccess`.
///
/// # Safety
/// As [`parse_config`]; `newcomm` must be NULL or writable.
unsafe fn init_rank(
    func: &str,
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    id: &ncclUniqueId,
    rank: c_int,
    config: *const ncclConfig_t,
) -> Result<(), Failure> {
    // SAFETY: forwarded from the caller.
    let r = unsafe { init_rank_now(func, newcomm, nranks, id, rank, config) };
    if let Err(f) = &r {
        // Inside a group, the group's end fails too, as in NCCL.
        crate::group::note_failure(f);
    }
    r
}

/// [`init_rank`] without the group bookkeeping.
///
/// # Safety
/// As [`init_rank`].
unsafe fn init_rank_now(
    func: &str,
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    id: &ncclUniqueId,
    rank: c_int,
    config: *const ncclConfig_t,
) -> Result<(), Failure> {
    check_ptr(newcomm, func, "newcomm")?;
    if nranks < 1 || rank < 0 || rank >= nranks {
        return Err(Failure::arg(
            func,
            format!("invalid rank requested: {rank}/{nranks}"),
        ));
    }
    // SAFETY: forwarded from the caller.
    let parsed = unsafe { parse_config(config, func) }?;
    let id = id_from_c(id, func)?;
    let device = current_device(func)?;
    let job = InitJob {
        handle: std::ptr::null(),
        nranks: nranks as usize,
        id,
        rank: rank as usize,
        config: CommConfig::with_knobs(Arc::new(parsed.knobs)).device(device),
    };
    let h = ncclComm::new(job.rank, job.nranks, Some(device), State::Initializing);
    if crate::group::depth() > 0 {
        let raw = h.into_raw();
        crate::group::defer_init(InitJob { handle: raw, ..job });
        // SAFETY: checked writable above.
        unsafe { newcomm.write(raw) };
        return Ok(());
    }
    let c = job.run()?;
    h.set_ready(c);
    // SAFETY: checked writable above.
    unsafe { newcomm.write(h.into_raw()) };
    Ok(())
}

/// `ncclGetUniqueId`: makes a new rendezvous id (this host's bootstrap root starts listening),
/// or the fixed id of `NCCL_COMM_ID` when that is set. Needs no GPU.
///
/// Returns `ncclInvalidArgument` for NULL; `ncclSystemError` when no socket can be opened.
///
/// # Safety
/// `uniqueId` must be NULL or point to a writable `ncclUniqueId`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetUniqueId(uniqueId: *mut ncclUniqueId) -> ncclResult_t {
    const F: &str = "ncclGetUniqueId";
    guard(F, || {
        check_ptr(uniqueId, F, "uniqueId")?;
        let id = UniqueId::new().map_err(|e| Failure::from_error(F, &e))?;
        let c = id_to_c(&id, F)?;
        // SAFETY: checked non-null and aligned; the caller passes writable memory.
        unsafe { uniqueId.write(c) };
        Ok(())
    })
}

/// `ncclCommInitRank`: joins communicator `commId` as `rank` of `nranks` on the calling
/// thread's current CUDA device. Blocks until every rank joined, unless called inside a group
/// (then `ncclGroupEnd` does it).
///
/// Returns `ncclSystemError` on a host without a usable GPU, `ncclInvalidArgument` for a bad
/// rank, a NULL `comm` or a foreign id.
///
/// # Safety
/// `comm` must be NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommInitRank";
    // SAFETY: forwarded from the caller; no config.
    guard(F, || unsafe {
        init_rank(F, comm, nranks, &commId, rank, std::ptr::null())
    })
}

/// `ncclCommInitRankConfig`: [`ncclCommInitRank`] with an `ncclConfig_t` (NULL for defaults);
/// the config's knob fields apply where the environment leaves them unset (NCCL lets the
/// environment override the config). `blocking = 0` is accepted and the initialisation
/// completes before the call returns `ncclSuccess`, which NCCL allows of a non-blocking
/// communicator; `ncclCommGetAsyncError` then reports `ncclSuccess` at once. `commName` and
/// `trafficClass` are checked but not used.
///
/// # Safety
/// `comm` as [`ncclCommInitRank`]; `config` as [`parse_config`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankConfig(
    comm: *mut ncclComm_t,
    nranks: c_int,
    commId: ncclUniqueId,
    rank: c_int,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const F: &str = "ncclCommInitRankConfig";
    // SAFETY: forwarded from the caller.
    guard(F, || unsafe {
        init_rank(F, comm, nranks, &commId, rank, config)
    })
}

/// `ncclCommInitRankScalable`: initialisation from `nId` ids. With one id it is
/// [`ncclCommInitRankConfig`]; several ids (spreading the rendezvous over several roots) are
/// not implemented yet and return `ncclInvalidUsage`.
///
/// # Safety
/// `commIds` must point to `nId` readable ids; otherwise as [`ncclCommInitRankConfig`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankScalable(
    newcomm: *mut ncclComm_t,
    nranks: c_int,
    myrank: c_int,
    nId: c_int,
    commIds: *mut ncclUniqueId,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const F: &str = "ncclCommInitRankScalable";
    guard(F, || {
        if nId <= 0 || nId > nranks {
            return Err(Failure::arg(
                F,
                format!("nId = {nId} must be in 1..=nranks ({nranks})"),
            ));
        }
        check_ptr(commIds, F, "commIds")?;
        if nId > 1 {
            return Err(Failure::unimplemented(
                F,
                "initialisation from several unique ids (pass nId = 1)",
            ));
        }
        // SAFETY: checked non-null and aligned; the caller passes nId >= 1 readable ids.
        let id = unsafe { &*commIds };
        // SAFETY: forwarded from the caller.
        unsafe { init_rank(F, newcomm, nranks, id, myrank, config) }
    })
}

/// `ncclCommInitAll`: `ndev` communicators of this process, rank `i` on CUDA device
/// `devlist[i]` (devices `0..ndev` when `devlist` is NULL), written to `comm[0..ndev]`.
///
/// Returns `ncclSystemError` on a host without a usable GPU.
///
/// # Safety
/// `comm` must point to `ndev` writable handles; `devlist` NULL or `ndev` readable ints.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitAll(
    comm: *mut ncclComm_t,
    ndev: c_int,
    devlist: *const c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommInitAll";
    guard(F, || {
        check_ptr(comm, F, "comm")?;
        if ndev < 1 {
            return Err(Failure::arg(
                F,
                format!("invalid device count requested: {ndev}"),
            ));
        }
        let devs: Vec<usize> = if devlist.is_null() {
            (0..ndev as usize).collect()
        } else {
            check_ptr(devlist, F, "devlist")?;
            // SAFETY: the caller passes ndev readable ints.
            let l = unsafe { std::slice::from_raw_parts(devlist, ndev as usize) };
            l.iter()
                .map(|&d| {
                    usize::try_from(d)
                        .map_err(|_| Failure::arg(F, format!("invalid device {d} in devlist")))
                })
                .collect::<Result<_, _>>()?
        };
        rnccl::gpus().map_err(|e| Failure::no_gpu(F, &e))?;
        let comms = Communicator::init_all_devices(&devs, CommConfig::default())
            .map_err(|e| Failure::from_error(F, &e))?;
        for (i, c) in comms.into_iter().enumerate() {
            // SAFETY: i < ndev and the caller passes ndev writable handles.
            unsafe { comm.add(i).write(ncclComm::from_communicator(c).into_raw()) };
        }
        Ok(())
    })
}

/// `ncclCommFinalize`: finishes the communicator's connections cleanly (rnccl's shutdown of a
/// communicator); afterwards only queries and `ncclCommDestroy` work. Completes before
/// returning.
///
/// # Safety
/// `comm` as [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommFinalize(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommFinalize";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        let mut st = h.state();
        match std::mem::replace(&mut *st, State::Finalized) {
            State::Ready(c) => {
                drop(c);
                Ok(())
            }
            State::Finalized => Ok(()),
            other => {
                let f = not_ready(F, &other);
                *st = other;
                Err(f)
            }
        }
    })
}

/// Frees a handle after its communicator is gone.
///
/// # Safety
/// `comm` came from [`handle`] and nothing else uses it.
unsafe fn free_handle(comm: ncclComm_t) {
    // SAFETY: the caller gives up the handle; it was made by Box::into_raw.
    let mut b = unsafe { Box::from_raw(comm) };
    b.magic = 0;
    drop(b);
}

/// `ncclCommDestroy`: closes the communicator (finalizing it first if needed) and frees the
/// handle. NULL is an error, as in NCCL.
///
/// # Safety
/// `comm` as [`handle`]; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommDestroy";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if matches!(&*h.state(), State::Initializing) {
            return Err(Failure::usage(
                F,
                "the communicator is still initialising (call ncclGroupEnd first)",
            ));
        }
        let old = std::mem::replace(&mut *h.state(), State::Finalized);
        drop(old);
        // SAFETY: the caller hands the handle back.
        unsafe { free_handle(comm) };
        Ok(())
    })
}

/// `ncclCommAbort`: raises the abort flag at once (an operation in flight on another thread
/// fails fast, and so do peers waiting on this rank), then drops the connections without a
/// clean shutdown and frees the handle.
///
/// # Safety
/// `comm` as [`handle`]; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommAbort(comm: ncclComm_t) -> ncclResult_t {
    const F: &str = "ncclCommAbort";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        if let Some(a) = lock(&h.abort).as_ref() {
            a.abort();
        }
        let old = std::mem::replace(&mut *h.state(), State::Finalized);
        match old {
            State::Ready(c) => (*c).abort(),
            State::Initializing => {
                return Err(Failure::usage(
                    F,
                    "the communicator is still initialising (call ncclGroupEnd first)",
                ));
            }
            _ => {}
        }
        // SAFETY: the caller hands the handle back.
        unsafe { free_handle(comm) };
        Ok(())
    })
}

/// `ncclCommSplit`: ranks passing the same `color` form a new communicator ordered by `key`;
/// `NCCL_SPLIT_NOCOLOR` gives NULL. Every rank must call it; it blocks until they have (it is
/// not deferred by groups). The child keeps the parent's knobs; `config` is checked (NULL
/// inherits), and its knob fields are not applied to the child.
///
/// # Safety
/// `comm` as [`handle`]; `newcomm` writable; `config` as [`parse_config`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommSplit(
    comm: ncclComm_t,
    color: c_int,
    key: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const F: &str = "ncclCommSplit";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(newcomm, F, "newcomm")?;
        if color < 0 && color != NCCL_SPLIT_NOCOLOR {
            return Err(Failure::arg(F, format!("invalid color {color}")));
        }
        // SAFETY: forwarded from the caller.
        unsafe { parse_config(config, F) }?;
        let child = h.with_ready(F, |c| {
            c.split(color, key).map_err(|e| Failure::from_error(F, &e))
        })?;
        let raw = child.map_or(std::ptr::null_mut(), |c| {
            ncclComm::from_communicator(c).into_raw()
        });
        // SAFETY: checked writable.
        unsafe { newcomm.write(raw) };
        Ok(())
    })
}

/// `ncclCommShrink`: not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommShrink(
    _comm: ncclComm_t,
    _excludeRanksList: *mut c_int,
    _excludeRanksCount: c_int,
    _newcomm: *mut ncclComm_t,
    _config: *mut ncclConfig_t,
    _shrinkFlags: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommShrink";
    guard(F, || {
        Err(Failure::unimplemented(F, "shrinking a communicator"))
    })
}

/// Writes `v` to `*out` after the usual checks, for the query functions.
///
/// # Safety
/// `out` NULL or writable.
unsafe fn put(out: *mut c_int, func: &str, what: &str, v: usize) -> Result<(), Failure> {
    check_ptr(out, func, what)?;
    // SAFETY: checked non-null and aligned; the caller passes a writable int.
    unsafe { out.write(v as c_int) };
    Ok(())
}

/// `ncclCommCount`: the number of ranks, to `*count`.
///
/// # Safety
/// `comm` as [`handle`]; `count` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(comm: ncclComm_t, count: *mut c_int) -> ncclResult_t {
    const F: &str = "ncclCommCount";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        // SAFETY: forwarded from the caller.
        unsafe { put(count, F, "count", h.nranks) }
    })
}

/// `ncclCommUserRank`: this rank, to `*rank`.
///
/// # Safety
/// `comm` as [`handle`]; `rank` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(comm: ncclComm_t, rank: *mut c_int) -> ncclResult_t {
    const F: &str = "ncclCommUserRank";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        // SAFETY: forwarded from the caller.
        unsafe { put(rank, F, "rank", h.rank) }
    })
}

/// `ncclCommCuDevice`: the rank's CUDA device ordinal, to `*device`.
///
/// # Safety
/// `comm` as [`handle`]; `device` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCuDevice(comm: ncclComm_t, device: *mut c_int) -> ncclResult_t {
    const F: &str = "ncclCommCuDevice";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        let d = h
            .device
            .ok_or_else(|| Failure::usage(F, "the communicator runs on no GPU"))?;
        // SAFETY: forwarded from the caller.
        unsafe { put(device, F, "device", d) }
    })
}

/// `ncclCommGetAsyncError`: `ncclSuccess` while nothing failed after enqueueing,
/// `ncclInProgress` while a grouped initialisation waits for `ncclGroupEnd`, otherwise the
/// failure's code (its message goes to `ncclGetLastError`). When another thread is inside a
/// call on the communicator right now, only the abort flag is consulted (the error, if any,
/// shows on the next poll).
///
/// # Safety
/// `comm` as [`handle`]; `asyncError` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetAsyncError(
    comm: ncclComm_t,
    asyncError: *mut ncclResult_t,
) -> ncclResult_t {
    const F: &str = "ncclCommGetAsyncError";
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(asyncError, F, "asyncError")?;
        let found = match h.state.try_lock() {
            Ok(st) => match &*st {
                State::Ready(c) => c.async_error().err().map(|e| Failure::from_error(F, &e)),
                State::Initializing => Some(Failure::new(ncclInProgress, F, "initialising")),
                State::Finalized => None,
                State::Failed(f) => Some(f.clone()),
            },
            Err(_) => None,
        };
        let code = match found {
            Some(f) if f.code != ncclInProgress => {
                crate::errors::record(&f);
                f.code
            }
            Some(f) => f.code,
            None => ncclSuccess,
        };
        // SAFETY: checked non-null and aligned; the caller passes a writable result.
        unsafe { asyncError.write(code) };
        Ok(())
    })
}

/// What `ncclCommRegister` hands out.
struct Registration {
    comm: usize,
    buff: usize,
    size: usize,
}

/// `ncclCommRegister`: records `buff` (`size` bytes of device memory) and returns an opaque
/// handle for [`ncclCommDeregister`]. NCCL documents registration as an optimisation only
/// (collectives on unregistered buffers behave the same), and rnccl does not yet use it: its
/// kernels move data through its own buffers either way, so results are identical and only
/// NCCL's zero-copy speed-up is missing. The handle checks that deregistration matches.
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
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        check_ptr(handle_out, F, "handle")?;
        if buff.is_null() || size == 0 {
            return Err(Failure::arg(
                F,
                format!("buff {buff:p} / size {size} is not a buffer"),
            ));
        }
        let r = Box::new(Registration {
            comm: h as *const ncclComm as usize,
            buff: buff as usize,
            size,
        });
        // SAFETY: checked non-null and aligned; the caller passes a writable pointer.
        unsafe { handle_out.write(Box::into_raw(r).cast()) };
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
    guard(F, || {
        // SAFETY: forwarded from the caller.
        let h = unsafe { handle(comm, F) }?;
        let reg = handle_in.cast::<Registration>();
        check_ptr(reg, F, "handle")?;
        // SAFETY: the caller passes a live handle from ncclCommRegister (made by Box::into_raw).
        let r = unsafe { &*reg };
        if r.comm != h as *const ncclComm as usize {
            return Err(Failure::arg(
                F,
                format!(
                    "the handle of buffer {:#x} ({} bytes) was registered with another communicator",
                    r.buff, r.size
                ),
            ));
        }
        // SAFETY: as above; ownership comes back here once.
        drop(unsafe { Box::from_raw(reg) });
        Ok(())
    })
}

/// `ncclCommWindowRegister`: not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommWindowRegister(
    _comm: ncclComm_t,
    _buff: *mut c_void,
    _size: usize,
    _win: *mut ncclWindow_t,
    _winFlags: c_int,
) -> ncclResult_t {
    const F: &str = "ncclCommWindowRegister";
    guard(F, || {
        Err(Failure::unimplemented(
            F,
            "window registration (symmetric memory kernels)",
        ))
    })
}

/// `ncclCommWindowDeregister`: not implemented yet (`ncclInvalidUsage`).
///
/// # Safety
/// Reads nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommWindowDeregister(
    _comm: ncclComm_t,
    _win: ncclWindow_t,
) -> ncclResult_t {
    const F: &str = "ncclCommWindowDeregister";
    guard(F, || {
        Err(Failure::unimplemented(
            F,
            "window registration (symmetric memory kernels)",
        ))
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

/// Wraps an rnccl communicator in a C handle, for Rust programs that create communicators
/// with rnccl's API and hand them to C code (and for tests, with host communicators). Free it
/// with `ncclCommDestroy`.
pub fn comm_from_rnccl(c: Communicator) -> ncclComm_t {
    ncclComm::from_communicator(c).into_raw()
}
