//! The result check of `rnccl bench -c` on the device (`kernels/check.cu`): one module per
//! device holding one kernel per data type, compiled for the device's architecture on first use
//! (NVRTC, disk-cached) and kept for the life of the process, and its launch. The kernel
//! compares an output with an expected output already in device memory and adds the number of
//! wrong elements to a 64-bit counter in device memory.

use std::ffi::CString;
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, sys};

use super::compile::cache::cubin;
use super::compile::entry::check_kernel;
use super::compile::sources::programs;
use super::driver::{check, cuda_error};
use super::loaded::Loaded;
use crate::dtype::DataType;
use crate::error::{Error, Result};

/// Threads per block (the kernels' `__launch_bounds__`).
const THREADS: u32 = 256;

/// Most blocks one check launches; a grid-stride loop covers the rest.
const MAX_BLOCKS: usize = 1024;

/// The check kernels loaded in one context, in [`DataType::ALL`]'s order.
pub(crate) struct Checker {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    funcs: [sys::CUfunction; DataType::ALL.len()],
}

// SAFETY: module and function handles are plain driver handles, valid in any thread once the
// owning context is bound (every use binds it first); the module is unloaded once, in Drop.
unsafe impl Send for Checker {}
// SAFETY: as above; launching through a shared handle is thread-safe in the driver.
unsafe impl Sync for Checker {}

impl Checker {
    /// The check kernels on `ctx`'s device (compute capability `arch`, e.g. 90), compiled on
    /// first use in this process or read from the disk cache in `cache_dir`.
    ///
    /// Errors: [`Error::Cuda`] when NVRTC is missing or fails, or the module does not load.
    pub(crate) fn get(
        ctx: &Arc<CudaContext>,
        arch: u32,
        cache_dir: Option<&std::path::Path>,
    ) -> Result<Arc<Checker>> {
        static LOADED: OnceLock<Loaded<usize, Checker>> = OnceLock::new();
        LOADED.get_or_init(Default::default).get(ctx.ordinal(), || {
            let program = programs()
                .find(|s| s.name == "check.cu")
                .ok_or_else(|| Error::Internal("kernels/check.cu is not embedded".into()))?;
            let image = cubin(program, arch, &[], cache_dir)?;
            Checker::load(ctx, &image)
        })
    }

    fn load(ctx: &Arc<CudaContext>, image: &[u8]) -> Result<Checker> {
        let gpu = ctx.ordinal();
        ctx.bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
        let mut module = std::ptr::null_mut();
        // SAFETY: `image` is a complete CUBIN (the driver copies it); the context is current.
        let r = unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) };
        check(r, || format!("loading the result check on GPU {gpu}"))?;
        let mut checker = Checker {
            ctx: ctx.clone(),
            module,
            funcs: [std::ptr::null_mut(); DataType::ALL.len()],
        };
        for (i, dtype) in DataType::ALL.into_iter().enumerate() {
            let name = check_kernel(dtype);
            let cname = CString::new(name.clone())
                .map_err(|_| Error::Internal(format!("kernel name {name:?}")))?;
            // SAFETY: the module is loaded in the current context; the driver writes a handle.
            let r =
                unsafe { sys::cuModuleGetFunction(&mut checker.funcs[i], module, cname.as_ptr()) };
            check(r, || format!("finding kernel {name} on GPU {gpu}"))?;
        }
        Ok(checker)
    }

    /// Enqueues on `stream` the comparison of `count` elements of `dtype` at device address
    /// `out` with those at `want`, adding the number of wrong ones to the `u64` at `wrong`:
    /// integers must be equal, floating-point elements within `tol × max(|want|, 4)`. Nothing
    /// is launched for `count` 0.
    ///
    /// # Safety
    /// `out` and `want` point to `count` elements of `dtype` in this context's device memory,
    /// `wrong` to a `u64` there, all valid until the kernel completes; `stream` is a live
    /// stream of this context.
    ///
    /// Errors: [`Error::Cuda`] when the launch fails.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn launch(
        &self,
        dtype: DataType,
        out: u64,
        want: u64,
        count: usize,
        tol: f64,
        wrong: u64,
        stream: sys::CUstream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let i = DataType::ALL
            .iter()
            .position(|&d| d == dtype)
            .ok_or_else(|| Error::Internal(format!("no check kernel for {dtype}")))?;
        let blocks = count.div_ceil(THREADS as usize).min(MAX_BLOCKS) as u32;
        let gpu = self.ctx.ordinal();
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
        let (mut out, mut want, mut count, mut tol, mut wrong) =
            (out, want, count as u64, tol, wrong);
        let mut params = [
            (&raw mut out).cast::<std::ffi::c_void>(),
            (&raw mut want).cast(),
            (&raw mut count).cast(),
            (&raw mut tol).cast(),
            (&raw mut wrong).cast(),
        ];
        // SAFETY: the kernel takes (const T*, const T*, u64, double, u64*), given by value in
        // that order through `params`, which outlives the call; the caller vouches for the
        // addresses and the stream.
        let r = unsafe {
            sys::cuLaunchKernel(
                self.funcs[i],
                blocks,
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
        };
        check(r, || {
            format!("launching the {dtype} result check on GPU {gpu}")
        })
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: loaded once in this context, unloaded once.
            let _ = unsafe { sys::cuModuleUnload(self.module) };
        }
    }
}
