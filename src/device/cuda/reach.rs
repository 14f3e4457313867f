//! Whether a kernel on one GPU may load and store a caller's buffer in another GPU's memory of
//! this process: what the zero-copy path of a group that drives every rank asks before it hands
//! the peers' raw pointers to a kernel (`crate::exec::gpu::group_buffers`).

use cudarc::driver::sys;

/// Whether a kernel on GPU `peer` (an ordinal of this process) may load and store the device
/// memory at `ptr`, an address of this process:
/// - memory of GPU `peer` itself;
/// - memory from `cuMemAlloc`/`cudaMalloc` (legacy device memory, `CU_POINTER_ATTRIBUTE_IS_
///   LEGACY_CUDA_IPC_CAPABLE`), which peer access opens to every peer context that enabled it
///   (the communicator's GPUs of one process enable it when they connect,
///   `transport::gpu::fifo`; CUDA driver API, "Peer Context Memory Access");
/// - memory of a pool (`cuMemAllocAsync`, `CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`) whose access
///   for `peer` allows reading and writing (`cuMemPoolGetAccess`);
/// - memory mapped with `cuMemMap` whose access flags for `peer` allow reading and writing
///   (`cuMemGetAccess`).
///
/// Anything else (managed or host memory, an address the driver does not know) and any query
/// the driver refuses answer no: the caller then takes a path that copies through its own
/// buffers.
pub(crate) fn peer_reaches(ptr: u64, peer: usize) -> bool {
    use sys::CUpointer_attribute::*;
    // The ordinal and the memory type are ints and the legacy attribute a boolean, which the
    // driver writes at the start of its zeroed word (little-endian: the value reads the same);
    // the pool is a handle.
    let mut memory_type = 0u64;
    let mut ordinal = 0u64;
    let mut legacy = 0u64;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut attrs = [
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
        CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
    ];
    let mut data = [
        (&raw mut memory_type).cast::<std::ffi::c_void>(),
        (&raw mut ordinal).cast(),
        (&raw mut legacy).cast(),
        (&raw mut pool).cast(),
    ];
    // SAFETY: four attributes, each written into its own word (the first three at most 4
    // bytes into 8, the pool a handle into a handle); the driver only reads `ptr` as an
    // address, and leaves every word at its default (zero, null) for one it does not know.
    let r = unsafe {
        sys::cuPointerGetAttributes(
            attrs.len() as u32,
            attrs.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS
        || memory_type as u32 != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
    {
        return false;
    }
    if ordinal as u32 as usize == peer || legacy as u32 != 0 {
        return true;
    }
    let mut location = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: peer as i32,
    };
    let rw = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if !pool.is_null() {
        let mut flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
        // SAFETY: the driver writes the flags and reads the location; the pool handle is the
        // one it just gave for `ptr`.
        let r = unsafe { sys::cuMemPoolGetAccess(&mut flags, pool, &mut location) };
        return r == sys::CUresult::CUDA_SUCCESS && flags == rw;
    }
    let mut flags = 0u64;
    // SAFETY: the driver writes one word of flags and reads the location; `ptr` is only an
    // address to it (an unmapped one is an error, answered below).
    let r = unsafe { sys::cuMemGetAccess(&mut flags, &location, ptr) };
    r == sys::CUresult::CUDA_SUCCESS && flags == rw as u64
}

/// [`peer_reaches`] for the first and the last byte of the `bytes` bytes at `ptr`, or why a
/// kernel on GPU `peer` cannot load and store them, in words a caller can act on.
///
/// Errors: the reason, when either end is out of `peer`'s reach.
pub(crate) fn peer_reaches_range(
    ptr: u64,
    bytes: u64,
    peer: usize,
) -> std::result::Result<(), String> {
    let last = ptr.saturating_add(bytes.max(1) - 1);
    if peer_reaches(ptr, peer) && peer_reaches(last, peer) {
        return Ok(());
    }
    Err(format!(
        "GPU {peer} cannot load and store it: peer access opens memory from cudaMalloc or \
         cuMemAlloc only; memory of a pool (cudaMallocAsync) or of cuMemMap needs access for \
         GPU {peer} granted first (cuMemPoolSetAccess, cuMemSetAccess), and managed or host \
         memory is not reached"
    ))
}
