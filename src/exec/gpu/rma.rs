//! One-sided operations on a GPU communicator (nccl.h 2.30's `ncclPutSignal`, `ncclSignal`,
//! `ncclWaitSignal`): the one-sided kernel's arguments (`kernels/rma.cuh`) and its launch on
//! the caller's stream. A put stores straight into the peer's window as mapped in this process
//! ([`crate::comm::DeviceWindow`]) and adds one to this rank's signal word in the peer's
//! memory, which lives in the direct area the rank stores into (`SIGNAL_OFF`); a wait spins on
//! this rank's words until the counts it asked for arrived. So one-sided operations need what
//! the direct kernel needs: every rank on this host, at most [`LL_MAX_RANKS`], every direct
//! area in GPU memory (peers reached over P2P).
//!
//! One-sided operations take no operation number (they are not collectives every rank runs in
//! the same order), so `rnccl status` does not list them. A wait that outlasts the communicator's
//! timeout reports the rank it waited for through the asynchronous error, as kernels of
//! collectives do.

use cudarc::driver::sys;

use super::comm::GpuComm;
use super::program::header;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{
    LL_AREA_BYTES, LL_MAX_RANKS, RMA_SELF_SIGNAL_OFF, RmaArgs, RmaMode, SIGNAL_OFF,
};
use crate::device::cuda::{Interp, cuda_error};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::Combine;

/// Bytes a block of a put stores at least before the put uses more blocks. On 2×H200
/// (perf/capi_rma.sh) a one-block put of 256 KB took 10.0 µs one way against 5.9 at 32 KB and
/// 12.8 at 2 MB (8 blocks and a second launch for the signal): the split is not tuned yet.
const PUT_BYTES_PER_BLOCK: usize = 256 << 10;
/// Most thread blocks of a put: enough stores in flight to fill NVLink (the direct kernel
/// moves link-rate with 32-64 blocks, gpu-backend.md §B.4).
const PUT_MAX_BLOCKS: usize = 64;

/// One put: `bytes` bytes from `src` (this GPU's memory) to `dst` (the peer's window as mapped
/// here), then a signal to `peer`. `bytes` 0 is a signal alone (`ncclSignal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PutOp {
    /// Source, a device address (unused when `bytes` is 0).
    pub src: u64,
    /// Destination, a device address in this process (unused when `bytes` is 0).
    pub dst: u64,
    /// Bytes to store.
    pub bytes: usize,
    /// The rank signalled (this rank included).
    pub peer: usize,
}

/// Thread blocks of a put of `bytes` bytes: one per [`PUT_BYTES_PER_BLOCK`], 1 to
/// [`PUT_MAX_BLOCKS`].
fn put_blocks(bytes: usize) -> u32 {
    bytes.div_ceil(PUT_BYTES_PER_BLOCK).clamp(1, PUT_MAX_BLOCKS) as u32
}

impl GpuComm {
    /// Why this communicator cannot run one-sided operations (`None`: it can).
    pub(crate) fn rma_unsupported(&self) -> Option<&'static str> {
        match self.conns.ll() {
            None => Some(
                "one-sided operations (ncclPutSignal, ncclSignal, ncclWaitSignal) need every rank \
                 of the communicator on this host, at most 8 ranks; rnccl does not carry them \
                 over the network",
            ),
            Some(l) if !l.direct => Some(
                "one-sided operations need the ranks' GPUs to reach each other's memory (P2P); \
                 this communicator stages through host memory (NCCL_P2P_DISABLE or no peer \
                 access)",
            ),
            Some(_) => None,
        }
    }

    /// The signal word this rank adds to for `peer`, and the live counters of its send end
    /// with that peer (`(step, live)`, zeros for itself).
    fn signal_to(&self, peer: usize) -> Result<(u64, (u64, u64))> {
        if peer == self.rank {
            return Ok((self.rma_state.ptr() + RMA_SELF_SIGNAL_OFF as u64, (0, 0)));
        }
        let l = self.rma_peers()?;
        Ok((
            l.out[peer] + (LL_AREA_BYTES + SIGNAL_OFF) as u64,
            l.out_counts[peer],
        ))
    }

    /// The LL and direct areas, or why one-sided operations cannot run.
    fn rma_peers(&self) -> Result<&crate::transport::gpu::LlPeers> {
        if let Some(why) = self.rma_unsupported() {
            return Err(Error::invalid_usage(why));
        }
        self.conns
            .ll()
            .ok_or_else(|| Error::Internal("direct areas vanished".into()))
    }

    /// The byte module for sums, which carries the one-sided kernel, bound to this thread.
    fn rma_kernels(&self) -> Result<std::sync::Arc<Interp>> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(e, format!("binding GPU {}", self.info.ordinal)))?;
        Interp::get(
            &self.ctx,
            self.info.arch(),
            DataType::Uint8,
            Combine::Sum,
            self.kernel_cache.as_deref(),
        )
    }

    /// Arguments every one-sided launch starts from.
    fn rma_args(&self, mode: RmaMode) -> RmaArgs {
        RmaArgs {
            ctl: header(
                [0; 3],
                [0; 3],
                &ReduceSpec::copy(DataType::Uint8),
                &self.control(),
            ),
            state: self.rma_state.ptr(),
            mode: mode as u32,
            nranks: self.nranks as u32,
            ..RmaArgs::default()
        }
    }

    /// Enqueues `put` on `stream`: its bytes, then its signal (one kernel for a put of one
    /// block, else the stores, then the signal alone: kernels/rma.cuh).
    ///
    /// Errors: [`Error::InvalidUsage`] when the communicator cannot run one-sided operations
    /// ([`GpuComm::rma_unsupported`]); [`Error::Cuda`] when the kernel cannot be built or
    /// launched.
    ///
    /// # Safety
    /// `put.src` and `put.dst` hold `put.bytes` bytes of device memory valid until the stream
    /// has run the put; `stream` is a live stream of this GPU (or null).
    pub(crate) unsafe fn put(&self, put: &PutOp, stream: sys::CUstream) -> Result<()> {
        let (signal, (out_step, out_live)) = self.signal_to(put.peer)?;
        let k = self.rma_kernels()?;
        let blocks = put_blocks(put.bytes);
        let mut sig = RmaArgs {
            bytes: put.bytes as u64,
            signal,
            out_step,
            out_live,
            peer: put.peer as u32,
            ..self.rma_args(RmaMode::Signal)
        };
        if put.bytes > 0 {
            let one = blocks == 1;
            let mut store = RmaArgs {
                src: put.src,
                dst: put.dst,
                mode: RmaMode::Put as u32,
                signal: if one { signal } else { 0 },
                ..sig
            };
            // SAFETY: the signal word and counters are this communicator's (alive as long as
            // it is); the buffers are the caller's contract.
            unsafe { k.launch_rma(blocks, stream, &mut store) }?;
            if one {
                return Ok(());
            }
        }
        // SAFETY: as above.
        unsafe { k.launch_rma(1, stream, &mut sig) }
    }

    /// Enqueues on `stream` a wait for `want[r]` more signals from each rank `r` (0: none).
    ///
    /// Errors: [`Error::InvalidArgument`] for more counts than ranks; as [`GpuComm::put`].
    ///
    /// # Safety
    /// `stream` is a live stream of this GPU (or null).
    pub(crate) unsafe fn wait(&self, want: &[u64], stream: sys::CUstream) -> Result<()> {
        if want.len() > self.nranks {
            return Err(Error::invalid_arg(format!(
                "a wait for signals from {} ranks on a communicator of {}",
                want.len(),
                self.nranks
            )));
        }
        let l = self.rma_peers()?;
        let mut args = self.rma_args(RmaMode::Wait);
        for (r, &n) in want.iter().enumerate().take(LL_MAX_RANKS) {
            args.want[r] = n;
            if r == self.rank {
                args.word[r] = self.rma_state.ptr() + RMA_SELF_SIGNAL_OFF as u64;
            } else {
                args.word[r] = l.inp[r] + (LL_AREA_BYTES + SIGNAL_OFF) as u64;
                // Word 2 of the receive end's live counters marks a long wait.
                args.mark[r] = l.inp_counts[r].1 + 16;
            }
        }
        let k = self.rma_kernels()?;
        // SAFETY: every address is this communicator's (alive as long as it is).
        unsafe { k.launch_rma(1, stream, &mut args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_spread_over_blocks_up_to_the_bound() {
        assert_eq!(put_blocks(0), 1);
        assert_eq!(put_blocks(8), 1);
        assert_eq!(put_blocks(PUT_BYTES_PER_BLOCK), 1);
        assert_eq!(put_blocks(PUT_BYTES_PER_BLOCK + 1), 2);
        assert_eq!(put_blocks(1 << 30), PUT_MAX_BLOCKS as u32);
    }
}
