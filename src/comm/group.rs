//! Group calls (`ncclGroupStart`/`ncclGroupEnd`): operations queued on one or more communicators
//! and launched together. The group borrows every buffer until [`Group::end`], so the borrow
//! checker enforces what NCCL only documents: buffers stay untouched until the group completes.

use std::marker::PhantomData;

use super::Communicator;
use super::pending::Pending;
use crate::coll::{CollArgs, Func};
use crate::device::Region;
use crate::error::{Error, Result};

/// One queued operation: the buffers it borrows (for the group's lifetime `'a`), as regions of
/// memory of a known kind.
pub(crate) struct Queued<'a> {
    pub comm: &'a Communicator,
    pub args: CollArgs,
    /// Read (the part of the send buffer this rank uses).
    pub input: Region,
    /// Written (the part of the receive buffer this rank uses).
    pub output: Region,
}

/// Operations queued for one launch. Create with [`group_start`], add operations, run them with
/// [`Group::end`]. A group dropped without `end` runs nothing.
pub struct Group<'a> {
    pub(crate) ops: Vec<Queued<'a>>,
    _buffers: PhantomData<&'a mut [u8]>,
}

/// Starts a group (`ncclGroupStart`).
pub fn group_start<'a>() -> Group<'a> {
    Group {
        ops: Vec::new(),
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
            args,
            input: Region::host(send.as_ptr().cast_mut(), input_len),
            output: Region::host(recv.as_mut_ptr(), output_len),
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
            args,
            input: Region::host(input, l.input.1),
            output: Region::host(output, l.output.1),
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
            args: send,
            input: Region::host(p, bytes),
            output: Region::host(p, 0),
        });
        self.ops.push(Queued {
            comm,
            args: recv,
            input: Region::host(p, 0),
            output: Region::host(p, bytes),
        });
        Ok(self)
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
    /// [`Group::enqueue`] then [`Pending::wait`].
    ///
    /// Errors: the first failure of any operation ([`Error::Remote`], [`Error::Timeout`],
    /// [`Error::Aborted`]…); the communicator involved is unusable afterwards.
    pub fn end(self) -> Result<()> {
        self.enqueue()?.wait()
    }

    /// Launches every queued operation without waiting for them: plans them, opens the
    /// connections they need (which waits for the peers to open theirs), and hands back the
    /// operations in flight. The buffers stay borrowed until [`Pending::wait`] returns.
    ///
    /// Errors: argument, connection or bootstrap failures ([`Error::Remote`],
    /// [`Error::Timeout`], [`Error::InvalidUsage`] when a communicator is busy or failed
    /// earlier); the communicators involved are unusable after a connection failure.
    pub fn enqueue(self) -> Result<Pending<'a>> {
        super::enqueue::enqueue(self.ops)
    }
}

/// Ends a group (`ncclGroupEnd`); same as [`Group::end`].
///
/// Errors: as [`Group::end`].
pub fn group_end(group: Group<'_>) -> Result<()> {
    group.end()
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

pub(crate) fn same_len(func: &str, a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::invalid_arg(format!(
            "{func}: send has {a} elements but receive has {b}; they must match"
        )));
    }
    Ok(())
}
