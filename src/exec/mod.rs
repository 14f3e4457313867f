//! Runs plans: moves each lane's steps forward slot by slot over the connections, applying the
//! reduction kernels of the operation's backend, in the caller's thread (the CPU backend needs no
//! proxy thread: sockets are driven from the same loop, or by their helper threads).
//!
//! The unit of work is a phase: one [`Execution`] (an operation's plan, or a group's fused
//! Send/Recv) or one [`direct::DirectOp`] (a collective over registered windows) per
//! communicator. Nothing here blocks except [`drive`], which loops [`Execution::progress`] and
//! [`direct::DirectOp::progress`] with a [`Waiter`] until every phase is done, a peer fails, or
//! the timeout passes.

mod buffers;
mod conns;
pub(crate) mod direct;
mod drive;
mod execution;
mod failure;
pub(crate) mod gpu;
mod slot_stores;
mod step;
mod wait;

#[cfg(test)]
mod sim;

pub(crate) use buffers::OpBuffers;
pub(crate) use conns::Connections;
pub(crate) use drive::{Driven, PeerView, Running, drive};
pub(crate) use execution::{Execution, Segment};
pub(crate) use slot_stores::SlotStores;
pub(crate) use wait::{WaitPolicy, spin_cores};
