//! NVRTC, CUDA's run-time compiler, loaded when first needed (cudarc's `dynamic-loading`): one
//! program of `kernels/` in, a CUBIN for one GPU architecture out. A host without libnvrtc gets
//! an error saying how to install it, never a panic: nothing here calls into NVRTC before
//! [`require`] found it.

use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::OnceLock;

use cudarc::nvrtc::sys::{self, nvrtcProgram, nvrtcResult};

use super::cuda_include::cuda_include_dir;
use super::sources::{self, Source};
use crate::error::{Error, Result};

/// Fails unless libnvrtc (CUDA 13's `libnvrtc.so.13`, or another name cudarc tries) can be
/// loaded. Looked for once per process.
///
/// Errors: [`Error::Cuda`] saying the library was not found and how to get it.
pub(crate) fn require() -> Result<()> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen the candidate names (running a found
    // library's initialisers, which have no preconditions) and closes what it opened.
    if *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() }) {
        return Ok(());
    }
    Err(Error::Cuda(
        "libnvrtc.so.13 (NVRTC, CUDA 13's run-time compiler, which builds rnccl's GPU kernels) \
         was not found. Install a CUDA 13 toolkit, or `pip install nvidia-cuda-nvrtc==13.0.*`, \
         and add the folder holding libnvrtc.so.13 (the toolkit's lib64, or the wheel's \
         nvidia/cu13/lib) to LD_LIBRARY_PATH"
            .into(),
    ))
}

/// The NVRTC version loaded, as (major, minor), e.g. (13, 0). Asked once per process.
///
/// Errors: [`Error::Cuda`] when libnvrtc is missing ([`require`]) or `nvrtcVersion` fails.
pub(crate) fn version() -> Result<(i32, i32)> {
    static VERSION: OnceLock<(i32, i32)> = OnceLock::new();
    require()?;
    if let Some(v) = VERSION.get() {
        return Ok(*v);
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: libnvrtc is present (`require`); both pointers are to live, writable c_ints.
    let result = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    check(result, "nvrtcVersion")?;
    Ok(*VERSION.get_or_init(|| (major, minor)))
}

/// The NVRTC options every program is compiled with for `sm_<arch>` (e.g. 90 for H100): a
/// CUBIN for that architecture, C++17, functions on the device unless marked otherwise, line
/// numbers for profilers, and IEEE arithmetic (no fast math, no fused multiply-add, so results
/// match the CPU backend's separately rounded multiply and add), with CUDA's headers found by
/// [`cuda_include_dir`], then `defines` (`NAME=VALUE` each, passed as `-D`: which variant of
/// the program to build, e.g. `RNCCL_DTYPE=7`).
///
/// Errors: [`Error::Cuda`] when libnvrtc or CUDA's headers are missing.
pub(crate) fn options(arch: u32, defines: &[String]) -> Result<Vec<String>> {
    let include = cuda_include_dir()?;
    Ok([
        format!("--gpu-architecture=sm_{arch}"),
        "-std=c++17".into(),
        "-default-device".into(),
        "-lineinfo".into(),
        "--fmad=false".into(),
        format!("--include-path={}", include.display()),
    ]
    .into_iter()
    .chain(defines.iter().map(|d| format!("-D{d}")))
    .collect())
}

/// Compiles `src` (a program of `kernels/`, with every header of `kernels/` available to its
/// `#include "..."`), built with `defines` (see [`options`]), to a CUBIN for `sm_<arch>` (e.g.
/// 80 for A100, 90 for H100). A log with warnings only is logged, not returned. Compiles of
/// different programs may run side by side on several threads: NVRTC is thread-safe (NVIDIA's cccl pull request 9998, 2026: "NVRTC is
/// thread-safe"); two interpreter modules on this project's 2-core VM built in 5.2 s together
/// against 8.6 s one after the other, byte for byte the same.
///
/// Errors: [`Error::Cuda`] when libnvrtc or CUDA's headers are missing, and when NVRTC refuses
/// the program or the options (an architecture it does not know), with NVRTC's full log;
/// [`Error::Internal`] for a kernel file holding a NUL byte.
pub(crate) fn compile(src: &Source, arch: u32, defines: &[String]) -> Result<Vec<u8>> {
    compile_with(src, arch, options(arch, defines)?)
}

/// [`compile`] without device-code optimisation: `-G` (device debug) in place of `-lineinfo`,
/// which ptxas ignores beside it. The same front end, so the same errors for bad source, and
/// the same kernels, in about a quarter of the time (the interpreter's module of one type with
/// every reduction for sm_90: 5.2 s against 20 s on this project's 2-core VM). For the tests
/// that build every variant of a program; the optimised build is tested on some of them.
#[cfg(test)]
pub(crate) fn compile_unoptimized(src: &Source, arch: u32, defines: &[String]) -> Result<Vec<u8>> {
    let mut options = options(arch, defines)?;
    options.retain(|o| o != "-lineinfo");
    options.push("-G".into());
    compile_with(src, arch, options)
}

/// [`compile`] with `options` (from [`options`]) in full.
fn compile_with(src: &Source, arch: u32, options: Vec<String>) -> Result<Vec<u8>> {
    let (major, minor) = version()?;
    let program = Program::new(src)?;
    let c_options = options
        .iter()
        .map(|o| c_string(o, "an NVRTC option"))
        .collect::<Result<Vec<_>>>()?;
    let pointers: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
    let count = c_int::try_from(pointers.len())
        .map_err(|_| Error::Internal("too many NVRTC options".into()))?;
    // SAFETY: `program.0` is a live program (`Program::new`); `pointers` holds `count` pointers
    // to NUL-terminated strings that `c_options` keeps alive for the call.
    let result = unsafe { sys::nvrtcCompileProgram(program.0, count, pointers.as_ptr()) };
    let log = program.log()?;
    if result != nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::Cuda(format!(
            "NVRTC {major}.{minor} could not compile kernels/{} for sm_{arch} ({}; options {}):\n{}\n\
             An architecture this NVRTC does not know needs a newer NVRTC; an error in kernels/ is \
             a bug in rnccl: please report it with this message.",
            src.name,
            error_string(result),
            options.join(" "),
            log.trim_end()
        )));
    }
    if !log.trim().is_empty() {
        tracing::warn!(
            target: "rnccl::init",
            "NVRTC {major}.{minor} compiled kernels/{} for sm_{arch} with warnings:\n{}",
            src.name,
            log.trim_end()
        );
    }
    program.cubin()
}

/// An NVRTC program, destroyed on drop.
struct Program(nvrtcProgram);

impl Program {
    /// Creates the program for `src` with every header of `kernels/` under its file name.
    ///
    /// Errors: [`Error::Cuda`] when NVRTC refuses; [`Error::Internal`] for a NUL byte in a file.
    fn new(src: &Source) -> Result<Program> {
        let text = c_string(src.text, src.name)?;
        let name = c_string(src.name, src.name)?;
        let headers: Vec<(CString, CString)> = sources::headers()
            .map(|h| Ok((c_string(h.text, h.name)?, c_string(h.name, h.name)?)))
            .collect::<Result<_>>()?;
        let texts: Vec<*const c_char> = headers.iter().map(|h| h.0.as_ptr()).collect();
        let names: Vec<*const c_char> = headers.iter().map(|h| h.1.as_ptr()).collect();
        let count = c_int::try_from(headers.len())
            .map_err(|_| Error::Internal("too many kernel headers".into()))?;
        let mut program: nvrtcProgram = std::ptr::null_mut();
        // SAFETY: every pointer is to a NUL-terminated string kept alive by `text`, `name` and
        // `headers` for the call (NVRTC copies them); `texts` and `names` hold `count` entries;
        // `program` is a live out-pointer. libnvrtc is loaded: `compile` called `options`,
        // which called `require`.
        let result = unsafe {
            sys::nvrtcCreateProgram(
                &mut program,
                text.as_ptr(),
                name.as_ptr(),
                count,
                texts.as_ptr(),
                names.as_ptr(),
            )
        };
        check(
            result,
            &format!("nvrtcCreateProgram for kernels/{}", src.name),
        )?;
        Ok(Program(program))
    }

    /// The compile log (errors and warnings), empty when NVRTC had nothing to say.
    ///
    /// Errors: [`Error::Cuda`] when NVRTC cannot return it.
    fn log(&self) -> Result<String> {
        let mut size = 0usize;
        // SAFETY: `self.0` is a live program; `size` is a live out-pointer.
        let result = unsafe { sys::nvrtcGetProgramLogSize(self.0, &mut size) };
        check(result, "nvrtcGetProgramLogSize")?;
        let mut log = vec![0u8; size.max(1)];
        // SAFETY: `log` has room for the `size` bytes (NUL included) NVRTC said it writes.
        let result = unsafe { sys::nvrtcGetProgramLog(self.0, log.as_mut_ptr().cast()) };
        check(result, "nvrtcGetProgramLog")?;
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        Ok(String::from_utf8_lossy(&log[..end]).into_owned())
    }

    /// The CUBIN of a compiled program.
    ///
    /// Errors: [`Error::Cuda`] when NVRTC cannot return it.
    fn cubin(&self) -> Result<Vec<u8>> {
        let mut size = 0usize;
        // SAFETY: `self.0` is a live, compiled program; `size` is a live out-pointer.
        let result = unsafe { sys::nvrtcGetCUBINSize(self.0, &mut size) };
        check(result, "nvrtcGetCUBINSize")?;
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` has room for the `size` bytes NVRTC said the CUBIN takes.
        let result = unsafe { sys::nvrtcGetCUBIN(self.0, cubin.as_mut_ptr().cast()) };
        check(result, "nvrtcGetCUBIN")?;
        Ok(cubin)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from a successful nvrtcCreateProgram and is destroyed only here.
        // A failure to free it leaves nothing to do, so the result is not looked at.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

/// `Ok` for `NVRTC_SUCCESS`, else an [`Error::Cuda`] naming `call` and NVRTC's reason.
fn check(result: nvrtcResult, call: &str) -> Result<()> {
    if result == nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    Err(Error::Cuda(format!(
        "{call} failed: {}",
        error_string(result)
    )))
}

/// NVRTC's name for `result` (e.g. `NVRTC_ERROR_COMPILATION`).
fn error_string(result: nvrtcResult) -> String {
    // SAFETY: results only come from NVRTC calls, so libnvrtc is loaded; the function returns a
    // pointer to a static NUL-terminated string (or null, handled below).
    let s = unsafe { sys::nvrtcGetErrorString(result) };
    if s.is_null() {
        return format!("{result:?}");
    }
    // SAFETY: non-null, NUL-terminated and static (NVRTC's own table); copied at once.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// `s` as a C string for NVRTC.
///
/// Errors: [`Error::Internal`] when `s` (from `what`) holds a NUL byte.
fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::Internal(format!("{what} holds a NUL byte")))
}
