//! The CUDA driver, loaded at run time: whether it is there at all ([`probe`]), the devices it
//! sees (CUDA_VISIBLE_DEVICES applies, as the driver reads it), and the one helper every raw
//! call goes through ([`check`]).
//!
//! cudarc panics when a library it loads is missing, so [`probe`] asks
//! `is_culib_present()` before any other call; everything else in this backend is reached only
//! through a [`Cuda`] that `probe` returned.

use std::ffi::c_char;
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, DriverError, sys};

use crate::error::{Error, Result};

/// One GPU the driver sees, as nccl-tests' `# Using devices` lines describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// CUDA device ordinal (after CUDA_VISIBLE_DEVICES).
    pub ordinal: usize,
    /// Marketing name (`cuDeviceGetName`), e.g. "NVIDIA H200".
    pub name: String,
    /// PCI bus id, e.g. "0000:19:00.0" (lower case, as NCCL prints it).
    pub bus_id: String,
    /// Compute capability (major, minor), e.g. (9, 0).
    pub cc: (u32, u32),
    /// Streaming multiprocessors.
    pub sms: u32,
}

impl DeviceInfo {
    /// The NVRTC architecture number for this device, e.g. 90 for compute capability 9.0.
    pub(crate) fn arch(&self) -> u32 {
        self.cc.0 * 10 + self.cc.1
    }
}

/// The loaded driver and its devices.
#[derive(Debug)]
pub(crate) struct Cuda {
    /// Driver version as `cuDriverGetVersion` gives it (e.g. 13000).
    pub driver_version: i32,
    /// Every visible device, by ordinal.
    pub devices: Vec<DeviceInfo>,
}

/// Turns a driver result into ours, naming the call and the device.
///
/// Errors: [`Error::Cuda`] with the driver's error name and text.
pub(crate) fn check(r: sys::CUresult, what: impl FnOnce() -> String) -> Result<()> {
    r.result().map_err(|e| cuda_error(e, what()))
}

/// A driver error as ours.
pub(crate) fn cuda_error(e: DriverError, what: String) -> Error {
    Error::Cuda(format!("{what} failed: {e}"))
}

/// Runs `f` with this thread's stream-capture mode set to relaxed, then restores the mode.
/// A thread capturing a stream into a CUDA graph in global or thread-local mode (nccl-tests
/// `-G`, PyTorch's graphs) may not allocate memory (`cuMemAlloc`, `cuMemHostAlloc`), which a
/// captured collective needs when it is the first of its size; NCCL does the same around its
/// allocations (`cudaThreadExchangeStreamCaptureMode` in NVIDIA/nccl src/include/alloc.h).
pub(crate) fn relaxed_capture<T>(f: impl FnOnce() -> T) -> T {
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: swaps one per-thread setting with a valid mode; the old one is written back.
    let swapped =
        unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) } == sys::CUresult::CUDA_SUCCESS;
    let out = f();
    if swapped {
        // SAFETY: restores the mode this thread had, read by the exchange above.
        let _ = unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) };
    }
    out
}

/// The driver, probed once per process.
///
/// Errors: [`Error::Cuda`] saying in one line why GPUs cannot be used here — no libcuda.so.1
/// (no NVIDIA driver), a driver that fails to initialise, or no visible device — so callers can
/// print it and run on CPU ranks.
pub(crate) fn probe() -> Result<&'static Cuda> {
    static CUDA: OnceLock<std::result::Result<Cuda, String>> = OnceLock::new();
    CUDA.get_or_init(load)
        .as_ref()
        .map_err(|e| Error::Cuda(e.clone()))
}

fn load() -> std::result::Result<Cuda, String> {
    // SAFETY: only tries to dlopen the driver library; no CUDA call happens before it says yes.
    if !unsafe { sys::is_culib_present() } {
        return Err("no NVIDIA driver here (libcuda.so.1 not found)".into());
    }
    // SAFETY: cuInit has no preconditions once the library is loaded.
    let r = unsafe { sys::cuInit(0) };
    if r == sys::CUresult::CUDA_ERROR_NO_DEVICE {
        return Err("the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES)".into());
    }
    check(r, || "cuInit".into()).map_err(|e| e.to_string())?;
    let mut version = 0;
    // SAFETY: writes one int.
    let r = unsafe { sys::cuDriverGetVersion(&mut version) };
    check(r, || "cuDriverGetVersion".into()).map_err(|e| e.to_string())?;
    let mut count = 0;
    // SAFETY: writes one int.
    let r = unsafe { sys::cuDeviceGetCount(&mut count) };
    check(r, || "cuDeviceGetCount".into()).map_err(|e| e.to_string())?;
    if count == 0 {
        return Err("the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES)".into());
    }
    let devices = (0..count as usize)
        .map(describe)
        .collect::<Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    Ok(Cuda {
        driver_version: version,
        devices,
    })
}

fn attribute(dev: sys::CUdevice, a: sys::CUdevice_attribute, ordinal: usize) -> Result<u32> {
    let mut v = 0;
    // SAFETY: writes one int for a valid device handle.
    let r = unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) };
    check(r, || {
        format!("cuDeviceGetAttribute({a:?}) on GPU {ordinal}")
    })?;
    Ok(v.max(0) as u32)
}

fn describe(ordinal: usize) -> Result<DeviceInfo> {
    let mut dev = 0;
    // SAFETY: writes one device handle; the ordinal is below cuDeviceGetCount.
    let r = unsafe { sys::cuDeviceGet(&mut dev, ordinal as i32) };
    check(r, || format!("cuDeviceGet({ordinal})"))?;
    let mut name = [0 as c_char; 256];
    // SAFETY: the driver writes a NUL-terminated string of at most `len` bytes.
    let r = unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev) };
    check(r, || format!("cuDeviceGetName on GPU {ordinal}"))?;
    let mut bus = [0 as c_char; 64];
    // SAFETY: as above.
    let r = unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, dev) };
    check(r, || format!("cuDeviceGetPCIBusId on GPU {ordinal}"))?;
    use sys::CUdevice_attribute as A;
    Ok(DeviceInfo {
        ordinal,
        name: c_text(&name),
        bus_id: c_text(&bus).to_ascii_lowercase(),
        cc: (
            attribute(
                dev,
                A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                ordinal,
            )?,
            attribute(
                dev,
                A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                ordinal,
            )?,
        ),
        sms: attribute(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal)?,
    })
}

fn c_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The primary context of `ordinal` (shared with the CUDA runtime, so streams and memory of
/// PyTorch or nccl-tests are valid in it), bound to the calling thread.
///
/// Errors: [`Error::InvalidArgument`] for an ordinal the driver does not list;
/// [`Error::Cuda`] when the context cannot be retained.
pub(crate) fn context(cuda: &Cuda, ordinal: usize) -> Result<Arc<CudaContext>> {
    if ordinal >= cuda.devices.len() {
        return Err(Error::invalid_arg(format!(
            "GPU {ordinal} does not exist: this host shows {} GPU(s) (ordinals 0..{}; \
             CUDA_VISIBLE_DEVICES applies)",
            cuda.devices.len(),
            cuda.devices.len() - 1
        )));
    }
    CudaContext::new(ordinal)
        .map_err(|e| cuda_error(e, format!("retaining GPU {ordinal}'s context")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_joins_major_and_minor() {
        let d = DeviceInfo {
            ordinal: 0,
            name: "x".into(),
            bus_id: "0000:19:00.0".into(),
            cc: (9, 0),
            sms: 132,
        };
        assert_eq!(d.arch(), 90);
    }

    #[test]
    fn strings_stop_at_nul() {
        let mut b = [0 as c_char; 8];
        for (i, c) in b"H200".iter().enumerate() {
            b[i] = *c as c_char;
        }
        assert_eq!(c_text(&b), "H200");
    }

    #[test]
    fn probe_answers_without_panicking() {
        // On a host without a driver (CI) this is an error in one line; with one, devices.
        match probe() {
            Ok(c) => assert!(!c.devices.is_empty()),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("NVIDIA driver") || msg.contains("cu"), "{msg}");
                assert!(!msg.contains('\n'), "{msg}");
            }
        }
    }
}
