//! Job status (NCCL RAS's role): every process running communicators answers status queries on
//! a TCP port of its bootstrap interface ([`address`]; the address is on its counter page, in
//! its peers' tables and in its NCCL_DEBUG=INFO log), with each communicator rank's operation
//! counts, the operation in flight, the links it waits on and for how long, its last operations
//! and where its peers' services are. [`job`] asks a whole job from any one of them, across
//! hosts; [`diagnose`] says what is wrong (ranks behind, stuck and on what, not answering).
//! A collective that times out asks the job the same way, adds what it found to its error and
//! sends it to every rank's NCCL_DEBUG log.

mod client;
mod diagnosis;
pub(crate) mod hang;
mod service;
mod wire;

pub use client::{JobStatus, StatusError, job, query};
pub use diagnosis::{
    CommDiagnosis, RankState, RankView, Stuck, describe, diagnose, op_text, waits_text,
};
pub use service::address;
pub(crate) use service::start;
pub use wire::{CommStatus, LinkStatus, OpNow, ProcessStatus, StatusPeer, VERSION};
