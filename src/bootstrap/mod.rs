//! Bootstrap: rendezvous with the root named in the unique id, then tagged messages between any
//! two ranks (NCCL's `bootstrapSend`/`bootstrapRecv`, internals §6).
//!
//! A rank checks in with the root and receives every rank's [`PeerInfo`]. From then on it talks
//! to peers directly: each rank listens on a message port served by one thread (`poll(2)` over
//! the listener and every incoming connection) that files messages into a mailbox keyed by
//! (sender, communicator, tag); [`BootstrapNet::recv`] waits on the mailbox with a deadline and
//! fails early when the sender's connection closes. One [`BootstrapNet`] serves a communicator
//! and every communicator split from it. Message tags are allocated in [`tags`]. The TCP
//! policies every socket of a rank follows live here too: connect retries, [`silence`] and the
//! data sockets' [`congestion`] control.

mod checkin;
pub(crate) mod congestion;
mod connect;
mod deadline;
pub(crate) mod host;
mod mailbox;
mod net;
mod peek;
mod peer;
pub(crate) mod root;
pub(crate) mod silence;
pub(crate) mod tags;
pub(crate) mod unique_id;
pub(crate) mod wire;

pub(crate) use connect::{Retry, connect_prepared, connect_retry, connect_unless};
pub(crate) use deadline::Deadline;
pub(crate) use net::{Announce, BootstrapNet};
pub(crate) use peek::far_end_gone;
pub(crate) use peer::PeerInfo;
