//! Zero-copy collectives on plain buffers when one thread drives every rank of a communicator
//! (`ncclCommInitAll`, nccl-tests and `rnccl bench` with `-g N`, one JAX process): the group
//! then holds every rank's buffers, so the symmetric kernels (kernels/symmetric.cuh) can load
//! and store them in place through peer access, without registration, as NCCL's P2P transport
//! hands raw pointers between GPUs of one process ("P2P/direct pointer", src/transport/p2p.cc).
//! `NCCL_P2P_DIRECT_DISABLE=1` forbids it, as in NCCL.
//!
//! Every rank launches the same kernels in the same order: the choice is made here, once for
//! all of the communicator's ranks, from what they all share (the group's operations and the
//! knobs); the launch of each rank then applies its own size rules, which are the same on every
//! rank ([`crate::exec::plans::gpu_sym`], [`super::windows::SymKernels`]).

use super::group_sends::{self, GroupSends};
use crate::coll::Func;
use crate::device::cuda::peer_reaches;
use crate::exec::plans::gpu_sym;
use crate::exec::{Core, Op};

/// One share of a group as seen here: a rank's communicator core, the ordinal of its GPU (in
/// this process), whether its communicator allows the peers' own buffers
/// (`NCCL_P2P_DIRECT_DISABLE` off, [`super::GpuComm::direct_pointers`]) and has the direct
/// areas the kernels on them synchronise through ([`super::GpuComm::direct_areas`]), and its
/// operations in queue order.
pub(crate) struct Member<'a> {
    pub core: &'a Core,
    pub gpu: usize,
    pub direct: bool,
    pub ops: &'a [Op],
}

/// What one rank's part of a group may run on the other ranks' buffers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct GroupBuffers {
    /// Per collective (Send and Recv left out, [`is_collective`]), in queue order: every rank's
    /// (input, output) device addresses, indexed by rank, where the symmetric kernels may run
    /// on them in place; `None` where they may not.
    colls: Vec<Option<Vec<(u64, u64)>>>,
    /// The group's Send/Recv straight into the receive buffers ([`group_sends`]), when it
    /// takes that.
    sends: Option<GroupSends>,
}

impl GroupBuffers {
    /// Every rank's (input, output) of collective `k` (its place among the group's collectives,
    /// [`is_collective`]), when the symmetric kernels may use them.
    pub(crate) fn of(&self, k: usize) -> Option<&[(u64, u64)]> {
        self.colls.get(k)?.as_deref()
    }

    /// This rank's part of the group's direct send/receive, when the group takes one.
    pub(crate) fn sends(&self) -> Option<&GroupSends> {
        self.sends.as_ref()
    }
}

/// Whether `op` counts as a collective for [`GroupBuffers::of`]: every operation but Send and
/// Recv (which differ from rank to rank).
pub(crate) fn is_collective(op: &Op) -> bool {
    !op.args.func.p2p()
}

/// The functions the symmetric kernels run on a group's buffers (an all-to-all and a
/// broadcast as `SendRecv_ST`, [`super::group_sends`]: a send of block p to every rank p, the
/// root's buffer to every rank).
const SYM_FUNCS: [Func; 5] = [
    Func::AllReduce,
    Func::ReduceScatter,
    Func::AllGather,
    Func::AllToAll,
    Func::Broadcast,
];

/// Bytes of a collective's larger buffer from which a group's own buffers go to the symmetric
/// kernels. Below, the LL and direct kernels' single flag hop is as fast: on one H200 (two
/// ranks on GPU 0, `rnccl bench -g 2`, 2026-11-29) reduce-scatters of 64 B-256 KiB took 12-13
/// µs on the symmetric kernel against 9-12 on the direct kernel, all-gathers the same on both;
/// from 1 MiB the symmetric kernels lead (reduce-scatter 1 MiB 12.3 against 24.1 µs, 4 MiB 12.4
/// against 62.2). Symmetric windows keep NCCL's rule (every size), as their owner asked.
const GROUP_MIN_BYTES: usize = 1 << 20;

/// Bytes of a collective's larger buffer up to which a group's own buffers go to the symmetric
/// kernels: the 1-64 MiB range where the direct kernel's copies and flag rounds cost most (issue
/// 27's hole). Above it the direct kernel and the rings stay, measured at 0.97-1.04× NCCL on two
/// and four H200s, until a two-GPU run of the symmetric kernels there says otherwise.
const GROUP_MAX_BYTES: usize = 64 << 20;

/// Whether a group's collective of `func` whose larger buffer holds `bytes` bytes is one for the
/// symmetric kernels by function and size alone: from [`GROUP_MIN_BYTES`] to
/// [`GROUP_MAX_BYTES`], an all-to-all above [`GROUP_MAX_BYTES`]. There an all-to-all otherwise
/// runs point-to-point through the step interpreter on two ranks (0.98× NCCL at 4 GB on 2×H200,
/// 2026-11-29) and the direct kernel on more, both storing every byte into a peer's slot and
/// copying it out again, where `SendRecv_ST` stores it once: on one H200 (two ranks on GPU 0,
/// `rnccl bench alltoall -g 2`, 2026-12-02) it took 0.71 / 0.63 / 0.62 of their time at 64 /
/// 256 / 1024 MiB. Up to 64 MiB the direct kernel stays (1.08-1.88× NCCL on 2×H200; on one H200
/// `AllToAll_ST` took 0.97 / 1.10 / 0.76 of its time at 1 / 4 / 16 MiB) until two GPUs compare
/// them. A broadcast on two ranks above [`GROUP_MAX_BYTES`] too, where the ring stores every
/// byte into the peer's slot and the peer copies it out (0.99× NCCL at 1 and 4 GB on 2×H200,
/// 2026-11-29); on more ranks the root alone would store every byte once per peer (the direct
/// kernel's broadcast fell to 0.57× NCCL at 8 MB on 4 GPUs), so the ring stays. Buffers
/// registered with `ncclCommRegister` keep the same window ([`super::registered`]): the same
/// kernels, measured the same way.
pub(crate) fn group_size(func: Func, bytes: usize, nranks: usize) -> bool {
    match func {
        Func::AllToAll => bytes > GROUP_MAX_BYTES,
        Func::Broadcast => nranks == 2 && bytes > GROUP_MAX_BYTES,
        _ => (GROUP_MIN_BYTES..=GROUP_MAX_BYTES).contains(&bytes) && SYM_FUNCS.contains(&func),
    }
}

/// Whether the symmetric kernels take a group's collective of `func` whose larger buffer holds
/// `bytes` bytes, on `core`'s communicator: [`group_size`], where [`gpu_sym`] allows them.
fn takes(core: &Core, func: Func, bytes: usize) -> bool {
    group_size(func, bytes, core.nranks) && gpu_sym(core, func, bytes)
}

/// For each member, the group's buffers of its communicator: filled where the group holds
/// every rank of that communicator (at least two) and `NCCL_P2P_DIRECT_DISABLE` is off, per
/// collective as [`rows`] decides with [`takes`]' sizes and [`peer_reaches`], and for its
/// Send/Recv as [`group_sends::of_comm`] decides; empty otherwise. A group whose first member
/// queued neither a collective the symmetric kernels would take (the LL sizes of a
/// latency-bound loop) nor a Send or Recv costs one pass over that member's operations and
/// leaves every communicator of the group to the other kernels.
pub(crate) fn of_group(members: &[Member<'_>]) -> Vec<GroupBuffers> {
    let mut out = vec![GroupBuffers::default(); members.len()];
    let Some(first) = members.first().filter(|_| members.len() >= 2) else {
        return out;
    };
    let candidate =
        |o: &Op| o.args.func.p2p() || takes(first.core, o.args.func, o.input.len.max(o.output.len));
    if !first.ops.iter().any(candidate) {
        return out;
    }
    let keys: Vec<(u64, usize, usize)> = members
        .iter()
        .map(|m| (m.core.tag, m.core.nranks, m.core.rank))
        .collect();
    for ranks in whole_comms(&keys) {
        let core = members[ranks[0]].core;
        if !ranks.iter().all(|&j| members[j].direct) {
            continue;
        }
        let colls: Vec<Vec<&Op>> = ranks
            .iter()
            .map(|&j| members[j].ops.iter().filter(|o| is_collective(o)).collect())
            .collect();
        let gpus: Vec<usize> = ranks.iter().map(|&j| members[j].gpu).collect();
        let colls = rows(
            &colls,
            &gpus,
            |func, bytes| takes(core, func, bytes),
            peer_reaches,
        );
        let ops: Vec<&[Op]> = ranks.iter().map(|&j| members[j].ops).collect();
        let mut sends = group_sends::of_comm(&ops, &gpus, peer_reaches).map(Vec::into_iter);
        for &j in &ranks {
            out[j] = GroupBuffers {
                colls: colls.clone(),
                sends: sends.as_mut().and_then(Iterator::next),
            };
        }
    }
    out
}

/// The communicators of which `keys` (each member's communicator tag, rank count and rank)
/// hold every rank exactly once, at least two: per communicator, its members' places in `keys`
/// in rank order.
fn whole_comms(keys: &[(u64, usize, usize)]) -> Vec<Vec<usize>> {
    let mut seen = vec![false; keys.len()];
    let mut comms = Vec::new();
    for i in 0..keys.len() {
        if seen[i] {
            continue;
        }
        let (tag, nranks, _) = keys[i];
        let mut by_rank: Vec<Option<usize>> = vec![None; nranks];
        let mut whole = nranks >= 2;
        for (j, &(t, n, rank)) in keys.iter().enumerate() {
            if (t, n) != (tag, nranks) {
                continue;
            }
            seen[j] = true;
            match by_rank.get_mut(rank) {
                Some(slot @ None) => *slot = Some(j),
                _ => whole = false,
            }
        }
        if let Some(ranks) = by_rank.into_iter().collect::<Option<Vec<usize>>>()
            && whole
        {
            comms.push(ranks);
        }
    }
    comms
}

/// Per collective (`colls[r]`: rank r's collectives in queue order, on GPU `gpus[r]`), every
/// rank's (input, output) where the symmetric kernels may use them in place: every rank
/// queued the same function, count, type and root, one of the symmetric kernels' functions, at a
/// size `sym_size` takes (given the function and the larger of input and output bytes), and
/// `reaches(ptr, gpu)` holds for every rank's input and output from every other rank's GPU.
/// Empty when the ranks queued different numbers of collectives.
fn rows(
    colls: &[Vec<&Op>],
    gpus: &[usize],
    sym_size: impl Fn(Func, usize) -> bool,
    reaches: impl Fn(u64, usize) -> bool,
) -> Vec<Option<Vec<(u64, u64)>>> {
    let count = colls.first().map_or(0, Vec::len);
    if colls.iter().any(|c| c.len() != count) {
        return Vec::new();
    }
    (0..count)
        .map(|k| {
            let ops: Vec<&Op> = colls.iter().map(|c| c[k]).collect();
            let first = ops[0].args;
            let alike = ops.iter().all(|o| {
                (o.args.func, o.args.count, o.args.dtype, o.args.root)
                    == (first.func, first.count, first.dtype, first.root)
                    && o.on_device()
            });
            let total = ops[0].input.len.max(ops[0].output.len);
            if !alike || !SYM_FUNCS.contains(&first.func) || !sym_size(first.func, total) {
                return None;
            }
            let rows: Vec<(u64, u64)> = ops
                .iter()
                .map(|o| (o.input.ptr as u64, o.output.ptr as u64))
                .collect();
            let reached = |r: usize, ptr: u64| {
                gpus.iter()
                    .enumerate()
                    .all(|(p, &gpu)| p == r || reaches(ptr, gpu))
            };
            let all = rows.iter().enumerate().all(|(r, &(input, output))| {
                reached(r, input) && (output == input || reached(r, output))
            });
            all.then_some(rows)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::coll::CollArgs;
    use crate::device::Region;
    use crate::dtype::DataType;
    use crate::redop::RedOp;

    /// Rank `gpu`'s operation of `func` on `count` float32s, input at `input`, output at
    /// `output` (sized as nccl.h's buffers for two ranks).
    fn op(func: Func, count: usize, gpu: usize, input: u64, output: u64) -> Op {
        let bytes = count * 4;
        let (inb, outb) = match func {
            Func::AllGather => (bytes, 2 * bytes),
            Func::ReduceScatter => (2 * bytes, bytes),
            _ => (bytes, bytes),
        };
        Op {
            args: CollArgs {
                func,
                count,
                dtype: DataType::Float32,
                op: RedOp::Sum,
                root: 0,
                in_place: input == output,
            },
            input: Region::device(input, inb, gpu),
            output: Region::device(output, outb, gpu),
            stream: std::ptr::null_mut(),
        }
    }

    #[test]
    fn a_communicator_counts_when_the_group_holds_each_of_its_ranks_once() {
        // Two communicators interleaved, ranks out of order: both whole, members by rank.
        let keys = [(7, 2, 1), (9, 2, 0), (7, 2, 0), (9, 2, 1)];
        assert_eq!(whole_comms(&keys), vec![vec![2, 0], vec![1, 3]]);
        // A rank missing, a rank twice, a communicator of one rank: none.
        assert!(whole_comms(&[(7, 3, 0), (7, 3, 1)]).is_empty());
        assert!(whole_comms(&[(7, 2, 0), (7, 2, 0)]).is_empty());
        assert!(whole_comms(&[(7, 2, 0), (7, 2, 1), (7, 2, 1)]).is_empty());
        assert!(whole_comms(&[(7, 1, 0), (8, 1, 0)]).is_empty());
        // Same tag, another size: another communicator.
        assert_eq!(
            whole_comms(&[(7, 2, 0), (7, 3, 0), (7, 2, 1)]),
            vec![vec![0, 2]]
        );
    }

    #[test]
    fn the_ranks_buffers_go_to_every_rank_where_each_gpu_reaches_the_others() {
        let r0 = [
            op(Func::AllReduce, 1 << 20, 0, 0x1000, 0x1000),
            op(Func::AllGather, 1 << 20, 0, 0x2000, 0x3000),
            op(Func::Reduce, 1 << 20, 0, 0x4000, 0x4000),
            op(Func::ReduceScatter, 1 << 20, 0, 0x5000, 0x6000),
        ];
        let r1 = [
            op(Func::AllReduce, 1 << 20, 1, 0xa000, 0xb000),
            op(Func::AllGather, 1 << 20, 1, 0xc000, 0xd000),
            op(Func::Reduce, 1 << 20, 1, 0xe000, 0xe000),
            op(Func::ReduceScatter, 1 << 20, 1, 0xf000, 0xf800),
        ];
        let colls = vec![r0.iter().collect(), r1.iter().collect()];
        let asked = RefCell::new(Vec::new());
        let rows = rows(
            &colls,
            &[0, 1],
            |_, _| true,
            |ptr, gpu| {
                asked.borrow_mut().push((ptr, gpu));
                ptr != 0x6000
            },
        );
        assert_eq!(
            rows,
            vec![
                Some(vec![(0x1000, 0x1000), (0xa000, 0xb000)]),
                Some(vec![(0x2000, 0x3000), (0xc000, 0xd000)]),
                // No symmetric kernel reduces to a root.
                None,
                // Rank 1's GPU does not reach rank 0's output.
                None,
            ]
        );
        let asked = asked.into_inner();
        // Each buffer from the other rank's GPU only, an in-place buffer once.
        assert_eq!(&asked[..3], &[(0x1000, 1), (0xa000, 0), (0xb000, 0)]);
        assert!(asked.iter().all(|&(ptr, gpu)| (ptr < 0xa000) == (gpu == 1)));
    }

    #[test]
    fn ranks_that_queued_differently_or_sizes_the_kernels_leave_get_none() {
        let reaches = |_: u64, _: usize| true;
        let a = op(Func::AllReduce, 1 << 20, 0, 0x1000, 0x1000);
        let b = op(Func::AllReduce, 1 << 20, 1, 0x2000, 0x2000);
        let other_count = op(Func::AllReduce, 1 << 19, 1, 0x2000, 0x2000);
        let other_func = op(Func::AllGather, 1 << 20, 1, 0x2000, 0x3000);
        let mut bcast = [
            op(Func::Broadcast, 1 << 20, 0, 0x1000, 0x1000),
            op(Func::Broadcast, 1 << 20, 1, 0x2000, 0x2000),
        ];
        bcast[1].args.root = 1;
        let colls = vec![vec![&bcast[0]], vec![&bcast[1]]];
        assert_eq!(
            rows(&colls, &[0, 1], |_, _| true, reaches),
            vec![None],
            "the ranks name different roots"
        );
        for odd in [&other_count, &other_func] {
            let colls = vec![vec![&a], vec![odd]];
            assert_eq!(rows(&colls, &[0, 1], |_, _| true, reaches), vec![None]);
        }
        // The size rule sees the function and the larger buffer's bytes.
        let seen = RefCell::new(None);
        let colls = vec![vec![&a], vec![&b]];
        let none = rows(
            &colls,
            &[0, 1],
            |f, bytes| {
                *seen.borrow_mut() = Some((f, bytes));
                false
            },
            reaches,
        );
        assert_eq!(none, vec![None]);
        assert_eq!(seen.into_inner(), Some((Func::AllReduce, 4 << 20)));
        // Different numbers of collectives: nothing lines up.
        let colls = vec![vec![&a, &a], vec![&b]];
        assert!(rows(&colls, &[0, 1], |_, _| true, reaches).is_empty());
    }

    #[test]
    fn send_and_recv_are_not_collectives() {
        let send = op(Func::Send, 8, 0, 0x1000, 0x1000);
        let recv = op(Func::Recv, 8, 0, 0x1000, 0x1000);
        let ar = op(Func::AllReduce, 8, 0, 0x1000, 0x1000);
        assert!(!is_collective(&send) && !is_collective(&recv) && is_collective(&ar));
        let g = GroupBuffers {
            colls: vec![None, Some(vec![(1, 2), (3, 4)])],
            sends: None,
        };
        assert_eq!(g.of(0), None);
        assert_eq!(g.of(1), Some(&[(1, 2), (3, 4)][..]));
        assert_eq!(g.of(2), None);
    }
}
