//! The result check of GPU ranks: the expected output, generated on the host, is copied next
//! to the output and `kernels/check.cu` counts the elements that differ (by the rule of
//! [`super::data::count_wrong`]) into a counter in device memory, read back when the stream
//! gets there.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys};

use super::gpu::upload;
use crate::device::cuda::{Checker, DeviceAlloc, check, cuda_error};
use crate::dtype::DataType;
use crate::error::{Error, Result};

/// The check's kernels and device memory of one GPU rank.
pub(super) struct DeviceCheck {
    kernels: Arc<Checker>,
    /// The expected output.
    want: DeviceAlloc,
    /// Wrong elements, a `u64`.
    counter: DeviceAlloc,
}

impl DeviceCheck {
    /// The check kernels on `ctx`'s device (compute capability `arch`; compiled on first use,
    /// cached on disk in `cache_dir`), room for `bytes` bytes of expected output, and the
    /// counter.
    ///
    /// Errors: [`Error::Cuda`] when the kernels or the memory cannot be had.
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        arch: u32,
        bytes: usize,
        cache_dir: Option<&std::path::Path>,
    ) -> Result<DeviceCheck> {
        Ok(DeviceCheck {
            kernels: Checker::get(ctx, arch, cache_dir)?,
            want: DeviceAlloc::zeroed(ctx, bytes)?,
            counter: DeviceAlloc::zeroed(ctx, 8)?,
        })
    }

    /// The number of the `count` elements of `dtype` at device address `out` that differ
    /// from `want` (host memory; `tol` as [`super::data::tolerance`] gives it), counted on the
    /// device after everything queued on `stream` (of GPU `gpu`); waits for the stream.
    ///
    /// Errors: [`Error::Internal`] when `want` exceeds the room for it; [`Error::Cuda`] when a
    /// copy, the kernel or the stream fails.
    ///
    /// # Safety
    /// `out` points to `count` elements of `dtype` in the device memory of `stream`'s context,
    /// which only operations ordered on `stream` write until this returns.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn count(
        &self,
        stream: &CudaStream,
        gpu: usize,
        dtype: DataType,
        out: u64,
        want: &[u8],
        count: usize,
        tol: f64,
    ) -> Result<u64> {
        if want.len() > self.want.len() || want.len() < count * dtype.size() {
            return Err(Error::Internal(format!(
                "{} bytes of expected output for {count} elements of {dtype} and room for {}",
                want.len(),
                self.want.len()
            )));
        }
        upload(stream, gpu, self.want.ptr(), want)?;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {gpu}")))?;
        let s = stream.cu_stream();
        // SAFETY: the counter is 8 bytes of this GPU's memory; the memset is ordered on the
        // stream before the kernel that adds to it.
        let r = unsafe { sys::cuMemsetD8Async(self.counter.ptr(), 0, 8, s) };
        check(r, || format!("clearing the check's counter on GPU {gpu}"))?;
        // SAFETY: `out` holds `count` elements (the caller's contract), the expected output as
        // many (uploaded above on the same stream, size checked), the counter 8 bytes; all
        // stay allocated until the stream is synchronised below.
        unsafe {
            self.kernels.launch(
                dtype,
                out,
                self.want.ptr(),
                count,
                tol,
                self.counter.ptr(),
                s,
            )?
        };
        let mut wrong = 0u64;
        // SAFETY: copies the 8-byte counter into `wrong` after the kernel (stream order); a
        // copy into pageable host memory returns only once it is complete, and the stream is
        // synchronised below before `wrong` is read.
        let r =
            unsafe { sys::cuMemcpyDtoHAsync_v2((&raw mut wrong).cast(), self.counter.ptr(), 8, s) };
        check(r, || format!("reading the check's counter on GPU {gpu}"))?;
        stream
            .synchronize()
            .map_err(|e| cuda_error(e, format!("waiting for GPU {gpu}'s stream")))?;
        Ok(wrong)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::BenchColl;
    use crate::bench::data::{DataSpec, count_wrong, expected_output, tolerance};
    use crate::device::cuda::{context, probe};
    use crate::redop::RedOp;

    /// Corrupts two elements of `out` (elements of `dtype`) and changes a third one within
    /// the tolerance `tol`: element 1 gets its top byte changed (a large change for every
    /// type), element 7 becomes a NaN (all ones) for floating-point types or is off by one
    /// bit for integers, and element 3 of a float buffer moves by twice `tol`.
    fn corrupt(out: &mut [u8], dtype: DataType, tol: f64) {
        let es = dtype.size();
        out[2 * es - 1] ^= 0x40;
        if dtype.is_float() {
            out[7 * es..8 * es].fill(0xff);
        } else {
            out[7 * es] ^= 1;
        }
        if dtype == DataType::Float32 {
            let v = f32::from_ne_bytes(out[12..16].try_into().unwrap());
            out[12..16].copy_from_slice(&(v + (2.0 * tol) as f32).to_ne_bytes());
        }
    }

    /// On a GPU host: the kernel counts exactly what the host counts, for every type. Without
    /// a GPU (CI) it says so and passes, unless `RNCCL_REQUIRE_GPU=1` asks for one.
    #[test]
    fn the_device_check_counts_what_the_host_check_counts() {
        let cuda = match probe() {
            Ok(c) => c,
            Err(e) => {
                let required = crate::config::Config::from_env()
                    .and_then(|c| c.flag("RNCCL_REQUIRE_GPU"))
                    .unwrap_or(false);
                assert!(
                    !required,
                    "RNCCL_REQUIRE_GPU=1 but this host has no usable GPU: {e}"
                );
                eprintln!("skipped: no GPU here ({e})");
                return;
            }
        };
        const N: usize = 1000;
        let ctx = context(cuda, 0).unwrap();
        let stream = ctx.new_stream().unwrap();
        let k = DeviceCheck::new(&ctx, cuda.devices[0].arch(), 8 * N, None).unwrap();
        let out_dev = DeviceAlloc::zeroed(&ctx, 8 * N).unwrap();
        for dtype in DataType::ALL {
            for op in [RedOp::Sum, RedOp::Avg, RedOp::Prod] {
                let spec = DataSpec {
                    coll: BenchColl::AllReduce,
                    dtype,
                    op,
                    root: 0,
                    count: N,
                    nranks: 5,
                    seed: 3,
                };
                let tol = tolerance(dtype, 5);
                let mut want = vec![0u8; N * dtype.size()];
                assert!(expected_output(&spec, 0, &mut want, N));
                let mut out = want.clone();
                corrupt(&mut out, dtype, tol);
                let host = count_wrong(dtype, tol, &out, &want, N);
                assert_eq!(host, 2, "{dtype} {op}");
                upload(&stream, 0, out_dev.ptr(), &out).unwrap();
                // SAFETY: out_dev holds N elements of every type and nothing else writes it.
                let dev = unsafe { k.count(&stream, 0, dtype, out_dev.ptr(), &want, N, tol) };
                assert_eq!(dev.unwrap(), host, "{dtype} {op}");
            }
        }
    }
}
