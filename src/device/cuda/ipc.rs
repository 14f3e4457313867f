//! Sharing device memory with other processes through CUDA IPC handles (`cuIpcGetMemHandle`,
//! NCCL's legacy path when `NCCL_CUMEM_ENABLE=0`, gpu-backend.md §A.4): the owner exports a
//! 64-byte handle of a `cuMemAlloc` allocation, the other process maps it into its own context
//! and unmaps it when done. Peer access between the two GPUs is enabled lazily by the driver.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use cudarc::driver::{CudaContext, sys};

use super::DeviceAlloc;
use super::driver::{check, cuda_error};
use crate::error::{Error, Result};

/// Bytes of an IPC handle (`CU_IPC_HANDLE_SIZE`).
pub(crate) const HANDLE_BYTES: usize = 64;

/// The IPC handle of `mem` (the whole allocation), for another process to open.
///
/// Errors: as [`export_base`].
pub(crate) fn export(mem: &DeviceAlloc) -> Result<Vec<u8>> {
    export_base(mem.ptr(), "a GPU FIFO")
}

/// The IPC handle of the allocation whose first byte is `base` (`what` names it in errors),
/// for another process to open.
///
/// Errors: [`Error::Cuda`] when the driver refuses (memory not from `cuMemAlloc`, such as the
/// virtual memory API's `cuMemCreate`, or a platform without legacy IPC).
pub(crate) fn export_base(base: u64, what: &str) -> Result<Vec<u8>> {
    let mut h = sys::CUipcMemHandle_st {
        reserved: [0; HANDLE_BYTES],
    };
    // SAFETY: the driver checks `base` and writes the 64-byte handle.
    let r = unsafe { sys::cuIpcGetMemHandle(&mut h, base) };
    check(r, || {
        format!("exporting {what} for another process (cuIpcGetMemHandle)")
    })?;
    Ok(h.reserved.iter().map(|&c| c as u8).collect())
}

/// The export of `bytes` bytes of device memory at `addr` (`what` names it in messages): the
/// IPC handle of the allocation holding them and their offset in it, or why they cannot be
/// exported (memory not from `cuMemAlloc`/`cudaMalloc`/`ncclMemAlloc`, a range past the end
/// of its allocation), in words for the peers' logs.
pub(crate) fn export_range(
    addr: u64,
    bytes: usize,
    what: &str,
) -> std::result::Result<(Vec<u8>, u64), String> {
    let (base, size) = allocation_of(addr).map_err(|e| {
        format!("device address {addr:#x} is not memory from cuMemAlloc/cudaMalloc ({e})")
    })?;
    let offset = addr - base;
    if offset + bytes as u64 > size as u64 {
        return Err(format!(
            "the range of {bytes} bytes at {addr:#x} runs past the end of its allocation \
             ({size} bytes at {base:#x})"
        ));
    }
    let handle = export_base(base, what).map_err(|e| {
        format!(
            "its memory cannot be shared with other processes ({e}); allocate it with \
             cudaMalloc or ncclMemAlloc"
        )
    })?;
    Ok((handle, offset))
}

/// The allocation holding device address `addr`, in the current context: its first byte and
/// its size in bytes (`cuMemGetAddressRange`).
///
/// Errors: [`Error::Cuda`] when `addr` is not device memory of this context.
pub(crate) fn allocation_of(addr: u64) -> Result<(u64, usize)> {
    let (mut base, mut size) = (0, 0);
    // SAFETY: the driver checks `addr` and writes two values.
    let r = unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, addr) };
    check(r, || {
        format!("finding the allocation of device address {addr:#x} (cuMemGetAddressRange)")
    })?;
    Ok((base, size))
}

/// Another process's allocation mapped into this one; unmapped on drop.
#[derive(Debug)]
pub(crate) struct Imported {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
}

impl Imported {
    /// Maps the allocation `handle` names into `ctx`.
    ///
    /// Errors: [`Error::Remote`] for a handle of the wrong size; [`Error::Cuda`] when the
    /// driver cannot open it (a dead exporter, or GPUs that cannot reach each other).
    pub(crate) fn open(ctx: &Arc<CudaContext>, handle: &[u8]) -> Result<Imported> {
        let bytes: [u8; HANDLE_BYTES] = handle.try_into().map_err(|_| {
            Error::Remote(format!(
                "a peer sent a {}-byte CUDA IPC handle; handles have {HANDLE_BYTES}",
                handle.len()
            ))
        })?;
        let h = sys::CUipcMemHandle_st {
            reserved: bytes.map(|b| b as std::ffi::c_char),
        };
        let gpu = ctx.ordinal();
        ctx.bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
        let mut ptr = 0;
        let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: the context is current; the driver writes one device pointer.
        let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags) };
        check(r, || {
            format!("mapping a peer process's GPU FIFO on GPU {gpu} (cuIpcOpenMemHandle)")
        })?;
        Ok(Imported {
            ctx: ctx.clone(),
            ptr,
        })
    }

    /// Maps the allocation `handle` names into `ctx` once per process and context: a later
    /// call with the same handle while the first mapping lives shares it (the driver maps an
    /// allocation once per context).
    ///
    /// Errors: as [`Imported::open`].
    pub(crate) fn open_shared(ctx: &Arc<CudaContext>, handle: &[u8]) -> Result<Arc<Imported>> {
        type Open = Mutex<HashMap<(usize, Vec<u8>), Weak<Imported>>>;
        static OPEN: OnceLock<Open> = OnceLock::new();
        let mut open = OPEN
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        open.retain(|_, w| w.strong_count() > 0);
        let key = (ctx.ordinal(), handle.to_vec());
        if let Some(i) = open.get(&key).and_then(Weak::upgrade) {
            return Ok(i);
        }
        let i = Arc::new(Imported::open(ctx, handle)?);
        open.insert(key, Arc::downgrade(&i));
        Ok(i)
    }

    /// The mapped allocation's first byte in this process.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for Imported {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: opened once by cuIpcOpenMemHandle in this context, closed once; the
            // owner (GpuComm) synchronises its device before dropping its connections.
            let _ = unsafe { sys::cuIpcCloseMemHandle(self.ptr) };
        }
    }
}
