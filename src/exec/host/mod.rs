//! The host engine: runs plans in the caller's thread. It moves each lane's steps forward slot
//! by slot over the transports' connections, applying the reduction kernels of the operation's
//! backend (the CPU backend needs no proxy thread: sockets are driven from the same loop, or by
//! their helper threads).
//!
//! A group's host operations are planned and their missing connections opened for every
//! communicator at once ([`enqueue`]); what comes back is a [`Running`] group, whose unit of work
//! is a phase: one [`Execution`] (an operation's plan, or a group's fused Send/Recv) or one
//! [`direct::DirectOp`] (a collective over registered windows) per communicator. Nothing here
//! blocks except [`Running::run`] (through [`drive`]), which loops
//! [`Execution::progress`] and [`direct::DirectOp::progress`] with a [`Waiter`] until every
//! phase is done, a peer fails, or the timeout passes.

mod buffers;
mod conns;
pub(crate) mod direct;
mod drive;
mod enqueue;
mod execution;
mod failure;
mod label;
mod run;
mod slot_stores;
mod step;
mod wait;
pub(crate) mod windows;

#[cfg(test)]
mod sim;

pub(crate) use buffers::OpBuffers;
pub(crate) use conns::Connections;
pub(crate) use drive::{Driven, InFlight, PeerView, drive};
pub(crate) use enqueue::enqueue;
pub(crate) use execution::{Execution, Segment};
pub(crate) use run::Running;
pub(crate) use slot_stores::SlotStores;
pub(crate) use wait::{WaitPolicy, spin_cores};
pub(crate) use windows::Windows;

/// A host engine's state: its connections (opened on first use), what it learned about slot
/// stores, and its registered windows.
#[derive(Default)]
pub(crate) struct HostEngine {
    /// Connections opened so far, by key.
    pub conns: Connections,
    /// How each operation size has fared with cached and with streamed FIFO slots.
    pub slot_stores: SlotStores,
    /// The same choice for the output of direct operations on windows, which peers read back
    /// as FIFO slots are read.
    pub direct_stores: SlotStores,
    /// Collectives (not Send/Recv) queued so far: the sequence number direct operations agree
    /// on.
    pub colls: u64,
    /// Registered windows.
    pub windows: Windows,
}
