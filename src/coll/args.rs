//! One operation as the caller asked for it, with nccl.h's buffer conventions.

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::func::Func;
use crate::redop::RedOp;

/// One operation as the caller asked for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollArgs {
    /// The function.
    pub func: Func,
    /// Element count, with nccl.h's meaning for the function.
    pub count: usize,
    /// Element type.
    pub dtype: DataType,
    /// Reduction (ignored by non-reducing functions).
    pub op: RedOp,
    /// Root rank for rooted functions; the peer for Send/Recv.
    pub root: usize,
    /// The send data already sits at its in-place position in the output buffer.
    pub in_place: bool,
}

impl CollArgs {
    /// Checks counts, root and peer against `nranks`.
    ///
    /// Errors: [`Error::InvalidArgument`] saying which argument is wrong and its valid range.
    pub fn validate(&self, nranks: usize) -> Result<()> {
        let f = self.func.nccl_name();
        let esize = self.dtype.size();
        for (what, elems) in [
            ("input", self.func.input_elems(self.count, nranks)),
            ("output", self.func.output_elems(self.count, nranks)),
        ] {
            let ok = elems
                .and_then(|e| e.checked_mul(esize))
                .is_some_and(|b| b <= isize::MAX as usize);
            if !ok {
                return Err(Error::invalid_arg(format!(
                    "{f}: count {} of {} on {nranks} ranks overflows the {what} buffer size",
                    self.count, self.dtype
                )));
            }
        }
        if (self.func.rooted() || matches!(self.func, Func::Send | Func::Recv))
            && self.root >= nranks
        {
            let what = if matches!(self.func, Func::Send | Func::Recv) {
                "peer"
            } else {
                "root"
            };
            return Err(Error::invalid_arg(format!(
                "{f}: {what} {} is not a rank of this communicator (ranks are 0..{})",
                self.root,
                nranks - 1
            )));
        }
        Ok(())
    }

    /// Bytes of the input buffer.
    pub fn input_bytes(&self, nranks: usize) -> usize {
        self.func.input_elems(self.count, nranks).unwrap_or(0) * self.dtype.size()
    }

    /// Bytes of the output buffer.
    pub fn output_bytes(&self, nranks: usize) -> usize {
        self.func.output_elems(self.count, nranks).unwrap_or(0) * self.dtype.size()
    }
}

/// Where input and output lie inside the single buffer of an in-place operation (nccl.h's
/// in-place rules: AllGather's input is block `rank` of the output, ReduceScatter's output is
/// block `rank` of the input, Gather's input is block `root` of the root's output, Scatter's
/// output is block `root` of the root's input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    /// Bytes of the one buffer.
    pub buf_bytes: usize,
    /// Input byte range (offset, length) in the buffer.
    pub input: (usize, usize),
    /// Output byte range (offset, length) in the buffer.
    pub output: (usize, usize),
}

impl CollArgs {
    /// The in-place layout for this rank. In-place AlltoAll reads a snapshot of the buffer taken
    /// when the operation starts (NCCL has no in-place AlltoAll; rnccl makes it well defined).
    ///
    /// Errors: none today; the `Result` leaves room for functions without an in-place form.
    pub fn in_place_layout(&self, rank: usize, nranks: usize) -> Result<InPlace> {
        let blk = self.count * self.dtype.size();
        let all = blk * nranks;
        let l = |buf_bytes, input, output| {
            Ok(InPlace {
                buf_bytes,
                input,
                output,
            })
        };
        match self.func {
            Func::AllReduce | Func::Broadcast | Func::Reduce => l(blk, (0, blk), (0, blk)),
            Func::AllGather => l(all, (rank * blk, blk), (0, all)),
            Func::ReduceScatter => l(all, (0, all), (rank * blk, blk)),
            Func::Gather if rank == self.root => l(all, (rank * blk, blk), (0, all)),
            Func::Gather => l(blk, (0, blk), (0, 0)),
            Func::Scatter if rank == self.root => l(all, (0, all), (rank * blk, blk)),
            Func::Scatter => l(blk, (0, 0), (0, blk)),
            Func::Send => l(blk, (0, blk), (0, 0)),
            Func::Recv => l(blk, (0, 0), (0, blk)),
            Func::AllToAll => l(all, (0, all), (0, all)),
        }
    }
}
