//! Point-to-point lanes spread over several connections per peer, so one large Send, Recv or
//! AllToAll block runs on several thread blocks (NCCL splits point-to-point work over
//! `p2pnChannelsPerPeer` channels the same way, src/enqueue.cc). A block moves about 35 GB/s
//! on its own (2×H200, rnccl bench sendrecv on one point-to-point connection, 2026-11-23)
//! where NVLink carries 360.
//!
//! Both ends split a step the same way — the pieces depend only on its byte count — so piece
//! `j` of every step goes over connection `j` with the peer and each connection's FIFO sees the
//! same sequence of slots on both sides.

use crate::coll::{Lane, LaneKey, Op, Plan, Step};
use crate::conn::ConnKey;

/// Bytes a piece gets at least: a step is cut into at most `bytes / P2P_PIECE_MIN` pieces.
/// A piece crosses on one block. On 2×H200 (`rnccl bench sendrecv -g 2` beside nccl-tests,
/// 2026-11-28) 64 KiB took a 512 KiB sendrecv from 25 µs to 19–21 (NCCL 15–17) and left 1–4
/// MiB where they were (25–27 and 36–37 µs; NCCL 17–23 and 32): those sizes are bound by
/// something other than the blocks' count.
const P2P_PIECE_MIN: usize = 64 << 10;
/// Piece boundaries fall on multiples of this (keeps pieces aligned like the whole for the
/// kernel's 16-byte accesses, and whole elements).
const P2P_PIECE_ALIGN: usize = 4096;

/// Where the pieces of a `bytes`-byte step cut over at most `channels` connections start and
/// how long they are.
fn pieces(bytes: usize, channels: usize) -> Vec<(usize, usize)> {
    let k = (bytes / P2P_PIECE_MIN).clamp(1, channels.max(1));
    let piece = bytes.div_ceil(k).next_multiple_of(P2P_PIECE_ALIGN);
    let mut out = Vec::with_capacity(k);
    let mut off = 0;
    while off < bytes || out.is_empty() {
        let n = piece.min(bytes - off);
        out.push((off, n));
        off += n;
    }
    out
}

/// `key` on point-to-point connection `channel` with the same peer.
fn on_channel(key: ConnKey, channel: usize) -> ConnKey {
    ConnKey {
        channel: channel as u16,
        ..key
    }
}

/// Piece `(off, n)` of `step` over connection `channel`, or `None` when the step is not a
/// plain point-to-point Send or Recv.
fn piece_of(step: &Step, off: usize, n: usize, channel: usize) -> Option<Step> {
    let p2p = |k: &ConnKey| k.index == ConnKey::p2p(k.peer).index;
    let op = match step.op {
        Op::Send { src, to } if p2p(&to) => Op::Send {
            src: src.at(off),
            to: on_channel(to, channel),
        },
        Op::Recv { dst, from } if p2p(&from) => Op::Recv {
            dst: dst.at(off),
            from: on_channel(from, channel),
        },
        _ => return None,
    };
    Some(Step {
        op,
        bytes: n,
        ..*step
    })
}

/// `plan` with every lane of point-to-point Sends to or Recvs from one peer spread over up to
/// `channels` lanes (piece `j` of each step on lane and connection `j`); other lanes as they
/// were. Both ends must use the same `channels` ([`p2p_channels`] of a setting all ranks share).
pub(crate) fn spread_p2p(plan: &Plan, channels: usize) -> Plan {
    let mut lanes: Vec<Lane> = Vec::with_capacity(plan.lanes.len());
    for (key, steps) in &plan.lanes {
        let split = matches!(key, LaneKey::SendTo(_) | LaneKey::RecvFrom(_))
            && steps.iter().all(|s| piece_of(s, 0, s.bytes, 0).is_some());
        if !split {
            lanes.push((*key, steps.clone()));
            continue;
        }
        let mut sub: Vec<Vec<Step>> = vec![Vec::new(); channels.max(1)];
        for s in steps {
            for (j, (off, n)) in pieces(s.bytes, channels).into_iter().enumerate() {
                if let Some(p) = piece_of(s, off, n, j) {
                    sub[j].push(p);
                }
            }
        }
        lanes.extend(sub.into_iter().filter(|v| !v.is_empty()).map(|v| (*key, v)));
    }
    Plan::new(lanes, plan.scratch_bytes, plan.algo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::{Algo, Loc};
    use crate::transport::gpu::conns::{P2P_CHANNELS, P2P_CHANNELS_HOST};

    #[test]
    fn pieces_cover_the_step_aligned_and_capped() {
        for bytes in [0, 1, 4096, 300 << 10, (8 << 20) + 12, 1 << 30] {
            let p = pieces(bytes, P2P_CHANNELS);
            assert!(p.len() <= P2P_CHANNELS && !p.is_empty(), "{bytes}");
            let mut next = 0;
            for &(off, n) in &p {
                assert_eq!(off, next);
                assert_eq!(off % P2P_PIECE_ALIGN, 0);
                next += n;
            }
            assert_eq!(next, bytes);
        }
        assert_eq!(
            pieces(100 << 10, P2P_CHANNELS).len(),
            1,
            "small steps stay whole"
        );
        assert_eq!(pieces(1 << 30, P2P_CHANNELS).len(), P2P_CHANNELS);
        assert_eq!(pieces(1 << 30, P2P_CHANNELS_HOST).len(), P2P_CHANNELS_HOST);
    }

    #[test]
    fn both_ends_cut_the_same_pieces_onto_the_same_connections() {
        let bytes = (5 << 20) + 8;
        let send = Plan::new(
            vec![(
                LaneKey::SendTo(1),
                vec![
                    Step::new(
                        Op::Send {
                            src: Loc::input(0),
                            to: ConnKey::p2p(1),
                        },
                        bytes,
                    ),
                    Step::new(
                        Op::Send {
                            src: Loc::input(bytes),
                            to: ConnKey::p2p(1),
                        },
                        64,
                    ),
                ],
            )],
            0,
            Algo::Direct,
        );
        let recv = Plan::new(
            vec![(
                LaneKey::RecvFrom(0),
                vec![
                    Step::new(
                        Op::Recv {
                            dst: Loc::output(0),
                            from: ConnKey::p2p(0),
                        },
                        bytes,
                    ),
                    Step::new(
                        Op::Recv {
                            dst: Loc::output(bytes),
                            from: ConnKey::p2p(0),
                        },
                        64,
                    ),
                ],
            )],
            0,
            Algo::Direct,
        );
        let (s, r) = (
            spread_p2p(&send, P2P_CHANNELS),
            spread_p2p(&recv, P2P_CHANNELS),
        );
        let k = pieces(bytes, P2P_CHANNELS).len();
        assert!(k > 1);
        assert_eq!(s.lanes.len(), k);
        assert_eq!(r.lanes.len(), k);
        for (j, ((_, ss), (_, rs))) in s.lanes.iter().zip(&r.lanes).enumerate() {
            let sizes = |v: &Vec<Step>| v.iter().map(|x| x.bytes).collect::<Vec<_>>();
            assert_eq!(sizes(ss), sizes(rs), "lane {j}");
            assert_eq!(ss[0].send_key().unwrap().channel as usize, j);
            assert_eq!(rs[0].recv_key().unwrap().channel as usize, j);
        }
        assert_eq!(
            s.lanes[0].1.len(),
            2,
            "the small step rides on connection 0"
        );
        assert_eq!(s.send_keys.len(), k);
        let total: usize = s.lanes.iter().flat_map(|(_, v)| v).map(|x| x.bytes).sum();
        assert_eq!(total, bytes + 64);
    }
}
