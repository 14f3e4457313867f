//! The vocabulary plans ([`crate::coll`]) and transports ([`crate::transport`]) share: which
//! connection a step uses, and how many slots every connection's FIFO has. Kept apart from both
//! so neither imports the other.

/// Slots per connection FIFO (NCCL's `NCCL_STEPS`, internals §5.3). A ring chunk spans half of
/// them ([`crate::coll::Geometry::chunk_bytes`]).
pub(crate) const NSLOTS: usize = 8;

/// Most channels a communicator runs (NCCL's `MAXCHANNELS`, src/include/device.h): the bound
/// of every channel count, from the topology search to `NCCL_MAX_NCHANNELS`.
pub const MAX_CHANNELS: usize = 64;

/// One connection of a communicator, named from this rank's side: the peer, the channel, and
/// whether it carries collectives or point-to-point traffic (NCCL keeps them on separate
/// connections).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnKey {
    /// The peer (communicator rank).
    pub peer: usize,
    /// Channel number.
    pub channel: u16,
    /// 0: collectives; 1: point-to-point operations.
    pub index: u8,
}

impl ConnKey {
    /// The connection collectives use on `channel` with `peer`.
    pub fn collective(peer: usize, channel: usize) -> ConnKey {
        ConnKey {
            peer,
            channel: channel as u16,
            index: 0,
        }
    }

    /// The connection point-to-point operations use with `peer` (channel 0).
    pub fn p2p(peer: usize) -> ConnKey {
        ConnKey {
            peer,
            channel: 0,
            index: 1,
        }
    }
}
