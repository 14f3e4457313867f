//! Every bootstrap message tag, allocated in one place. A tag's top four bits name the kind of
//! message; the low 60 bits carry its key (a connection, a split or registration number), so
//! two kinds never collide. Messages are filed by (sender, communicator, tag).

use crate::conn::ConnKey;

const KIND_SHIFT: u32 = 60;
const KEY_MASK: u64 = (1 << KIND_SHIFT) - 1;

/// The kinds of bootstrap messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
enum Kind {
    /// A receiving end's connection offer ([`crate::transport::setup`]).
    ConnOffer = 1,
    /// A sending end's acknowledgement that it attached.
    ConnAck = 2,
    /// Rank 0's channel layout.
    Layout = 3,
    /// A split's colors and keys.
    Split = 4,
    /// Why a rank gave up (read by peers to name the root cause).
    FailureNotice = 5,
    /// Window registration (names, then "mapped").
    Window = 6,
    /// A GPU receiving end's FIFO addresses ([`crate::transport::gpu::fifo`]).
    GpuOffer = 7,
    /// A GPU sending end's reply: where the receiver frees slots.
    GpuAck = 8,
    /// A GPU receiving end's offer to a peer on another host: its data listener and token
    /// ([`crate::transport::gpu::net`]).
    GpuNetOffer = 9,
    /// A GPU rank's PCI bus id, for its peers on the host to judge the path between their
    /// GPUs (`NCCL_P2P_LEVEL`).
    GpuBus = 10,
    /// A GPU sending end's answer to an IB offer from another host: its queue pairs and CTS
    /// FIFO ([`crate::transport::gpu::net`]).
    GpuNetAnswer = 11,
    /// A shrink's exclusion list, exchanged among the ranks that stay.
    Shrink = 12,
    /// A grow's unique id, from the rank that made it to the other existing ranks.
    Grow = 13,
    /// A GPU window registration: where each rank's memory is and how to map it
    /// ([`crate::comm::device_window`]).
    DeviceWindow = 14,
    /// A buffer registration's news between two ranks of a GPU communicator, in order: offers,
    /// acknowledgements, withdrawals ([`crate::exec::gpu::registered`]).
    Registration = 15,
}

fn tag(kind: Kind, key: u64) -> u64 {
    ((kind as u64) << KIND_SHIFT) | (key & KEY_MASK)
}

fn conn(key: &ConnKey) -> u64 {
    (u64::from(key.channel) << 8) | u64::from(key.index)
}

/// The offer for connection `key` (named from the sender's side of the message).
pub(crate) fn conn_offer(key: &ConnKey) -> u64 {
    tag(Kind::ConnOffer, conn(key))
}

/// The acknowledgement of connection `key`.
pub(crate) fn conn_ack(key: &ConnKey) -> u64 {
    tag(Kind::ConnAck, conn(key))
}

/// The GPU FIFO offer for connection `key` (named from the sender's side of the message).
pub(crate) fn gpu_offer(key: &ConnKey) -> u64 {
    tag(Kind::GpuOffer, conn(key))
}

/// The GPU sending end's reply for connection `key`.
pub(crate) fn gpu_ack(key: &ConnKey) -> u64 {
    tag(Kind::GpuAck, conn(key))
}

/// The offer of GPU connection `key` to a peer on another host.
pub(crate) fn gpu_net_offer(key: &ConnKey) -> u64 {
    tag(Kind::GpuNetOffer, conn(key))
}

/// The answer to the IB offer of GPU connection `key` (named from the sender's side of the
/// message).
pub(crate) fn gpu_net_answer(key: &ConnKey) -> u64 {
    tag(Kind::GpuNetAnswer, conn(key))
}

/// A GPU rank's PCI bus id.
pub(crate) fn gpu_bus() -> u64 {
    tag(Kind::GpuBus, 0)
}

/// Rank 0's channel layout.
pub(crate) fn layout() -> u64 {
    tag(Kind::Layout, 0)
}

/// The exchange of split number `seq` of a communicator.
pub(crate) fn split(seq: u64) -> u64 {
    tag(Kind::Split, seq)
}

/// The exchange of shrink number `seq` of a communicator (counted with its splits).
pub(crate) fn shrink(seq: u64) -> u64 {
    tag(Kind::Shrink, seq)
}

/// The unique id of grow number `seq` of a communicator (counted with its splits).
pub(crate) fn grow(seq: u64) -> u64 {
    tag(Kind::Grow, seq)
}

/// A failure notice.
pub(crate) fn failure_notice() -> u64 {
    tag(Kind::FailureNotice, 0)
}

/// GPU window registration `id` of a communicator: the ranks' offers.
pub(crate) fn device_window(id: u64) -> u64 {
    tag(Kind::DeviceWindow, id)
}

/// Buffer registrations (`ncclCommRegister`): every offer, acknowledgement and withdrawal
/// one rank sends another, in order under one tag.
pub(crate) fn registration() -> u64 {
    tag(Kind::Registration, 0)
}

/// Window registration `id`: phase 0 swaps names, phase 1 says every rank has mapped.
pub(crate) fn window(id: u64, mapped: bool) -> u64 {
    tag(Kind::Window, (id << 1) | u64::from(mapped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_never_share_a_tag() {
        let mut all = std::collections::HashSet::new();
        let keys = [
            ConnKey::collective(3, 0),
            ConnKey::collective(3, 63),
            ConnKey::p2p(1),
        ];
        for k in &keys {
            assert!(all.insert(conn_offer(k)));
            assert!(all.insert(conn_ack(k)));
            assert!(all.insert(gpu_offer(k)));
            assert!(all.insert(gpu_ack(k)));
            assert!(all.insert(gpu_net_offer(k)));
            assert!(all.insert(gpu_net_answer(k)));
        }
        assert!(all.insert(layout()));
        assert!(all.insert(gpu_bus()));
        assert!(all.insert(failure_notice()));
        assert!(all.insert(registration()));
        for n in [0, 1, 2, 255, 256, 257] {
            assert!(all.insert(split(n)), "split {n}");
            assert!(all.insert(shrink(n)), "shrink {n}");
            assert!(all.insert(grow(n)), "grow {n}");
            assert!(all.insert(window(n, false)), "window {n}");
            assert!(all.insert(window(n, true)), "window {n} mapped");
            assert!(all.insert(device_window(n)), "device window {n}");
        }
        // A key too large for its field cannot reach another kind's tags.
        assert_eq!(split(u64::MAX) >> KIND_SHIFT, Kind::Split as u64);
    }
}
