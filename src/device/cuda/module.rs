//! The step interpreter (`kernels/interp.cu`) loaded into a device's context: one module per
//! (device, data type, reduction), compiled for the device's architecture on first use (NVRTC,
//! disk-cached) and kept for the life of the process.

use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, sys};

use super::abi::{LlArgs, RmaArgs, THREADS};
use super::compile::cache::cubin;
use super::compile::entry::{
    FP8_MIN_ARCH, RMA_KERNEL, combine_code, direct_kernel, interp_kernel, ll_kernel,
};
use super::compile::sources::programs;
use super::driver::{check, cuda_error};
use super::loaded::Loaded;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::Combine;

/// Most threads [`Interp::preload`] builds modules on: each NVRTC build of the interpreter
/// holds a few hundred MB, so this bounds the memory a preload takes on a many-core host.
pub(crate) const PRELOAD_THREADS: usize = 8;

/// The kernels that take [`LlArgs`] and store into the peers' areas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerKernel {
    /// The one-shot LL all-reduce (kernels/ll.cuh).
    Ll,
    /// The direct kernel (kernels/direct.cuh): two-shot all-reduce, reduce-scatter or
    /// all-gather, as `LlArgs::mode` says.
    Direct,
}

/// The interpreter's kernels for one data type and one reduction, loaded in one context.
pub(crate) struct Interp {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    /// The step interpreter (kernels/interp.cu).
    func: sys::CUfunction,
    /// The one-shot LL all-reduce (kernels/ll.cuh).
    ll: sys::CUfunction,
    /// The direct kernel (kernels/direct.cuh).
    direct: sys::CUfunction,
    /// The one-sided kernel (kernels/rma.cuh), in the byte module for sums only (null
    /// elsewhere).
    rma: sys::CUfunction,
    /// Blocks of the LL or direct kernel (whichever is fewer) one multiprocessor keeps
    /// resident at once ([`Interp::peer_blocks_per_sm`]).
    peer_blocks_per_sm: usize,
}

/// The defines that build `kernels/interp.cu`'s module for `dtype` and `combine`
/// (`RNCCL_DTYPE`: nccl.h's `ncclDataType_t` value; `RNCCL_COMBINE`: [`combine_code`]).
pub(crate) fn module_defines(dtype: DataType, combine: Combine) -> Vec<String> {
    vec![
        format!("RNCCL_DTYPE={}", dtype as u32),
        format!("RNCCL_COMBINE={}", combine_code(combine)),
    ]
}

// SAFETY: module and function handles are plain driver handles, valid in any thread once the
// owning context is bound (every use binds it first); the module is unloaded once, in Drop.
unsafe impl Send for Interp {}
// SAFETY: as above; launching through a shared handle is thread-safe in the driver.
unsafe impl Sync for Interp {}

impl Interp {
    /// The interpreter for `dtype` and `combine` on `ctx`'s device (compute capability
    /// `arch`, e.g. 90), compiled on first use in this process (only those kernels:
    /// [`module_defines`]), or read from the disk cache in `cache_dir` (see
    /// [`super::compile::cache::cache_dir`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for FP8 before sm_90; [`Error::Cuda`] when NVRTC is
    /// missing or fails, or the module does not load.
    pub(crate) fn get(
        ctx: &Arc<CudaContext>,
        arch: u32,
        dtype: DataType,
        combine: Combine,
        cache_dir: Option<&std::path::Path>,
    ) -> Result<Arc<Interp>> {
        static LOADED: OnceLock<Loaded<(usize, DataType, Combine), Interp>> = OnceLock::new();
        if dtype.fp8().is_some() && arch < FP8_MIN_ARCH {
            return Err(Error::invalid_arg(format!(
                "{dtype} reductions need a GPU of compute capability 9.0 (Hopper) or later, as in \
                 NCCL; GPU {} is sm_{arch} (FP8 collectives that only move data run anywhere)",
                ctx.ordinal()
            )));
        }
        let key = (ctx.ordinal(), dtype, combine);
        LOADED.get_or_init(Default::default).get(key, || {
            let program = programs()
                .find(|s| s.name == "interp.cu")
                .ok_or_else(|| Error::Internal("kernels/interp.cu is not embedded".into()))?;
            let image = cubin(program, arch, &module_defines(dtype, combine), cache_dir)?;
            Interp::load(ctx, &image, dtype, combine)
        })
    }

    /// Loads the module of every `(dtype, combine)` of `keys` on `ctx`'s device (as
    /// [`Interp::get`]), building those not built yet side by side on up to
    /// [`PRELOAD_THREADS`] threads (an NVRTC build of one module takes seconds, and a fresh
    /// cache lacks dozens); returns the fewest [`Interp::peer_blocks_per_sm`] among them
    /// (`usize::MAX` for no keys).
    ///
    /// Errors: the first failure of [`Interp::get`]; [`Error::Internal`] when a build panicked.
    pub(crate) fn preload(
        ctx: &Arc<CudaContext>,
        arch: u32,
        keys: &[(DataType, Combine)],
        cache_dir: Option<&std::path::Path>,
    ) -> Result<usize> {
        let next = AtomicUsize::new(0);
        // Each worker takes the next key until none is left, and keeps the fewest.
        let work = || -> Result<usize> {
            let mut per_sm = usize::MAX;
            while let Some(&(dtype, combine)) = keys.get(next.fetch_add(1, Ordering::Relaxed)) {
                let m = Interp::get(ctx, arch, dtype, combine, cache_dir).inspect_err(|_| {
                    // The others stop after their current build.
                    next.store(keys.len(), Ordering::Relaxed);
                })?;
                per_sm = per_sm.min(m.peer_blocks_per_sm());
            }
            Ok(per_sm)
        };
        let helpers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(PRELOAD_THREADS)
            .min(keys.len())
            .saturating_sub(1);
        std::thread::scope(|s| {
            // A thread the system refuses leaves its share to the others and this one.
            let spawned: Vec<_> = (0..helpers)
                .filter_map(|i| {
                    std::thread::Builder::new()
                        .name(format!("rnccl-build-{i}"))
                        .spawn_scoped(s, work)
                        .ok()
                })
                .collect();
            let mut fewest = work();
            for h in spawned {
                let r = h.join().unwrap_or_else(|_| {
                    Err(Error::Internal("building a kernel module panicked".into()))
                });
                fewest = match (fewest, r) {
                    (Ok(a), Ok(b)) => Ok(a.min(b)),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
            }
            fewest
        })
    }

    fn load(
        ctx: &Arc<CudaContext>,
        image: &[u8],
        dtype: DataType,
        combine: Combine,
    ) -> Result<Interp> {
        let gpu = ctx.ordinal();
        ctx.bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
        let mut module = std::ptr::null_mut();
        // The first collective of a data type may come while the caller captures a graph.
        let r = super::relaxed_capture(|| {
            // SAFETY: `image` is a complete CUBIN (the driver copies it); the context is
            // current.
            unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) }
        });
        check(r, || {
            format!("loading the {dtype} {combine:?} interpreter on GPU {gpu}")
        })?;
        let mut interp = Interp {
            ctx: ctx.clone(),
            module,
            func: std::ptr::null_mut(),
            ll: std::ptr::null_mut(),
            direct: std::ptr::null_mut(),
            rma: std::ptr::null_mut(),
            peer_blocks_per_sm: 0,
        };
        // From here on Drop unloads the module, whichever lookup fails.
        interp.func = function(module, &interp_kernel(dtype, combine), gpu)?;
        interp.ll = function(module, &ll_kernel(dtype, combine), gpu)?;
        interp.direct = function(module, &direct_kernel(dtype, combine), gpu)?;
        if (dtype, combine) == (DataType::Uint8, Combine::Sum) {
            interp.rma = function(module, RMA_KERNEL, gpu)?;
        }
        interp.peer_blocks_per_sm =
            resident_per_sm(interp.ll, gpu)?.min(resident_per_sm(interp.direct, gpu)?);
        Ok(interp)
    }

    /// Blocks of [`THREADS`] threads of the kernels that wait for their peers' blocks (the LL
    /// and direct kernels, the fewer of the two) that one multiprocessor keeps resident at
    /// once, as `cuOccupancyMaxActiveBlocksPerMultiprocessor` gives it for this module (its
    /// register count sets it). Ranks sharing a GPU need all their blocks resident together:
    /// a block waits for the same block of every peer.
    pub(crate) fn peer_blocks_per_sm(&self) -> usize {
        self.peer_blocks_per_sm
    }

    /// Launches the interpreter on `stream`: `lanes` blocks of [`THREADS`] threads
    /// running the program at device address `program` for operation number `seq`
    /// (kernels/program.cuh, operation tracking).
    ///
    /// # Safety
    /// `stream` is a live stream of this context (or null, the legacy default stream);
    /// `program` is a well-formed program (`kernels/program.cuh`) whose every address stays
    /// valid until the kernel completes.
    ///
    /// Errors: [`Error::Cuda`] when the launch fails.
    pub(crate) unsafe fn launch(
        &self,
        lanes: u32,
        stream: sys::CUstream,
        program: u64,
        seq: u64,
    ) -> Result<()> {
        let (mut arg, mut seq) = (program, seq);
        let mut params = [
            (&raw mut arg).cast::<std::ffi::c_void>(),
            (&raw mut seq).cast::<std::ffi::c_void>(),
        ];
        // SAFETY: the function takes a pointer and a u64, given by value through `params`;
        // the caller vouches for the stream and the program.
        check(
            unsafe {
                sys::cuLaunchKernel(
                    self.func,
                    lanes.max(1),
                    1,
                    1,
                    THREADS,
                    1,
                    1,
                    0,
                    stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            || format!("launching {} blocks on GPU {}", lanes, self.ctx.ordinal()),
        )
    }

    /// Launches `kernel` over the peers' areas on `stream`:
    /// `blocks` blocks of [`THREADS`] threads, given `args` (copied into the launch by the
    /// driver).
    ///
    /// # Safety
    /// `stream` is a live stream of this context (or null); `args` comes from
    /// `crate::exec::gpu::ll::encode`, and its addresses stay valid until the kernel completes.
    ///
    /// Errors: [`Error::Cuda`] when the launch fails.
    pub(crate) unsafe fn launch_peers(
        &self,
        kernel: PeerKernel,
        blocks: u32,
        stream: sys::CUstream,
        args: &mut LlArgs,
    ) -> Result<()> {
        let (func, what) = match kernel {
            PeerKernel::Ll => (self.ll, "the LL all-reduce"),
            PeerKernel::Direct => (self.direct, "the direct kernel"),
        };
        let mut params = [(args as *mut LlArgs).cast::<std::ffi::c_void>()];
        // SAFETY: the function takes one `LlArgs` by value, which `params` points to (the
        // struct mirrors the kernel's, `abi`); the caller vouches for the stream and the
        // addresses inside.
        check(
            unsafe {
                sys::cuLaunchKernel(
                    func,
                    blocks.max(1),
                    1,
                    1,
                    THREADS,
                    1,
                    1,
                    0,
                    stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            || format!("launching {what} on GPU {}", self.ctx.ordinal()),
        )
    }

    /// Launches the one-sided kernel (kernels/rma.cuh) on `stream`: `blocks` blocks of
    /// [`THREADS`] threads, given `args` (copied into the launch by the driver).
    ///
    /// # Safety
    /// `stream` is a live stream of this context (or null); `args` comes from
    /// `crate::exec::gpu::rma`, and its addresses stay valid until the kernel completes.
    ///
    /// Errors: [`Error::Internal`] on another module than the byte module for sums (which alone
    /// carries the kernel); [`Error::Cuda`] when the launch fails.
    pub(crate) unsafe fn launch_rma(
        &self,
        blocks: u32,
        stream: sys::CUstream,
        args: &mut RmaArgs,
    ) -> Result<()> {
        if self.rma.is_null() {
            return Err(Error::Internal(
                "the one-sided kernel lives in the uint8 sum module".into(),
            ));
        }
        let mut params = [(args as *mut RmaArgs).cast::<std::ffi::c_void>()];
        // SAFETY: the function takes one `RmaArgs` by value, which `params` points to (the
        // struct mirrors the kernel's, `abi`); the caller vouches for the stream and the
        // addresses inside.
        check(
            unsafe {
                sys::cuLaunchKernel(
                    self.rma,
                    blocks.max(1),
                    1,
                    1,
                    THREADS,
                    1,
                    1,
                    0,
                    stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            || {
                format!(
                    "launching the one-sided kernel on GPU {}",
                    self.ctx.ordinal()
                )
            },
        )
    }
}

/// Kernel `name` of `module` (loaded in the current context), loaded now.
///
/// Errors: [`Error::Cuda`] when the module lacks it or it cannot be loaded.
fn function(module: sys::CUmodule, name: &str, gpu: usize) -> Result<sys::CUfunction> {
    let cname = CString::new(name).map_err(|_| Error::Internal(format!("kernel name {name:?}")))?;
    let mut f = std::ptr::null_mut();
    // SAFETY: the module is loaded in the current context; the driver writes a handle.
    let r = unsafe { sys::cuModuleGetFunction(&mut f, module, cname.as_ptr()) };
    check(r, || format!("finding kernel {name} on GPU {gpu}"))?;
    // Load the function now (CUDA loads lazily by default): a lazy load at the first launch may
    // wait for the kernels already running, which on a GPU shared by two ranks include the
    // peer's kernel waiting for this one.
    let mut regs = 0;
    let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS;
    // SAFETY: a valid function handle of the current context; writes one int.
    let r = unsafe { sys::cuFuncGetAttribute(&mut regs, attr, f) };
    check(r, || format!("loading kernel {name} on GPU {gpu}"))?;
    Ok(f)
}

/// Blocks of [`THREADS`] threads of `func` (no dynamic shared memory) that one multiprocessor
/// keeps resident at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`), at least 1.
///
/// Errors: [`Error::Cuda`] when the driver cannot tell.
fn resident_per_sm(func: sys::CUfunction, gpu: usize) -> Result<usize> {
    let mut blocks = 0;
    // SAFETY: a loaded function of the current context; the driver writes one int.
    let r = unsafe {
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut blocks, func, THREADS as i32, 0)
    };
    check(r, || {
        format!("asking GPU {gpu} how many kernel blocks stay resident")
    })?;
    Ok(usize::try_from(blocks).unwrap_or(0).max(1))
}

impl Drop for Interp {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: loaded once in this context, unloaded once.
            let _ = unsafe { sys::cuModuleUnload(self.module) };
        }
    }
}
