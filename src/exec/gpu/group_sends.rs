//! A group's Send/Recv straight between the ranks' buffers when one thread drives every rank of
//! a communicator (`ncclCommInitAll`, nccl-tests and `rnccl bench` with `-g N`): the group
//! holds both ends of every pair, so each rank's GPU stores its sends into the receiving ranks'
//! buffers through peer access (`SendRecv_ST`, kernels/symmetric.cuh), one copy over NVLink,
//! where the step interpreter stores every byte into the peer's FIFO slot and the peer copies
//! it out again. NCCL's P2P transport writes into the receiver's buffer the same way between
//! GPUs of one process ("P2P/direct pointer", src/transport/p2p.cc).
//!
//! The kernel's barriers pair every rank with every other and count operations per block, so
//! every rank of the communicator must run it, on the same number of blocks: the choice is
//! made here for all of them, from the whole group.

use super::ll::LlOp;
use crate::coll::Func;
use crate::exec::Op;

/// Bytes of the group's largest send from which its sends go straight into the receive
/// buffers: the symmetric kernels' own lower bound for a group's buffers (group_buffers.rs,
/// `GROUP_MIN_BYTES`), whose two barriers this kernel shares; below it a send is latency-bound
/// and the step interpreter's single flag hop per slot is as fast. On one H200 (two ranks on
/// GPU 0, `rnccl bench sendrecv -g 2`, 2026-12-02, against `NCCL_P2P_DIRECT_DISABLE=1`) 1 MiB
/// took 14.9 µs against the interpreter's 14.6, 4 MiB 12.9 against 21.1, and 16 MiB to 1 GiB
/// 0.41-0.48 of its time.
pub(crate) const SENDS_MIN_BYTES: usize = 1 << 20;

/// One rank's part of a group's direct send/receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupSends {
    /// Per rank: where this rank's send to it goes (that rank's receive buffer, an address
    /// this rank's GPU reaches) and its bytes; `(0, 0)` for none.
    pub to: Vec<(u64, usize)>,
    /// Per rank: the bytes this rank receives from it.
    pub from: Vec<usize>,
    /// Bytes of the largest send of any rank of the group: every rank sizes its grid by it.
    pub largest: usize,
}

impl GroupSends {
    /// Rank `me`'s part of an all-to-all of `chunk` bytes per pair of ranks on a group's own
    /// buffers (`rows`: every rank's input and output device addresses) as a direct
    /// send/receive: block p of its input (at `input`) goes to its place (block `me`) in rank
    /// p's output. Returns the part and the sources per receiving rank, for `peer_src`.
    pub(crate) fn all_to_all(
        me: usize,
        input: u64,
        chunk: usize,
        rows: &[(u64, u64)],
    ) -> (GroupSends, Vec<u64>) {
        let at = |p: usize| (p * chunk) as u64;
        let part = GroupSends {
            to: rows.iter().map(|&(_, out)| (out + at(me), chunk)).collect(),
            from: vec![chunk; rows.len()],
            largest: chunk,
        };
        (part, (0..rows.len()).map(|p| input + at(p)).collect())
    }

    /// Rank `me`'s part of a broadcast of `bytes` bytes from rank `root` on a group's own
    /// buffers (`rows`: every rank's input and output) as a direct send/receive: the root sends
    /// its input (at `input`) into every other rank's output, and into its own where that is
    /// not the input; the others only take part. Returns the part and the sources per
    /// receiving rank, for `peer_src`.
    pub(crate) fn broadcast(
        me: usize,
        root: usize,
        input: u64,
        bytes: usize,
        rows: &[(u64, u64)],
    ) -> (GroupSends, Vec<u64>) {
        let n = rows.len();
        let sends = |r: usize, p: usize| r == root && (p != root || rows[p].0 != rows[p].1);
        let part = GroupSends {
            to: (0..n)
                .map(|p| match sends(me, p) {
                    true => (rows[p].1, bytes),
                    false => (0, 0),
                })
                .collect(),
            from: (0..n)
                .map(|p| if sends(p, me) { bytes } else { 0 })
                .collect(),
            largest: bytes,
        };
        let srcs = (0..n)
            .map(|p| if sends(me, p) { input } else { 0 })
            .collect();
        (part, srcs)
    }

    /// `base` (the direct kernel's arguments for this rank, `SendRecv_ST`'s mode and the
    /// largest send's bytes) with this part's sends: per receiving rank the destination and
    /// the bytes, and the bytes received from it; the sources are 0, for the launch to fill in
    /// (`peer_src`, per receiving rank).
    pub(crate) fn kernel_op(&self, base: LlOp) -> LlOp {
        LlOp {
            peer_src: vec![0; self.to.len()],
            peer_dst: self.to.iter().map(|&(dst, _)| dst).collect(),
            send_bytes: self.to.iter().map(|&(_, bytes)| bytes as u64).collect(),
            recv_bytes: self.from.iter().map(|&bytes| bytes as u64).collect(),
            ..base
        }
    }
}

/// For each rank of one communicator (`ops[r]`: rank r's operations of the group, its GPU
/// `gpus[r]`), its part of the group's direct send/receive, when the group takes one: every
/// rank queued only Send and Recv on GPU memory, at most one of each per peer; every Send
/// from r to p has p's Recv from r of the same bytes and every Recv its Send; the largest
/// send holds at least [`SENDS_MIN_BYTES`]; and `reaches(ptr, gpu)` holds for every receive
/// buffer from the sending rank's GPU. `None` otherwise: the step interpreter runs the group.
pub(crate) fn of_comm(
    ops: &[&[Op]],
    gpus: &[usize],
    reaches: impl Fn(u64, usize) -> bool,
) -> Option<Vec<GroupSends>> {
    let n = ops.len();
    // Per rank: per peer, the Send's (input, bytes) and the Recv's (output, bytes).
    let mut sends = vec![vec![None; n]; n];
    let mut recvs = vec![vec![None; n]; n];
    for (r, rank_ops) in ops.iter().enumerate() {
        if rank_ops.is_empty() {
            return None;
        }
        for o in rank_ops.iter() {
            let peer = o.args.root;
            if !o.args.func.p2p() || !o.on_device() || peer >= n {
                return None;
            }
            let (table, region) = match o.args.func {
                Func::Send => (&mut sends, o.input),
                _ => (&mut recvs, o.output),
            };
            if table[r][peer]
                .replace((region.ptr as u64, region.len))
                .is_some()
            {
                return None;
            }
        }
    }
    let mut largest = 0;
    for r in 0..n {
        for p in 0..n {
            match (sends[r][p], recvs[p][r]) {
                (None, None) => {}
                (Some((_, bytes)), Some((dst, len))) if bytes == len => {
                    if p != r && bytes > 0 && !reaches(dst, gpus[r]) {
                        return None;
                    }
                    largest = largest.max(bytes);
                }
                _ => return None,
            }
        }
    }
    if largest < SENDS_MIN_BYTES {
        return None;
    }
    Some(
        (0..n)
            .map(|r| GroupSends {
                to: (0..n).map(|p| recvs[p][r].unwrap_or((0, 0))).collect(),
                from: (0..n)
                    .map(|p| sends[p][r].map_or(0, |(_, bytes)| bytes))
                    .collect(),
                largest,
            })
            .collect(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::coll::CollArgs;
    use crate::device::Region;
    use crate::dtype::DataType;
    use crate::redop::RedOp;

    /// Rank `gpu`'s Send to or Recv from `peer` of `bytes` bytes at `ptr`.
    pub(crate) fn p2p(func: Func, peer: usize, bytes: usize, gpu: usize, ptr: u64) -> Op {
        let region = Region::device(ptr, bytes, gpu);
        Op {
            args: CollArgs {
                func,
                count: bytes,
                dtype: DataType::Uint8,
                op: RedOp::Sum,
                root: peer,
                in_place: false,
            },
            input: region,
            output: region,
            stream: std::ptr::null_mut(),
        }
    }

    const MIB: usize = 1 << 20;

    #[test]
    fn a_ring_of_sends_goes_into_the_receive_buffers() {
        // nccl-tests' sendrecv on three ranks: r sends to r + 1 and receives from r - 1; rank
        // 0 also sends itself a smaller piece.
        let ops = [
            vec![
                p2p(Func::Send, 1, 4 * MIB, 0, 0x1000),
                p2p(Func::Recv, 2, 4 * MIB, 0, 0x2000),
                p2p(Func::Send, 0, 8, 0, 0x3000),
                p2p(Func::Recv, 0, 8, 0, 0x4000),
            ],
            vec![
                p2p(Func::Recv, 0, 4 * MIB, 1, 0x12000),
                p2p(Func::Send, 2, 4 * MIB, 1, 0x11000),
            ],
            vec![
                p2p(Func::Send, 0, 4 * MIB, 2, 0x21000),
                p2p(Func::Recv, 1, 4 * MIB, 2, 0x22000),
            ],
        ];
        let refs: Vec<&[Op]> = ops.iter().map(Vec::as_slice).collect();
        let asked = RefCell::new(Vec::new());
        let got = of_comm(&refs, &[0, 1, 2], |ptr, gpu| {
            asked.borrow_mut().push((ptr, gpu));
            true
        })
        .expect("a whole ring of matched sends");
        assert_eq!(
            got[0],
            GroupSends {
                to: vec![(0x4000, 8), (0x12000, 4 * MIB), (0, 0)],
                from: vec![8, 0, 4 * MIB],
                largest: 4 * MIB,
            }
        );
        assert_eq!(got[1].to, vec![(0, 0), (0, 0), (0x22000, 4 * MIB)]);
        assert_eq!(got[2].from, vec![0, 4 * MIB, 0]);
        assert!(got.iter().all(|g| g.largest == 4 * MIB));
        // Each receive buffer from the sender's GPU, a rank's own send not at all.
        let mut asked = asked.into_inner();
        asked.sort();
        assert_eq!(asked, vec![(0x2000, 2), (0x12000, 0), (0x22000, 1)]);
    }

    #[test]
    fn unmatched_small_unreachable_or_mixed_groups_stay_with_the_interpreter() {
        let yes = |_: u64, _: usize| true;
        let pair = |a: usize, b: usize| {
            [
                vec![
                    p2p(Func::Send, 1, a, 0, 0x1000),
                    p2p(Func::Recv, 1, b, 0, 0x2000),
                ],
                vec![
                    p2p(Func::Send, 0, b, 1, 0x11000),
                    p2p(Func::Recv, 0, a, 1, 0x12000),
                ],
            ]
        };
        let run = |ops: &[Vec<Op>], reaches: &dyn Fn(u64, usize) -> bool| {
            let refs: Vec<&[Op]> = ops.iter().map(Vec::as_slice).collect();
            of_comm(&refs, &[0, 1], reaches)
        };
        assert!(
            run(&pair(MIB, 8), &yes).is_some(),
            "one large send is enough"
        );
        assert!(
            run(&pair(MIB - 1, 8), &yes).is_none(),
            "all below the bound"
        );
        assert!(
            run(&pair(2 * MIB, 2 * MIB), &|ptr, _| ptr != 0x12000).is_none(),
            "rank 0's GPU does not reach rank 1's receive buffer"
        );
        // A Recv whose size differs from its Send's.
        let mut odd = pair(2 * MIB, 2 * MIB);
        odd[1][1].output.len -= 1;
        assert!(run(&odd, &yes).is_none());
        // A Send without its Recv.
        let mut lone = pair(2 * MIB, 2 * MIB);
        lone[1].pop();
        assert!(run(&lone, &yes).is_none());
        // Two Sends to the same peer.
        let mut twice = pair(2 * MIB, 2 * MIB);
        twice[0].push(p2p(Func::Send, 1, 8, 0, 0x5000));
        twice[1].push(p2p(Func::Recv, 0, 8, 1, 0x15000));
        assert!(run(&twice, &yes).is_none());
        // A collective in the group, a rank with nothing in it, a peer out of range.
        let mut mixed = pair(2 * MIB, 2 * MIB);
        mixed[0][0].args.func = Func::AllReduce;
        assert!(run(&mixed, &yes).is_none());
        let mut idle = pair(2 * MIB, 2 * MIB);
        idle[1].clear();
        assert!(run(&idle, &yes).is_none());
        let mut far = pair(2 * MIB, 2 * MIB);
        far[0][0].args.root = 2;
        assert!(run(&far, &yes).is_none());
    }
}
