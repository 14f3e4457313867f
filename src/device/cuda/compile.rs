// TEMPORARY type-check shim, replaced by the nvrtc branch.
pub(crate) fn interp_cubin(_: u32, _: crate::dtype::DataType) -> crate::error::Result<Vec<u8>> {
    Err(crate::error::Error::Cuda("shim".into()))
}
