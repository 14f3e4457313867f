//! The ranks one thread drives, with their buffers — all on host memory or all on GPUs — and
//! where a rank's input and output lie in them for each collective.

use std::time::Instant;

use super::data::DataSpec;
use super::gpu::{self, GpuRank};
use super::host::{self, HostRank};
use super::{BenchOptions, Counts};
use crate::coll::{CollArgs, Func};
use crate::comm::Communicator;
use crate::error::{Error, Result};

/// Where a rank's input is written, in bytes.
pub(super) struct Region {
    /// In the receive buffer (in place) rather than the send buffer.
    pub in_recv: bool,
    /// Offset in that buffer.
    pub off: usize,
    /// Length.
    pub len: usize,
}

/// Whether `args` is the sendrecv benchmark (a Send to the next rank and a Recv from the
/// previous one).
pub(super) fn is_sendrecv(args: &CollArgs) -> bool {
    args.func == Func::Send
}

/// Where `rank` of `n` writes its input for `args` (`c` the point's counts): the send buffer's
/// start out of place, its place in nccl.h's in-place layout otherwise.
///
/// Errors: [`Error::InvalidArgument`] for an in-place layout nccl.h does not define.
pub(super) fn input_region(args: &CollArgs, c: &Counts, rank: usize, n: usize) -> Result<Region> {
    let es = args.dtype.size();
    if !args.in_place || is_sendrecv(args) {
        return Ok(Region {
            in_recv: args.in_place,
            off: 0,
            len: c.send * es,
        });
    }
    let (off, len) = args.in_place_layout(rank, n)?.input;
    Ok(Region {
        in_recv: true,
        off,
        len,
    })
}

/// Where `rank` of `n` finds its output for `args` in the receive buffer: `(offset, length)`
/// in bytes.
///
/// Errors: [`Error::InvalidArgument`] for an in-place layout nccl.h does not define.
pub(super) fn output_region(
    args: &CollArgs,
    c: &Counts,
    rank: usize,
    n: usize,
) -> Result<(usize, usize)> {
    if args.in_place && !is_sendrecv(args) {
        return Ok(args.in_place_layout(rank, n)?.output);
    }
    Ok((0, c.recv * args.dtype.size()))
}

/// This thread's ranks.
pub(super) enum Ranks<'c> {
    /// Ranks on host memory.
    Host(Vec<HostRank<'c>>),
    /// Ranks on GPUs.
    Gpu(Vec<GpuRank<'c>>),
}

impl<'c> Ranks<'c> {
    /// Buffers of `bytes` bytes for every rank of `comms`, on the GPU of GPU ranks.
    ///
    /// Errors: [`Error::InvalidUsage`] for a mix of GPU and host ranks;
    /// [`Error::InvalidArgument`] for windows of host buffers on several ranks of one thread,
    /// or graph launches on host ranks; allocation and registration errors.
    pub(super) fn new(
        comms: &'c [Communicator],
        opts: &BenchOptions,
        bytes: usize,
    ) -> Result<Ranks<'c>> {
        let on_gpu = comms.iter().filter(|c| c.gpu_ordinal().is_some()).count();
        let check = opts.check > 0;
        if on_gpu == 0 {
            if opts.graph_launches > 0 {
                return Err(Error::invalid_arg(
                    "CUDA graph launches (-G) need GPU ranks: these ranks run on host memory",
                ));
            }
            if opts.local_register {
                return Err(Error::invalid_usage(
                    "-R 1 registers device memory with ncclCommRegister, for GPU ranks: host \
                     ranks share their buffers through windows (-R 2)",
                ));
            }
            if opts.windows && comms.len() > 1 {
                return Err(Error::invalid_arg(
                    "registering windows (-R 2) is a collective of each communicator: drive \
                     each rank from its own thread",
                ));
            }
            return comms
                .iter()
                .map(|c| HostRank::new(c, bytes, opts.windows, check))
                .collect::<Result<_>>()
                .map(Ranks::Host);
        }
        if on_gpu != comms.len() {
            return Err(Error::invalid_usage(
                "a thread drives either GPU ranks or host ranks, not both",
            ));
        }
        let mut ranks = comms
            .iter()
            .map(|c| GpuRank::new(c, bytes, opts))
            .collect::<Result<Vec<_>>>()?;
        if opts.windows {
            GpuRank::register_windows(&mut ranks)?;
        }
        if opts.local_register {
            ranks.iter_mut().try_for_each(GpuRank::register_buffers)?;
        }
        Ok(Ranks::Gpu(ranks))
    }

    /// Writes every rank's input for `spec`, every element when the results will be `checked`.
    ///
    /// Errors: as [`HostRank::fill`] and [`GpuRank::fill`].
    pub(super) fn fill(
        &mut self,
        args: &CollArgs,
        spec: &DataSpec,
        c: &Counts,
        checked: bool,
    ) -> Result<()> {
        match self {
            Ranks::Host(h) => h
                .iter_mut()
                .try_for_each(|r| r.fill(args, spec, c, checked)),
            Ranks::Gpu(g) => g
                .iter_mut()
                .try_for_each(|r| r.fill(args, spec, c, checked)),
        }
    }

    /// Launches `agg` operations per rank as one group.
    ///
    /// Errors: engine errors.
    pub(super) fn launch(&mut self, args: &CollArgs, agg: usize) -> Result<()> {
        match self {
            Ranks::Host(h) => host::launch(h, args, agg),
            Ranks::Gpu(g) => gpu::launch(g, args, agg),
        }
    }

    /// Waits until every launched operation is done (host operations already are).
    ///
    /// Errors: as [`GpuRank::sync`].
    pub(super) fn sync(&self) -> Result<()> {
        match self {
            Ranks::Host(_) => Ok(()),
            Ranks::Gpu(g) => g.iter().try_for_each(GpuRank::sync),
        }
    }

    /// This thread's seconds per operation over the timed iterations (nccl-tests' method:
    /// `iters` launches of `agg` operations back to back, until they are done).
    ///
    /// Errors: engine errors; as [`gpu::time`].
    pub(super) fn time(
        &mut self,
        comms: &[Communicator],
        args: &CollArgs,
        opts: &BenchOptions,
    ) -> Result<f64> {
        match self {
            Ranks::Host(h) => {
                let start = Instant::now();
                for _ in 0..opts.iters {
                    host::launch(h, args, opts.agg)?;
                }
                Ok(start.elapsed().as_secs_f64() / (opts.iters.max(1) * opts.agg.max(1)) as f64)
            }
            Ranks::Gpu(g) => gpu::time(comms, g, args, opts),
        }
    }

    /// Adds every rank's wrong output elements for `spec` to `wrong` (one entry per rank).
    ///
    /// Errors: as [`HostRank::check`] and [`GpuRank::check`].
    pub(super) fn check(
        &mut self,
        args: &CollArgs,
        spec: &DataSpec,
        c: &Counts,
        wrong: &mut [u64],
    ) -> Result<()> {
        let counts: Vec<u64> = match self {
            Ranks::Host(h) => h
                .iter_mut()
                .map(|r| r.check(args, spec, c))
                .collect::<Result<_>>()?,
            Ranks::Gpu(g) => g
                .iter_mut()
                .map(|r| r.check(args, spec, c))
                .collect::<Result<_>>()?,
        };
        for (w, n) in wrong.iter_mut().zip(counts) {
            *w += n;
        }
        Ok(())
    }
}
