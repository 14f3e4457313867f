//! Host-memory ranks of the benchmark: heap buffers (or registered windows, `-R 2`) allocated
//! once for the largest point, inputs written in place, operations launched as one group that
//! returns when they are done, and the result check on the host.

use super::Counts;
use super::data::{self, DataSpec};
use super::ranks::{Region, input_region, is_sendrecv, output_region};
use crate::coll::{CollArgs, Func};
use crate::comm::{Communicator, Group, group_start};
use crate::dtype::{as_bytes, as_bytes_mut};
use crate::error::{Error, Result};

/// One benchmark buffer: heap memory, or a registered window.
enum Mem {
    Heap(Vec<u64>),
    Window(crate::mem::HostMem<u64>),
}

impl std::ops::Deref for Mem {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        match self {
            Mem::Heap(v) => v,
            Mem::Window(m) => m,
        }
    }
}

impl std::ops::DerefMut for Mem {
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Mem::Heap(v) => v,
            Mem::Window(m) => m,
        }
    }
}

/// One rank on host memory, with buffers sized for the largest point.
pub(super) struct HostRank<'c> {
    comm: &'c Communicator,
    send: Mem,
    recv: Mem,
    /// Receive buffers of the 2nd..agg-th operation of each iteration.
    extra: Vec<Mem>,
    /// The expected output, when the check is on.
    want: Option<Mem>,
    /// 8-byte words per buffer.
    words: usize,
    windows: bool,
}

impl<'c> HostRank<'c> {
    /// Allocates `bytes` bytes (rounded up to 8-byte words) for the send and receive buffers
    /// and, when `check`, the expected output; registers the first two as windows of `comm`
    /// when `windows` (a collective).
    ///
    /// Errors: [`Error::InvalidArgument`] when the memory cannot be had; registration errors.
    pub(super) fn new(
        comm: &'c Communicator,
        bytes: usize,
        windows: bool,
        check: bool,
    ) -> Result<HostRank<'c>> {
        let words = bytes.div_ceil(8);
        Ok(HostRank {
            comm,
            send: alloc(comm, words, windows)?,
            recv: alloc(comm, words, windows)?,
            extra: Vec::new(),
            want: if check {
                Some(alloc(comm, words, false)?)
            } else {
                None
            },
            words,
            windows,
        })
    }

    /// Writes this rank's input for `spec` (in the send buffer, or at its in-place position):
    /// every element when the results are `checked`, else a generated head repeated
    /// ([`data::generated_bytes`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for an in-place layout nccl.h does not define.
    pub(super) fn fill(
        &mut self,
        args: &CollArgs,
        spec: &DataSpec,
        c: &Counts,
        checked: bool,
    ) -> Result<()> {
        let (rank, n) = (self.comm.rank(), self.comm.nranks());
        let Region { in_recv, off, len } = input_region(args, c, rank, n)?;
        let buf = if in_recv {
            &mut self.recv
        } else {
            &mut self.send
        };
        let es = args.dtype.size();
        let region = &mut as_bytes_mut(buf)[off..off + len];
        let head = data::generated_bytes(len, checked);
        data::fill_input(spec, rank, &mut region[..head], head / es);
        data::repeat_head(region, head);
        Ok(())
    }

    /// Wrong output elements of this rank for `spec`.
    ///
    /// Errors: [`Error::InvalidArgument`] for an in-place layout nccl.h does not define;
    /// [`Error::Internal`] when the check buffer is missing.
    pub(super) fn check(&mut self, args: &CollArgs, spec: &DataSpec, c: &Counts) -> Result<u64> {
        let (rank, n) = (self.comm.rank(), self.comm.nranks());
        let (off, len) = output_region(args, c, rank, n)?;
        let es = args.dtype.size();
        let want = self
            .want
            .as_mut()
            .ok_or_else(|| Error::Internal("the check's buffer was not allocated".into()))?;
        let want = &mut as_bytes_mut(want)[..len];
        if !data::expected_output(spec, rank, want, len / es) {
            return Ok(0);
        }
        let out = &as_bytes(&self.recv)[off..off + len];
        let tol = data::tolerance(args.dtype, n);
        Ok(data::count_wrong(args.dtype, tol, out, want, len / es))
    }
}

/// One buffer of `words` 8-byte words, registered as a window of `comm` when `window`.
///
/// Errors: [`Error::InvalidArgument`] when the memory cannot be had; registration errors.
fn alloc(comm: &Communicator, words: usize, window: bool) -> Result<Mem> {
    if window {
        let m = crate::mem::mem_alloc::<u64>(words)?;
        comm.window_register(&m)?;
        return Ok(Mem::Window(m));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(words).map_err(|_| {
        Error::invalid_arg(format!(
            "cannot allocate {} bytes for the benchmark buffers: lower the largest size",
            words * 8
        ))
    })?;
    v.resize(words, 0);
    Ok(Mem::Heap(v))
}

/// Launches `agg` operations per rank of `ranks` as one group (nccl-tests `-m`) and waits for
/// them. The first uses the checked buffers; the others get their own receive buffers, since
/// Rust lends each buffer once.
///
/// Errors: engine errors, naming the operation and the peer involved.
pub(super) fn launch(ranks: &mut [HostRank<'_>], args: &CollArgs, agg: usize) -> Result<()> {
    for r in ranks.iter_mut() {
        while r.extra.len() + 1 < agg {
            r.extra.push(alloc(r.comm, r.words, r.windows)?);
        }
    }
    let mut g = group_start();
    for r in ranks.iter_mut() {
        let send = as_bytes(&r.send);
        push_one(&mut g, r.comm, args, send, as_bytes_mut(&mut r.recv))?;
        for e in r.extra.iter_mut().take(agg.saturating_sub(1)) {
            push_one(&mut g, r.comm, args, send, as_bytes_mut(e))?;
        }
    }
    g.end()
}

/// Queues one operation of `comm` (a Send to the next rank and a Recv from the previous one
/// for sendrecv).
fn push_one<'a>(
    g: &mut Group<'a>,
    comm: &'a Communicator,
    args: &CollArgs,
    send: &'a [u8],
    recv: &'a mut [u8],
) -> Result<()> {
    let (rank, n) = (comm.rank(), comm.nranks());
    let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
    let bytes = args.count * args.dtype.size();
    match (is_sendrecv(args), args.in_place) {
        (true, true) => {
            g.send_recv_in_place(comm, *args, &mut recv[..bytes], next, prev)?;
        }
        (true, false) => {
            g.push(
                comm,
                CollArgs {
                    root: next,
                    ..*args
                },
                &send[..bytes],
                &mut [],
            )?;
            g.push(
                comm,
                CollArgs {
                    func: Func::Recv,
                    root: prev,
                    ..*args
                },
                &[],
                &mut recv[..bytes],
            )?;
        }
        (false, true) => {
            let l = args.in_place_layout(rank, n)?;
            g.push_in_place(comm, *args, &mut recv[..l.buf_bytes])?;
        }
        (false, false) => {
            g.push(comm, *args, send, recv)?;
        }
    }
    Ok(())
}
