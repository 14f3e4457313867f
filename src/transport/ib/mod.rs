//! InfiniBand/RoCE between hosts (NCCL's IB net, internals §7.5; NCCL 2.30
//! src/transport/net_ib/p2p.cc and connect.cc), over the verbs layer ([`crate::ib::verbs`]).
//!
//! A connection carries the same slot FIFO as every transport. Each end keeps
//! [`crate::conn::NSLOTS`] slots in registered host memory; the bytes move by RDMA writes over
//! `NCCL_IB_QPS_PER_CONNECTION` reliable-connected queue pairs, receiver-driven as in NCCL:
//!
//! 1. *Clear to send.* For every free slot the receiver writes an entry `{address, rkey, size,
//!    index}` of its slot into the sender's CTS FIFO (NCCL's `ncclIbSendFifo`, `ncclIbPostFifo`),
//!    at FIFO position `index mod NSLOTS`. NCCL's sender polls that memory; rnccl's entry is an
//!    RDMA write with immediate (the index), so the sender learns of it from a receive
//!    completion, which orders the entry for any fabric.
//! 2. *Data.* The sender (`ncclIbIsend`/`ncclIbMultiSend`) writes a posted slot straight into
//!    the receiver's slot named by the matching entry: with `NCCL_IB_SPLIT_DATA_ON_QPS` the slot
//!    is cut into 128-byte-aligned chunks, one per queue pair; otherwise whole slots go
//!    round-robin over the queue pairs. Each queue pair's piece is an RDMA write with immediate
//!    carrying the slot's byte count (NCCL's index-based matching), signalled so the sender
//!    knows when its slot is free again.
//! 3. *Arrival.* Each write with immediate consumes a receive the receiver posted beforehand;
//!    once every queue pair's piece of a slot arrived, the slot is shown to the executor. When
//!    the executor frees it, a new entry goes out (step 1): at most `NSLOTS` slots are ever in
//!    flight, which is the flow control.
//!
//! Setup runs through the bootstrap like the other transports ([`crate::transport::setup`]):
//! the receiver's offer names its queue pairs and slots; the sender connects its queue pairs,
//! preposts its receives and answers with its queue pairs and CTS FIFO; the receiver then
//! connects and sends its first entries. A failed work request (a peer that exited, a wrong
//! GID, a bad key) surfaces from `progress` as a [`TransportError::Fabric`] naming the peer,
//! the port and the completion status; nothing here blocks.

mod buf;
mod link;
mod net;
mod receiver;
mod sender;

pub(crate) use link::IbAddr;
pub(crate) use net::IbNet;
pub(crate) use receiver::IbReceiver;
pub(crate) use sender::IbSender;

use super::TransportError;
use crate::ib::verbs::{VerbsError, WcStatus};

/// Bytes of one CTS FIFO entry: address (8), rkey (4), size (4), index (8), padding (8); a
/// multiple of 32 as NCCL's `ncclIbSendFifo`.
pub(crate) const CTS_BYTES: usize = 32;

/// NCCL's chunk alignment when a slot is split over queue pairs (`IB_WRITE_CHUNK_ALIGNMENT`,
/// src/transport/net_ib/p2p.cc), which keeps LL and LL128 lines whole.
pub(crate) const CHUNK_ALIGN: usize = 128;

/// The error for a verb that failed on a connection to `peer`.
fn verbs_failed(peer: &str, port: &str, e: &VerbsError) -> TransportError {
    TransportError::Fabric {
        peer: peer.to_string(),
        port: port.to_string(),
        detail: e.to_string(),
    }
}

/// The error for a work request of a connection to `peer` that completed with `status`.
fn completion_failed(peer: &str, port: &str, what: &str, status: WcStatus) -> TransportError {
    TransportError::Fabric {
        peer: peer.to_string(),
        port: port.to_string(),
        detail: format!("{what} failed: {}", status.meaning()),
    }
}

#[cfg(test)]
mod tests;
