//! Group calls (`ncclGroupStart`/`ncclGroupEnd`): operations queued on one or more communicators
//! and launched together. The group borrows every buffer until [`Group::end`], so the borrow
//! checker enforces what NCCL only documents: buffers stay untouched until the group completes.

use std::marker::PhantomData;

use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::Communicator;
use super::pending::Pending;
use crate::coll::{CollArgs, Func};
use crate::device::Region;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::exec::{self, Core, Op, Share};

/// One queued operation on the communicator it was queued on; its buffers are borrowed for the
/// group's lifetime `'a`.
pub(crate) struct Queued<'a> {
    pub comm: &'a Communicator,
    pub op: Op,
}

/// Operations queued for one launch. Create with [`group_start`], add operations, run them with
/// [`Group::end`]. A group dropped without `end` runs nothing.
pub struct Group<'a> {
    pub(crate) ops: Vec<Queued<'a>>,
    /// cudarc's stream-order guards of the typed device buffers: dropped after the launch, so
    /// cudarc orders later frees of those buffers after the collective.
    guards: Vec<SyncOnDrop<'a>>,
    _buffers: PhantomData<&'a mut [u8]>,
}

/// Starts a group (`ncclGroupStart`).
pub fn group_start<'a>() -> Group<'a> {
    Group {
        ops: Vec::new(),
        guards: Vec::new(),
        _buffers: PhantomData,
    }
}

fn need(what: &str, have: usize, want: usize, args: &CollArgs, es: usize) -> Result<()> {
    if have < want {
        return Err(Error::invalid_arg(format!(
            "{}: the {what} buffer holds {} elements of {} but {} are needed for count {}",
            args.func.nccl_name(),
            have / es,
            args.dtype,
            want / es,
            args.count
        )));
    }
    Ok(())
}

impl<'a> Group<'a> {
    /// Queues an operation on byte buffers (the data type is `args.dtype`). Buffers may be
    /// longer than the operation needs; only buffers the rank uses are checked (a non-root's
    /// Broadcast input, Reduce/Gather output and Scatter input are ignored, as in NCCL).
    ///
    /// Errors: [`Error::InvalidArgument`] for bad counts, roots, peers or short buffers.
    pub fn push(
        &mut self,
        comm: &'a Communicator,
        args: CollArgs,
        send: &'a [u8],
        recv: &'a mut [u8],
    ) -> Result<&mut Self> {
        let (rank, n) = (comm.rank(), comm.nranks());
        args.validate(n)?;
        if args.in_place {
            return Err(Error::invalid_arg(
                "use push_in_place for in-place operations",
            ));
        }
        let es = args.dtype.size();
        let (uses_in, uses_out) = roles(&args, rank);
        if uses_in {
            need("send", send.len(), args.input_bytes(n), &args, es)?;
        }
        if uses_out {
            need("receive", recv.len(), args.output_bytes(n), &args, es)?;
        }
        let (input_len, output_len) = (
            if uses_in { args.input_bytes(n) } else { 0 },
            if uses_out { args.output_bytes(n) } else { 0 },
        );
        self.ops.push(Queued {
            comm,
            op: Op {
                args,
                input: Region::host(send.as_ptr().cast_mut(), input_len),
                output: Region::host(recv.as_mut_ptr(), output_len),
                stream: std::ptr::null_mut(),
            },
        });
        Ok(self)
    }

    /// Queues an in-place operation on one byte buffer, laid out as nccl.h's in-place rules say
    /// (see [`CollArgs::in_place_layout`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for bad arguments, a short buffer, or AlltoAll.
    pub fn push_in_place(
        &mut self,
        comm: &'a Communicator,
        mut args: CollArgs,
        buf: &'a mut [u8],
    ) -> Result<&mut Self> {
        let (rank, n) = (comm.rank(), comm.nranks());
        args.in_place = true;
        args.validate(n)?;
        let l = args.in_place_layout(rank, n)?;
        need("in-place", buf.len(), l.buf_bytes, &args, args.dtype.size())?;
        let base = buf.as_mut_ptr();
        // SAFETY: the layout's ranges lie within buf (checked just above).
        let (input, output) = unsafe { (base.add(l.input.0), base.add(l.output.0)) };
        self.ops.push(Queued {
            comm,
            op: Op {
                args,
                input: Region::host(input, l.input.1),
                output: Region::host(output, l.output.1),
                stream: std::ptr::null_mut(),
            },
        });
        Ok(self)
    }

    /// Queues a Send of `buf` to `send_peer` and a Recv into the same `buf` from `recv_peer`
    /// (`args.count` elements of `args.dtype`): the in-place exchange nccl-tests' sendrecv runs.
    /// The Send reads the buffer as it was when the group starts.
    ///
    /// Errors: [`Error::InvalidArgument`] for bad peers or a short buffer.
    pub fn send_recv_in_place(
        &mut self,
        comm: &'a Communicator,
        args: CollArgs,
        buf: &'a mut [u8],
        send_peer: usize,
        recv_peer: usize,
    ) -> Result<&mut Self> {
        let n = comm.nranks();
        let send = CollArgs {
            func: Func::Send,
            root: send_peer,
            in_place: false,
            ..args
        };
        let recv = CollArgs {
            func: Func::Recv,
            root: recv_peer,
            in_place: false,
            ..args
        };
        send.validate(n)?;
        recv.validate(n)?;
        let bytes = args.count * args.dtype.size();
        need("in-place", buf.len(), bytes, &args, args.dtype.size())?;
        let p = buf.as_mut_ptr();
        self.ops.push(Queued {
            comm,
            op: Op {
                args: send,
                input: Region::host(p, bytes),
                output: Region::host(p, 0),
                stream: std::ptr::null_mut(),
            },
        });
        self.ops.push(Queued {
            comm,
            op: Op {
                args: recv,
                input: Region::host(p, 0),
                output: Region::host(p, bytes),
                stream: std::ptr::null_mut(),
            },
        });
        Ok(self)
    }

    /// Queues an operation on GPU memory (nccl.h's collectives and Send/Recv take device
    /// pointers this way): `send` and `recv` are device addresses on the communicator's GPU,
    /// `stream` the CUDA stream (of the GPU's primary context) it is enqueued on. The
    /// operation runs on that stream after [`Group::end`] returns, as NCCL's do; completion
    /// is seen through the stream, failures after the launch through
    /// [`Communicator::async_error`]. For an in-place operation (`args.in_place`) `recv` is
    /// the buffer and `send` is ignored: the layout is nccl.h's (see
    /// [`CollArgs::in_place_layout`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for bad counts, roots or peers, or a null buffer the
    /// rank uses; [`Error::InvalidUsage`] on a communicator without a GPU.
    ///
    /// # Safety
    /// Each address this rank uses must point to GPU memory valid for the bytes the operation
    /// reads or writes (`args.input_bytes` / `args.output_bytes` of nranks), stay valid until
    /// the stream has run the operation, and not be written by anything else meanwhile;
    /// `stream` must be a live stream of the communicator's GPU (or null, the legacy default
    /// stream).
    pub unsafe fn push_device(
        &mut self,
        comm: &'a Communicator,
        args: CollArgs,
        send: u64,
        recv: u64,
        stream: CUstream,
    ) -> Result<&mut Self> {
        let (rank, n) = (comm.rank(), comm.nranks());
        args.validate(n)?;
        let gpu = comm.gpu_ordinal().ok_or_else(|| {
            Error::invalid_usage(
                "device buffers need a communicator on a GPU (CommConfig::device or \
                 Communicator::init_all_devices)",
            )
        })?;
        let (input, output) = if args.in_place {
            let l = args.in_place_layout(rank, n)?;
            let at = |off: usize| recv.wrapping_add(off as u64);
            (
                Region::device(at(l.input.0), l.input.1, gpu),
                Region::device(at(l.output.0), l.output.1, gpu),
            )
        } else {
            let (uses_in, uses_out) = roles(&args, rank);
            let len = |uses: bool, bytes: usize| if uses { bytes } else { 0 };
            (
                Region::device(send, len(uses_in, args.input_bytes(n)), gpu),
                Region::device(recv, len(uses_out, args.output_bytes(n)), gpu),
            )
        };
        for (what, r) in [("send", input), ("receive", output)] {
            if r.len > 0 && r.ptr.is_null() {
                return Err(Error::invalid_arg(format!(
                    "{}: the {what} buffer is a null device pointer",
                    args.func.nccl_name()
                )));
            }
        }
        self.ops.push(Queued {
            comm,
            op: Op {
                args,
                input,
                output,
                stream,
            },
        });
        Ok(self)
    }

    /// Queues an operation on cudarc device buffers (`T` must be `args.dtype`'s element
    /// type), enqueued on `stream` when the group ends: the safe form of
    /// [`Group::push_device`]. Buffers may be longer than the operation needs.
    ///
    /// Errors: [`Error::InvalidArgument`] for bad counts, short buffers, a type other than
    /// `args.dtype`, buffers or a stream of another GPU than the communicator's, or an
    /// in-place `args` (use [`Group::push_cuda_in_place`]); [`Error::InvalidUsage`] on a
    /// communicator without a GPU.
    pub fn push_cuda<T: Element>(
        &mut self,
        comm: &'a Communicator,
        args: CollArgs,
        send: &'a CudaSlice<T>,
        recv: &'a mut CudaSlice<T>,
        stream: &'a CudaStream,
    ) -> Result<&mut Self> {
        if args.in_place {
            return Err(Error::invalid_arg(
                "use push_cuda_in_place for in-place operations",
            ));
        }
        let (rank, n) = (comm.rank(), comm.nranks());
        args.validate(n)?;
        check_cuda::<T>(comm, &args, stream)?;
        let es = args.dtype.size();
        let (uses_in, uses_out) = roles(&args, rank);
        if uses_in {
            need("send", send.len() * es, args.input_bytes(n), &args, es)?;
        }
        if uses_out {
            need("receive", recv.len() * es, args.output_bytes(n), &args, es)?;
        }
        let (s, gs) = send.device_ptr(stream);
        let (r, gr) = recv.device_ptr_mut(stream);
        self.guards.push(gs);
        self.guards.push(gr);
        // SAFETY: both slices are borrowed for the group's lifetime 'a (so they outlive the
        // launch) and long enough (checked above); cudarc's guards, dropped after the launch,
        // order later uses of the slices after the collective on `stream`, which belongs to
        // the communicator's GPU (checked).
        unsafe { self.push_device(comm, args, s, r, stream.cu_stream()) }
    }

    /// Queues an in-place operation on one cudarc device buffer, laid out as nccl.h's
    /// in-place rules say (see [`CollArgs::in_place_layout`]).
    ///
    /// Errors: as [`Group::push_cuda`], and AlltoAll's in-place layout rules.
    pub fn push_cuda_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        mut args: CollArgs,
        buf: &'a mut CudaSlice<T>,
        stream: &'a CudaStream,
    ) -> Result<&mut Self> {
        let (rank, n) = (comm.rank(), comm.nranks());
        args.in_place = true;
        args.validate(n)?;
        check_cuda::<T>(comm, &args, stream)?;
        let l = args.in_place_layout(rank, n)?;
        let es = args.dtype.size();
        need("in-place", buf.len() * es, l.buf_bytes, &args, es)?;
        let (p, g) = buf.device_ptr_mut(stream);
        self.guards.push(g);
        // SAFETY: as in push_cuda: the buffer is borrowed for 'a, long enough for the layout,
        // and the guard orders later uses after the collective.
        unsafe { self.push_device(comm, args, 0, p, stream.cu_stream()) }
    }

    /// Queues `ncclSend` of `buf.len()` elements of a cudarc device buffer to `peer`, on
    /// `stream` when the group ends.
    ///
    /// Errors: as [`Group::push_cuda`]; [`Error::InvalidArgument`] for a bad peer.
    pub fn send_cuda<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a CudaSlice<T>,
        peer: usize,
        stream: &'a CudaStream,
    ) -> Result<&mut Self> {
        let args = p2p_args::<T>(Func::Send, buf.len(), peer);
        args.validate(comm.nranks())?;
        check_cuda::<T>(comm, &args, stream)?;
        let (p, g) = buf.device_ptr(stream);
        self.guards.push(g);
        // SAFETY: the buffer is borrowed for 'a and holds `count` elements; the guard orders
        // later uses after the send on `stream`, a stream of the communicator's GPU (checked).
        unsafe { self.push_device(comm, args, p, 0, stream.cu_stream()) }
    }

    /// Queues `ncclRecv` of `buf.len()` elements from `peer` into a cudarc device buffer, on
    /// `stream` when the group ends.
    ///
    /// Errors: as [`Group::send_cuda`].
    pub fn recv_cuda<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut CudaSlice<T>,
        peer: usize,
        stream: &'a CudaStream,
    ) -> Result<&mut Self> {
        let args = p2p_args::<T>(Func::Recv, buf.len(), peer);
        args.validate(comm.nranks())?;
        check_cuda::<T>(comm, &args, stream)?;
        let (p, g) = buf.device_ptr_mut(stream);
        self.guards.push(g);
        // SAFETY: as in send_cuda, for a buffer borrowed mutably.
        unsafe { self.push_device(comm, args, 0, p, stream.cu_stream()) }
    }

    /// Number of queued operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Launches every queued operation and waits for all of them (`ncclGroupEnd`): the same as
    /// [`Group::enqueue`] then [`Pending::wait`]. Operations on GPU memory are on their streams
    /// when it returns, as NCCL's are.
    ///
    /// Errors: the first failure of any operation ([`Error::Remote`], [`Error::Timeout`],
    /// [`Error::Aborted`]…); the communicator involved is unusable afterwards.
    pub fn end(self) -> Result<()> {
        self.enqueue()?.wait()
    }

    /// Launches every queued operation without waiting for them: each communicator's engine
    /// takes its operations (a GPU engine launches kernels on their streams; a host engine
    /// plans them and opens the connections they need, which waits for the peers to open
    /// theirs), and what remains to run comes back. The buffers stay borrowed until
    /// [`Pending::wait`] returns.
    ///
    /// Errors: argument, connection or bootstrap failures ([`Error::Remote`],
    /// [`Error::Timeout`], [`Error::InvalidUsage`] when a communicator is busy or failed
    /// earlier, or the group mixes GPU and host memory); a GPU's kernels' earlier failure; the
    /// communicators involved are unusable after a connection or launch failure.
    pub fn enqueue(self) -> Result<Pending<'a>> {
        let mut shares: Vec<Share<'a>> = Vec::with_capacity(1);
        for q in &self.ops {
            let core: &'a Core = &q.comm.core;
            let busy = || {
                Error::invalid_usage(
                    "a communicator is already running an operation on this thread",
                )
            };
            // A collective of no elements moves nothing: once its communicator is found usable
            // it is dropped, as NCCL discards it (src/enqueue.cc, "Empty collectives can be
            // discarded"): no launch, no op number. A Send or Recv of none still pairs with
            // its peer's, so it stays.
            if q.op.args.count == 0 && !q.op.args.func.p2p() {
                match shares.iter().find(|s| std::ptr::eq(s.core, core)) {
                    Some(s) => s.state.usable(core)?,
                    None => q
                        .comm
                        .state
                        .try_borrow()
                        .map_err(|_| busy())?
                        .usable(core)?,
                }
                continue;
            }
            match shares.iter_mut().find(|s| std::ptr::eq(s.core, core)) {
                Some(s) => s.ops.push(q.op),
                None => {
                    let state = q.comm.state.try_borrow_mut().map_err(|_| busy())?;
                    shares.push(Share {
                        core,
                        state,
                        ops: vec![q.op],
                    });
                }
            }
        }
        // A GPU's kernels that failed since the last launch: say so now (with the job's status
        // for a timeout), before launching more.
        for s in &mut shares {
            if let Some(g) = s.core.watch.gpu()
                && let Err(e) = s.core.gpu_async_error(g)
            {
                s.state.failed.get_or_insert_with(|| e.to_string());
                return Err(e);
            }
        }
        Ok(Pending::new(exec::start(shares)?))
    }
}

/// Ends a group (`ncclGroupEnd`); same as [`Group::end`].
///
/// Errors: as [`Group::end`].
pub fn group_end(group: Group<'_>) -> Result<()> {
    group.end()
}

/// The arguments of a Send or Recv of `count` elements of `T` with `peer`.
fn p2p_args<T: Element>(func: Func, count: usize, peer: usize) -> CollArgs {
    CollArgs {
        func,
        count,
        dtype: T::DTYPE,
        op: crate::redop::RedOp::Sum,
        root: peer,
        in_place: false,
    }
}

/// Checks a typed device operation: the element type is `args.dtype`'s and the stream belongs
/// to the communicator's GPU.
fn check_cuda<T: Element>(comm: &Communicator, args: &CollArgs, stream: &CudaStream) -> Result<()> {
    if T::DTYPE != args.dtype {
        return Err(Error::invalid_arg(format!(
            "{}: buffers of {} for an operation on {}",
            args.func.nccl_name(),
            T::DTYPE,
            args.dtype
        )));
    }
    let gpu = stream.context().ordinal();
    match comm.gpu_ordinal() {
        Some(g) if g != gpu => Err(Error::invalid_arg(format!(
            "{}: the stream and buffers are on GPU {gpu} but rank {} runs on GPU {g}",
            args.func.nccl_name(),
            comm.rank()
        ))),
        _ => Ok(()),
    }
}

/// Whether this rank reads its input and writes its output for `args`.
fn roles(args: &CollArgs, rank: usize) -> (bool, bool) {
    let root = rank == args.root;
    match args.func {
        Func::Broadcast => (root, true),
        Func::Reduce | Func::Gather => (true, root),
        Func::Scatter => (root, true),
        Func::Send => (true, false),
        Func::Recv => (false, true),
        _ => (true, true),
    }
}
