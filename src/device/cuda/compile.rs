// TEMPORARY type-check shim, replaced by the nvrtc branch.
pub(crate) fn interp_cubin(_: u32, _: crate::dtype::DataType) -> crate::error::Result<Vec<u8>> {
    Err(crate::error::Error::Cuda("shim".into()))
}

// TEMPORARY type-check shim, replaced by the nvrtc branch: kernels/check.cu (every data type in
// one program, no RNCCL_DTYPE) for sm_<arch>.
pub(crate) fn check_cubin(_: u32) -> crate::error::Result<Vec<u8>> {
    Err(crate::error::Error::Cuda("shim".into()))
}
