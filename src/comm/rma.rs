//! One-sided operations (nccl.h 2.30's `ncclPutSignal`, `ncclSignal`, `ncclWaitSignal`) on a
//! GPU communicator whose ranks share a host and reach each other's GPU memory: a put stores
//! into a peer's [`DeviceWindow`] and signals it, a signal alone only counts, and a wait
//! holds the stream until the signals asked for arrived (`crate::exec::gpu::rma`, kernels/rma.cuh).
//! Nothing here waits for the GPU: the operations run on the caller's stream in call order.

use cudarc::driver::sys::CUstream;

use super::{Communicator, DeviceWindow};
use crate::error::{Error, Result};
use crate::exec::gpu::GpuComm;
use crate::exec::gpu::rma::PutOp;

/// The knob whose 0 turns one-sided operations off (`ncclConfig_t.numRmaCtx` sets it).
const NUM_RMA_CTX: &str = "NCCL_NUM_RMA_CTX";

/// How many signals [`Communicator::wait_signal`] waits for from one rank
/// (`ncclWaitSignalDesc_t` without its signal index and context, which must be 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalWait {
    /// The rank whose signals count.
    pub peer: usize,
    /// Signals to wait for, at least 1 (puts and signals of `peer` to this rank).
    pub count: u64,
}

impl Communicator {
    /// Checks the communicator can take an operation and runs `launch` with its GPU; a launch
    /// failure makes the communicator unusable, as a collective's does.
    fn one_sided(&self, f: impl FnOnce(&GpuComm) -> Result<()>) -> Result<()> {
        let core = &self.core;
        let mut st = self.state.borrow_mut();
        st.usable(core)?;
        // NCCL 2.30 src/init.cc: numRmaCtx 0 (NCCL_NUM_RMA_CTX=0) turns host RMA off.
        if core.knobs.int(NUM_RMA_CTX)? == 0 {
            return Err(Error::invalid_usage(format!(
                "one-sided operations are off for this communicator: {NUM_RMA_CTX} (or \
                 ncclConfig_t.numRmaCtx) is 0; set it to 1 or leave it unset"
            )));
        }
        let gpu = core.watch.gpu().ok_or_else(|| {
            Error::invalid_usage(
                "one-sided operations need a communicator on a GPU (CommConfig::device or \
                 Communicator::init_all_devices)",
            )
        })?;
        let r = f(gpu);
        if let Err(e @ Error::Cuda { .. }) = &r {
            st.failed.get_or_insert_with(|| e.to_string());
        }
        r
    }

    /// The rank `peer`, checked.
    fn peer_rank(&self, peer: usize) -> Result<usize> {
        if peer >= self.core.nranks {
            return Err(Error::invalid_arg(format!(
                "peer {peer} is not a rank of this communicator (ranks are 0..{})",
                self.core.nranks - 1
            )));
        }
        Ok(peer)
    }

    /// `ncclPutSignal`: stores `bytes` bytes from `src` (this GPU's memory) at byte `offset` of
    /// `peer`'s range of `window`, then adds one to `peer`'s count of this rank's signals, on
    /// `stream`. The bytes are in place when the peer's [`Communicator::wait_signal`] for that
    /// signal completes; `src` may be reused once the stream has run the put.
    ///
    /// Errors: [`Error::InvalidArgument`] for a peer out of range, a window of another
    /// communicator, bytes past the end of the peer's range or a null `src`;
    /// [`Error::InvalidUsage`] when the window's ranges are not all mapped or the communicator
    /// cannot run one-sided operations (ranks on several hosts, no P2P, `NCCL_NUM_RMA_CTX` 0:
    /// the message says which); [`Error::Cuda`] when the launch fails.
    ///
    /// # Safety
    /// `src` holds `bytes` bytes of this GPU's memory until the stream has run the put, and
    /// the peer's range is not freed before then; `stream` is a live stream of this GPU (or
    /// null, the legacy default stream).
    pub unsafe fn put_signal(
        &self,
        src: u64,
        bytes: usize,
        peer: usize,
        window: &DeviceWindow,
        offset: usize,
        stream: CUstream,
    ) -> Result<()> {
        let peer = self.peer_rank(peer)?;
        let dst = window.target(self.core.tag, peer, offset, bytes)?;
        if src == 0 && bytes > 0 {
            return Err(Error::invalid_arg(
                "the put's source is a null device pointer",
            ));
        }
        let put = PutOp {
            src,
            dst,
            bytes,
            peer,
        };
        // SAFETY: the caller's contract for `src`, the window's for `dst`, and the stream's.
        self.one_sided(|g| unsafe { g.put(&put, stream) })
    }

    /// `ncclSignal`: adds one to `peer`'s count of this rank's signals, on `stream`, after
    /// everything enqueued on `stream` before.
    ///
    /// Errors: as [`Communicator::put_signal`], less those of the window and buffer.
    ///
    /// # Safety
    /// `stream` is a live stream of this GPU (or null).
    pub unsafe fn signal(&self, peer: usize, stream: CUstream) -> Result<()> {
        let put = PutOp {
            src: 0,
            dst: 0,
            bytes: 0,
            peer: self.peer_rank(peer)?,
        };
        // SAFETY: a signal stores no bytes; the stream is the caller's contract.
        self.one_sided(|g| unsafe { g.put(&put, stream) })
    }

    /// `ncclWaitSignal`: holds `stream` until every rank of `waits` signalled this rank
    /// `count` more times than the waits before consumed (several entries for one rank add
    /// up), then consumes those signals. Waits longer than the communicator's timeout fail
    /// through [`Communicator::async_error`], naming the rank.
    ///
    /// Errors: [`Error::InvalidArgument`] for no waits, a peer out of range or a count of 0;
    /// as [`Communicator::signal`].
    ///
    /// # Safety
    /// `stream` is a live stream of this GPU (or null).
    pub unsafe fn wait_signal(&self, waits: &[SignalWait], stream: CUstream) -> Result<()> {
        if waits.is_empty() {
            return Err(Error::invalid_arg("a wait for signals from no rank"));
        }
        let mut want = vec![0u64; self.core.nranks];
        for w in waits {
            let peer = self.peer_rank(w.peer)?;
            if w.count == 0 {
                return Err(Error::invalid_arg(format!(
                    "a wait for 0 signals from rank {peer} (counts start at 1)"
                )));
            }
            want[peer] += w.count;
        }
        // SAFETY: the stream is the caller's contract.
        self.one_sided(|g| unsafe { g.wait(&want, stream) })
    }
}
