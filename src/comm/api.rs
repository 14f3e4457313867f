//! Typed collectives: on a [`Group`] (queued) and on a [`Communicator`] (a group of one), both
//! made from one table ([`collectives!`]) over two helpers that know every function's buffer
//! shapes ([`Group::queue`], [`Group::queue_in_place`]).
//!
//! Counts are derived from slice lengths (elements, not bytes). Buffer shapes follow nccl.h:
//! AllGather's receive slice holds `nranks × send.len()`, ReduceScatter's send slice holds
//! `nranks × recv.len()`, AlltoAll slices hold `nranks` blocks, Gather's root receives
//! `nranks × send.len()`, Scatter's root sends `nranks × recv.len()`. Slices a rank does not use
//! (a non-root's Broadcast send, Reduce/Gather receive, Scatter send) may be empty. In place,
//! AllGather, ReduceScatter and AlltoAll buffers (and Gather's and Scatter's at the root) hold
//! `nranks` blocks of the count.

use super::Communicator;
use super::group::{Group, group_start};
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

fn same_len(func: &str, a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::invalid_arg(format!(
            "{func}: send has {a} elements but receive has {b}; they must match"
        )));
    }
    Ok(())
}

impl<'a> Group<'a> {
    /// Queues `func` from `send` into `recv`, its count derived from their lengths by the
    /// function's shape (the module's header).
    ///
    /// Errors: [`Error::InvalidArgument`] for slices of the wrong shape, a bad root or peer.
    fn queue<T: Element>(
        &mut self,
        comm: &'a Communicator,
        func: Func,
        send: &'a [T],
        recv: &'a mut [T],
        op: RedOp,
        root: usize,
    ) -> Result<&mut Self> {
        let (n, name) = (comm.nranks(), func.nccl_name());
        let at_root = comm.rank() == root;
        let count = match func {
            Func::AllReduce => {
                same_len(name, send.len(), recv.len())?;
                recv.len()
            }
            Func::AllToAll => {
                same_len(name, send.len(), recv.len())?;
                blocks(name, send.len(), n)?
            }
            Func::AllGather => {
                exact(name, "receive", recv.len(), send.len() * n)?;
                send.len()
            }
            Func::ReduceScatter => {
                exact(name, "send", send.len(), recv.len() * n)?;
                recv.len()
            }
            Func::Gather => {
                if at_root {
                    exact(name, "receive", recv.len(), send.len() * n)?;
                }
                send.len()
            }
            Func::Scatter => {
                if at_root {
                    exact(name, "send", send.len(), recv.len() * n)?;
                }
                recv.len()
            }
            Func::Broadcast | Func::Recv => recv.len(),
            Func::Reduce | Func::Send => send.len(),
        };
        let a = args::<T>(func, count, op, root);
        self.push(comm, a, as_bytes(send), as_bytes_mut(recv))
    }

    /// Queues `func` in place on `buf`, its count derived from its length (the module's header).
    ///
    /// Errors: [`Error::InvalidArgument`] for a buffer that does not split into blocks where it
    /// must, a bad root; as [`Group::push_in_place`].
    fn queue_in_place<T: Element>(
        &mut self,
        comm: &'a Communicator,
        func: Func,
        buf: &'a mut [T],
        op: RedOp,
        root: usize,
    ) -> Result<&mut Self> {
        let (n, name) = (comm.nranks(), func.nccl_name());
        let count = match func {
            Func::AllGather | Func::ReduceScatter | Func::AllToAll => blocks(name, buf.len(), n)?,
            Func::Gather | Func::Scatter if comm.rank() == root => blocks(name, buf.len(), n)?,
            _ => buf.len(),
        };
        let a = args::<T>(func, count, op, root);
        self.push_in_place(comm, a, as_bytes_mut(buf))
    }
}

/// The typed collectives, each written once: `name(params) => helper(Func, send, recv, op,
/// root)` makes [`Group::name`] (queued, its slices borrowed for the group) and
/// [`Communicator::name`] (a group of one, run at once). Parameter kinds: `src` a slice read,
/// `dst` a slice written, `buf` a slice read and written in place, `(type)` a plain value.
macro_rules! collectives {
    ($( $(#[$doc:meta])* $name:ident ( $($arg:ident : $kind:tt),* )
        => $helper:ident ( $func:ident $(, $x:expr)* ); )*) => {
        impl<'a> Group<'a> {
            $(
                $(#[$doc])*
                ///
                /// Queued on the group: it runs when the group ends, and the group borrows its
                /// slices until then.
                ///
                /// Errors: [`Error::InvalidArgument`] for slices of the wrong shape (the module's
                /// header), a bad root or peer.
                pub fn $name<T: Element>(
                    &mut self,
                    comm: &'a Communicator,
                    $($arg: collectives!(@group $kind)),*
                ) -> Result<&mut Self> {
                    self.$helper(comm, Func::$func $(, $x)*)
                }
            )*
        }

        impl Communicator {
            $(
                $(#[$doc])*
                ///
                /// Errors: as the [`Group`] method of the same name; [`Error::Remote`],
                /// [`Error::Timeout`] or [`Error::Aborted`] when a peer fails, stalls or the
                /// communicator is aborted (the communicator is unusable afterwards).
                pub fn $name<T: Element>(
                    &self,
                    $($arg: collectives!(@single $kind)),*
                ) -> Result<()> {
                    let mut g = group_start();
                    g.$name(self, $($arg),*)?;
                    g.end()
                }
            )*
        }
    };
    (@group src) => { &'a [T] };
    (@group dst) => { &'a mut [T] };
    (@group buf) => { &'a mut [T] };
    (@group ($t:ty)) => { $t };
    (@single src) => { &[T] };
    (@single dst) => { &mut [T] };
    (@single buf) => { &mut [T] };
    (@single ($t:ty)) => { $t };
}

collectives! {
    /// AllReduce of `send` into `recv` (`ncclAllReduce`; equal lengths).
    all_reduce(send: src, recv: dst, op: (RedOp))
        => queue(AllReduce, send, recv, op, 0);
    /// In-place AllReduce of `buf`.
    all_reduce_in_place(buf: buf, op: (RedOp)) => queue_in_place(AllReduce, buf, op, 0);
    /// Broadcast of the root's `send` into every rank's `recv` (`ncclBroadcast`; count =
    /// `recv.len()`).
    broadcast(send: src, recv: dst, root: (usize))
        => queue(Broadcast, send, recv, RedOp::Sum, root);
    /// In-place Broadcast of `buf` from `root`.
    broadcast_in_place(buf: buf, root: (usize))
        => queue_in_place(Broadcast, buf, RedOp::Sum, root);
    /// Reduce of every rank's `send` into the root's `recv` (`ncclReduce`; count =
    /// `send.len()`).
    reduce(send: src, recv: dst, op: (RedOp), root: (usize))
        => queue(Reduce, send, recv, op, root);
    /// In-place Reduce of `buf` to `root`.
    reduce_in_place(buf: buf, op: (RedOp), root: (usize))
        => queue_in_place(Reduce, buf, op, root);
    /// AllGather (`ncclAllGather`): `recv` (`nranks × send.len()`) receives every rank's `send`
    /// in rank order.
    all_gather(send: src, recv: dst) => queue(AllGather, send, recv, RedOp::Sum, 0);
    /// In-place AllGather: this rank's data sits in block `rank` of `buf`.
    all_gather_in_place(buf: buf) => queue_in_place(AllGather, buf, RedOp::Sum, 0);
    /// ReduceScatter (`ncclReduceScatter`): block `rank` of the reduction of every `send`
    /// (`nranks × recv.len()`) lands in `recv`.
    reduce_scatter(send: src, recv: dst, op: (RedOp))
        => queue(ReduceScatter, send, recv, op, 0);
    /// In-place ReduceScatter: the result lands in block `rank` of `buf`.
    reduce_scatter_in_place(buf: buf, op: (RedOp))
        => queue_in_place(ReduceScatter, buf, op, 0);
    /// AlltoAll (`ncclAlltoAll`): block `p` of `send` goes to rank `p`, block `p` of `recv`
    /// comes from it.
    all_to_all(send: src, recv: dst) => queue(AllToAll, send, recv, RedOp::Sum, 0);
    /// In-place AlltoAll on `buf` (`nranks` blocks); the blocks sent are those `buf` held when
    /// the group starts.
    all_to_all_in_place(buf: buf) => queue_in_place(AllToAll, buf, RedOp::Sum, 0);
    /// Gather (`ncclGather`) of every rank's `send` into the root's `recv`
    /// (`nranks × send.len()`).
    gather(send: src, recv: dst, root: (usize)) => queue(Gather, send, recv, RedOp::Sum, root);
    /// In-place Gather: at the root `buf` holds `nranks` blocks (its own data in block `root`);
    /// elsewhere `buf` is the data sent.
    gather_in_place(buf: buf, root: (usize)) => queue_in_place(Gather, buf, RedOp::Sum, root);
    /// Scatter (`ncclScatter`) of the root's `send` (`nranks × recv.len()`): block `p` lands in
    /// rank `p`'s `recv`.
    scatter(send: src, recv: dst, root: (usize))
        => queue(Scatter, send, recv, RedOp::Sum, root);
    /// In-place Scatter: at the root `buf` holds `nranks` blocks and keeps block `root`;
    /// elsewhere `buf` receives.
    scatter_in_place(buf: buf, root: (usize))
        => queue_in_place(Scatter, buf, RedOp::Sum, root);
    /// Send of `data` to `peer` (`ncclSend`); pair it with the peer's `recv`.
    send(data: src, peer: (usize)) => queue(Send, data, &mut [], RedOp::Sum, peer);
    /// Receive of `buf.len()` elements from `peer` (`ncclRecv`).
    recv(buf: dst, peer: (usize)) => queue(Recv, &[], buf, RedOp::Sum, peer);
}
