//! Typed collectives: on a [`Group`] (queued) and on a [`Communicator`] (a group of one).
//!
//! Counts are derived from slice lengths (elements, not bytes). Buffer shapes follow nccl.h:
//! AllGather's receive slice holds `nranks × send.len()`, ReduceScatter's send slice holds
//! `nranks × recv.len()`, AlltoAll slices hold `nranks` blocks, Gather's root receives
//! `nranks × send.len()`, Scatter's root sends `nranks × recv.len()`. Slices a rank does not use
//! (a non-root's Broadcast send, Reduce/Gather receive, Scatter send) may be empty.

use super::Communicator;
use super::group::{Group, group_start, same_len};
use crate::coll::{CollArgs, Func};
use crate::dtype::{Element, as_bytes, as_bytes_mut};
use crate::error::{Error, Result};
use crate::redop::RedOp;

fn args<T: Element>(func: Func, count: usize, op: RedOp, root: usize) -> CollArgs {
    CollArgs {
        func,
        count,
        dtype: T::DTYPE,
        op,
        root,
        in_place: false,
    }
}

fn blocks(func: &str, len: usize, n: usize) -> Result<usize> {
    if !len.is_multiple_of(n) {
        return Err(Error::invalid_arg(format!(
            "{func}: a buffer of {len} elements does not split into {n} equal blocks (one per rank)"
        )));
    }
    Ok(len / n)
}

fn exact(func: &str, what: &str, have: usize, want: usize) -> Result<()> {
    if have != want {
        return Err(Error::invalid_arg(format!(
            "{func}: the {what} buffer has {have} elements but must have {want}"
        )));
    }
    Ok(())
}

impl<'a> Group<'a> {
    /// Queues an AllReduce of `send` into `recv` (equal lengths).
    ///
    /// Errors: [`Error::InvalidArgument`] when the lengths differ.
    pub fn all_reduce<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
        op: RedOp,
    ) -> Result<&mut Self> {
        same_len("AllReduce", send.len(), recv.len())?;
        let args = CollArgs {
            func: Func::AllReduce,
            count: recv.len(),
            dtype: T::DTYPE,
            op,
            root: 0,
            in_place: false,
        };
        self.push(comm, args, as_bytes(send), as_bytes_mut(recv))
    }

    /// Queues an in-place AllReduce of `buf`.
    ///
    /// Errors: as [`Group::push_in_place`].
    pub fn all_reduce_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
        op: RedOp,
    ) -> Result<&mut Self> {
        let args = CollArgs {
            func: Func::AllReduce,
            count: buf.len(),
            dtype: T::DTYPE,
            op,
            root: 0,
            in_place: true,
        };
        self.push_in_place(comm, args, as_bytes_mut(buf))
    }

    /// Queues `ncclSend` of `data` to `peer`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad peer.
    pub fn send<T: Element>(
        &mut self,
        comm: &'a Communicator,
        data: &'a [T],
        peer: usize,
    ) -> Result<&mut Self> {
        let args = CollArgs {
            func: Func::Send,
            count: data.len(),
            dtype: T::DTYPE,
            op: RedOp::Sum,
            root: peer,
            in_place: false,
        };
        self.push(comm, args, as_bytes(data), &mut [])
    }

    /// Queues `ncclRecv` of `buf.len()` elements from `peer`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad peer.
    pub fn recv<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
        peer: usize,
    ) -> Result<&mut Self> {
        let args = CollArgs {
            func: Func::Recv,
            count: buf.len(),
            dtype: T::DTYPE,
            op: RedOp::Sum,
            root: peer,
            in_place: false,
        };
        self.push(comm, args, &[], as_bytes_mut(buf))
    }

    /// Queues a Broadcast of the root's `send` into every rank's `recv` (count = `recv.len()`).
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root or a short root send buffer.
    pub fn broadcast<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
        root: usize,
    ) -> Result<&mut Self> {
        self.push(
            comm,
            args::<T>(Func::Broadcast, recv.len(), RedOp::Sum, root),
            as_bytes(send),
            as_bytes_mut(recv),
        )
    }

    /// Queues an in-place Broadcast of `buf` from `root`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root.
    pub fn broadcast_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
        root: usize,
    ) -> Result<&mut Self> {
        self.push_in_place(
            comm,
            args::<T>(Func::Broadcast, buf.len(), RedOp::Sum, root),
            as_bytes_mut(buf),
        )
    }

    /// Queues a Reduce of every rank's `send` into the root's `recv` (count = `send.len()`).
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root or a short root receive buffer.
    pub fn reduce<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
        op: RedOp,
        root: usize,
    ) -> Result<&mut Self> {
        self.push(
            comm,
            args::<T>(Func::Reduce, send.len(), op, root),
            as_bytes(send),
            as_bytes_mut(recv),
        )
    }

    /// Queues an in-place Reduce of `buf` to `root`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root.
    pub fn reduce_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
        op: RedOp,
        root: usize,
    ) -> Result<&mut Self> {
        self.push_in_place(
            comm,
            args::<T>(Func::Reduce, buf.len(), op, root),
            as_bytes_mut(buf),
        )
    }

    /// Queues an AllGather: `recv` (`nranks × send.len()`) receives every rank's `send` in rank
    /// order.
    ///
    /// Errors: [`Error::InvalidArgument`] when `recv` has the wrong length.
    pub fn all_gather<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Result<&mut Self> {
        exact(
            "AllGather",
            "receive",
            recv.len(),
            send.len() * comm.nranks(),
        )?;
        self.push(
            comm,
            args::<T>(Func::AllGather, send.len(), RedOp::Sum, 0),
            as_bytes(send),
            as_bytes_mut(recv),
        )
    }

    /// Queues an in-place AllGather: this rank's data sits in block `rank` of `buf`.
    ///
    /// Errors: [`Error::InvalidArgument`] when `buf` does not split into `nranks` blocks.
    pub fn all_gather_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
    ) -> Result<&mut Self> {
        let count = blocks("AllGather", buf.len(), comm.nranks())?;
        self.push_in_place(
            comm,
            args::<T>(Func::AllGather, count, RedOp::Sum, 0),
            as_bytes_mut(buf),
        )
    }

    /// Queues a ReduceScatter: block `rank` of the reduction of every `send`
    /// (`nranks × recv.len()`) lands in `recv`.
    ///
    /// Errors: [`Error::InvalidArgument`] when `send` has the wrong length.
    pub fn reduce_scatter<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
        op: RedOp,
    ) -> Result<&mut Self> {
        exact(
            "ReduceScatter",
            "send",
            send.len(),
            recv.len() * comm.nranks(),
        )?;
        self.push(
            comm,
            args::<T>(Func::ReduceScatter, recv.len(), op, 0),
            as_bytes(send),
            as_bytes_mut(recv),
        )
    }

    /// Queues an in-place ReduceScatter: the result lands in block `rank` of `buf`.
    ///
    /// Errors: [`Error::InvalidArgument`] when `buf` does not split into `nranks` blocks.
    pub fn reduce_scatter_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
        op: RedOp,
    ) -> Result<&mut Self> {
        let count = blocks("ReduceScatter", buf.len(), comm.nranks())?;
        self.push_in_place(
            comm,
            args::<T>(Func::ReduceScatter, count, op, 0),
            as_bytes_mut(buf),
        )
    }

    /// Queues an AlltoAll: block `p` of `send` goes to rank `p`, block `p` of `recv` comes from it.
    ///
    /// Errors: [`Error::InvalidArgument`] when the slices differ or do not split into blocks.
    pub fn all_to_all<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Result<&mut Self> {
        same_len("AlltoAll", send.len(), recv.len())?;
        let count = blocks("AlltoAll", send.len(), comm.nranks())?;
        self.push(
            comm,
            args::<T>(Func::AllToAll, count, RedOp::Sum, 0),
            as_bytes(send),
            as_bytes_mut(recv),
        )
    }

    /// Queues an in-place AlltoAll on `buf` (`nranks` blocks); the blocks sent are those `buf`
    /// held when the group starts.
    ///
    /// Errors: [`Error::InvalidArgument`] when `buf` does not split into blocks.
    pub fn all_to_all_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
    ) -> Result<&mut Self> {
        let count = blocks("AlltoAll", buf.len(), comm.nranks())?;
        self.push_in_place(
            comm,
            args::<T>(Func::AllToAll, count, RedOp::Sum, 0),
            as_bytes_mut(buf),
        )
    }

    /// Queues a Gather of every rank's `send` into the root's `recv` (`nranks × send.len()`).
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root or a wrong root receive length.
    pub fn gather<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
        root: usize,
    ) -> Result<&mut Self> {
        if comm.rank() == root {
            exact("Gather", "receive", recv.len(), send.len() * comm.nranks())?;
        }
        self.push(
            comm,
            args::<T>(Func::Gather, send.len(), RedOp::Sum, root),
            as_bytes(send),
            as_bytes_mut(recv),
        )
    }

    /// Queues an in-place Gather: at the root `buf` holds `nranks` blocks (its own data in block
    /// `root`); elsewhere `buf` is the data sent.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root or a root buffer that does not split.
    pub fn gather_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
        root: usize,
    ) -> Result<&mut Self> {
        let count = if comm.rank() == root {
            blocks("Gather", buf.len(), comm.nranks())?
        } else {
            buf.len()
        };
        self.push_in_place(
            comm,
            args::<T>(Func::Gather, count, RedOp::Sum, root),
            as_bytes_mut(buf),
        )
    }

    /// Queues a Scatter of the root's `send` (`nranks × recv.len()`): block `p` lands in rank
    /// `p`'s `recv`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root or a wrong root send length.
    pub fn scatter<T: Element>(
        &mut self,
        comm: &'a Communicator,
        send: &'a [T],
        recv: &'a mut [T],
        root: usize,
    ) -> Result<&mut Self> {
        if comm.rank() == root {
            exact("Scatter", "send", send.len(), recv.len() * comm.nranks())?;
        }
        self.push(
            comm,
            args::<T>(Func::Scatter, recv.len(), RedOp::Sum, root),
            as_bytes(send),
            as_bytes_mut(recv),
        )
    }

    /// Queues an in-place Scatter: at the root `buf` holds `nranks` blocks and keeps block
    /// `root`; elsewhere `buf` receives.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad root or a root buffer that does not split.
    pub fn scatter_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut [T],
        root: usize,
    ) -> Result<&mut Self> {
        let count = if comm.rank() == root {
            blocks("Scatter", buf.len(), comm.nranks())?
        } else {
            buf.len()
        };
        self.push_in_place(
            comm,
            args::<T>(Func::Scatter, count, RedOp::Sum, root),
            as_bytes_mut(buf),
        )
    }
}

macro_rules! single {
    ($( $(#[$m:meta])* $name:ident ( $($arg:ident : $ty:ty),* ); )*) => {$(
        $(#[$m])*
        ///
        /// Errors: argument errors as the [`Group`] method of the same name; [`Error::Remote`],
        /// [`Error::Timeout`] or [`Error::Aborted`] when a peer fails, stalls or the
        /// communicator is aborted (the communicator is unusable afterwards).
        pub fn $name<T: Element>(&self, $($arg: $ty),*) -> Result<()> {
            let mut g = group_start();
            g.$name(self, $($arg),*)?;
            g.end()
        }
    )*};
}

impl Communicator {
    single! {
        /// AllReduce `send` into `recv` (`ncclAllReduce`; equal lengths).
        all_reduce(send: &[T], recv: &mut [T], op: RedOp);
        /// In-place AllReduce of `buf`.
        all_reduce_in_place(buf: &mut [T], op: RedOp);
        /// Broadcast the root's `send` into every `recv` (`ncclBroadcast`).
        broadcast(send: &[T], recv: &mut [T], root: usize);
        /// In-place Broadcast of `buf` from `root`.
        broadcast_in_place(buf: &mut [T], root: usize);
        /// Reduce every `send` into the root's `recv` (`ncclReduce`).
        reduce(send: &[T], recv: &mut [T], op: RedOp, root: usize);
        /// In-place Reduce of `buf` to `root`.
        reduce_in_place(buf: &mut [T], op: RedOp, root: usize);
        /// AllGather every `send` into `recv` (`ncclAllGather`).
        all_gather(send: &[T], recv: &mut [T]);
        /// In-place AllGather in `buf`.
        all_gather_in_place(buf: &mut [T]);
        /// ReduceScatter `send` into `recv` (`ncclReduceScatter`).
        reduce_scatter(send: &[T], recv: &mut [T], op: RedOp);
        /// In-place ReduceScatter in `buf`.
        reduce_scatter_in_place(buf: &mut [T], op: RedOp);
        /// AlltoAll between `send` and `recv` (`ncclAlltoAll`).
        all_to_all(send: &[T], recv: &mut [T]);
        /// In-place AlltoAll on `buf`.
        all_to_all_in_place(buf: &mut [T]);
        /// Gather every `send` into the root's `recv` (`ncclGather`).
        gather(send: &[T], recv: &mut [T], root: usize);
        /// In-place Gather in `buf`.
        gather_in_place(buf: &mut [T], root: usize);
        /// Scatter the root's `send` into every `recv` (`ncclScatter`).
        scatter(send: &[T], recv: &mut [T], root: usize);
        /// In-place Scatter in `buf`.
        scatter_in_place(buf: &mut [T], root: usize);
        /// Send `data` to `peer` (`ncclSend`); pair it with the peer's `recv`.
        send(data: &[T], peer: usize);
        /// Receive `buf.len()` elements from `peer` (`ncclRecv`).
        recv(buf: &mut [T], peer: usize);
    }
}
