//! The one-shot LL all-reduce (`kernels/ll.cuh`): its argument block, passed by value as the
//! kernel's parameter (no program in memory, nothing to copy or keep per launch), and how
//! many thread blocks it runs on. Every rank stores its input into every peer's LL area as
//! 16-byte lines carrying 8 data bytes and two flags, and reduces what the peers stored into
//! its own area, in rank order (NCCL's LL protocol, internals §5.3; one-shot as vLLM's custom
//! all-reduce, gpu-backend.md §B.1). The two-shot direct all-reduce (`kernels/direct.cuh`) takes
//! the same arguments and runs on the direct areas that follow the LL areas.

use super::program::{Control, header};
use super::windows::SymKernels;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{
    DIRECT_BLOCKS, DIRECT_SLOT_BYTES, DirectMode, LL_CHUNK_BYTES, LL_MAX_RANKS, LlArgs,
};
use crate::error::{Error, Result};

/// All-reduce inputs up to this many bytes run the one-shot LL kernel when `NCCL_PROTO` allows
/// LL: below it the ring's round trips per step cost more than storing every byte twice over
/// (gpu-backend.md §B.4: one-shot LL at the launch floor up to 512 KB on 2×H200, where NCCL's
/// ring takes 15-17 µs).
pub(crate) const LL_AUTO_MAX_BYTES: usize = 512 << 10;
/// Most thread blocks of one LL kernel: few enough to be resident together on any GPU rnccl
/// runs on (a block waits for lines that the same block of the peer stores).
const LL_MAX_BLOCKS: usize = 64;
/// Lines each thread handles per chunk at least before more blocks are used.
const LL_LINES_PER_THREAD: usize = 2;

/// One LL all-reduce of `bytes` bytes per rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LlOp {
    /// Input (device address).
    pub src: u64,
    /// Output (device address; may equal `src`).
    pub dst: u64,
    /// Bytes per rank: the all-reduce's buffer; for the direct kernel's reduce-scatter the
    /// output, for its all-gather the input.
    pub bytes: usize,
    /// What the direct kernel runs (the LL kernel only all-reduces).
    pub mode: DirectMode,
    /// The direct broadcast's root (a rank); 0 otherwise.
    pub root: u32,
    /// Device memory: the last epoch used and the blocks finished (`u32` each), the last
    /// operation reported finished (`u64`), and from word `DIRECT_ROUNDS_WORD` the direct
    /// kernel's round count per block (`u64` each).
    pub state: u64,
    /// Per rank: the area of that rank this rank stores its lines into (0 for this rank).
    pub out: Vec<u64>,
    /// Per rank: this rank's area that rank stores its lines into (0 for this rank).
    pub inp: Vec<u64>,
    /// Per rank: `(step, live)` counter addresses (device `u64[2]` and host-mapped `u64[2]`)
    /// of this rank's send end of its first point-to-point connection with that rank, whose
    /// byte count (index 1) each operation raises by its bytes (0 for this rank).
    pub out_counts: Vec<(u64, u64)>,
    /// The same for the receive end.
    pub inp_counts: Vec<(u64, u64)>,
    /// Symmetric kernels: per rank, its input as mapped in this process (empty otherwise).
    pub peer_src: Vec<u64>,
    /// Symmetric kernels: per rank, its output as mapped in this process (empty otherwise);
    /// `SendRecv_ST`: where this rank's send to that rank goes (`peer_src`: where it comes
    /// from).
    pub peer_dst: Vec<u64>,
    /// `SendRecv_ST`: per rank, the bytes this rank sends it (empty otherwise).
    pub send_bytes: Vec<u64>,
    /// `SendRecv_ST`: per rank, the bytes this rank receives from it (empty otherwise).
    pub recv_bytes: Vec<u64>,
}

/// Bytes of a shard each block of a direct all-reduce gets at least per round: fewer blocks
/// below `DIRECT_BLOCKS × DIRECT_MIN_UNIT` bytes per shard, so a block's stores are not
/// dwarfed by its two flag hops.
const DIRECT_MIN_UNIT: usize = 16 << 10;

/// How a direct kernel (`kernels/direct.cuh`) splits its shards: `blocks` thread blocks, each
/// moving `unit` bytes of every shard per round (`LlArgs::unit`), for `rounds` rounds at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirectPlan {
    /// Thread blocks, 1..=[`DIRECT_BLOCKS`].
    pub blocks: u32,
    /// Bytes of a shard one block moves per round: a multiple of 16, 16..=[`DIRECT_SLOT_BYTES`].
    pub unit: usize,
    /// Rounds of the first block (every other block runs as many or one fewer).
    pub rounds: usize,
}

/// Bytes of one shard of a direct kernel of `mode` with `bytes` bytes per rank (as
/// [`LlOp::bytes`]) over `nranks` ranks: an all-reduce's buffer ÷ `nranks` rounded up to 16
/// bytes (as the kernel computes it), the others' per-rank part.
fn direct_shard(mode: DirectMode, bytes: usize, nranks: usize) -> usize {
    match mode {
        DirectMode::AllReduce | DirectMode::SymAllReduce => {
            bytes.div_ceil(nranks.max(1)).next_multiple_of(16)
        }
        DirectMode::AllGather
        | DirectMode::ReduceScatter
        | DirectMode::Broadcast
        | DirectMode::AllToAll
        | DirectMode::SymReduceScatter
        | DirectMode::SymAllGather
        | DirectMode::SymSendRecv => bytes,
    }
}

/// Bytes a symmetric kernel's pieces are a multiple of, where they are that large: whole
/// 128-byte lines of the peers' memory for every block but the last, whatever the block count.
/// On 2×H200 (2026-11-29, `-g 2`) `NCCL_SYM_CTAS=96` split an 8 MB all-reduce into 43,696-byte
/// pieces and took 38.6 µs, more than 64 blocks' 38.4 and 128's 35.5.
pub(crate) const SYM_PIECE_ALIGN: usize = 512;

/// The split of a symmetric kernel of `mode` (`kernels/symmetric.cuh`) with `bytes` bytes per
/// rank (as [`LlOp::bytes`]) over `nranks` ranks: [`SymKernels::blocks`] blocks (at most
/// `max_blocks`), each taking an equal piece (`unit`) of the rank's shard in one round: a
/// multiple of [`SYM_PIECE_ALIGN`] bytes where pieces are that large, of 16 below; blocks that
/// would get nothing are left out.
pub(crate) fn sym_plan(
    mode: DirectMode,
    bytes: usize,
    nranks: usize,
    kernels: &SymKernels,
    max_blocks: usize,
) -> DirectPlan {
    let shard = direct_shard(mode, bytes, nranks).max(1);
    let even = shard.div_ceil(kernels.blocks(shard).min(max_blocks).max(1));
    let align = if even >= SYM_PIECE_ALIGN {
        SYM_PIECE_ALIGN
    } else {
        16
    };
    let unit = even.next_multiple_of(align).max(16);
    DirectPlan {
        blocks: shard.div_ceil(unit) as u32,
        unit,
        rounds: 1,
    }
}

/// The split of a direct kernel of `mode` with `bytes` bytes per rank (as [`LlOp::bytes`])
/// over `nranks` ranks on at most `max_blocks` blocks: one block per [`DIRECT_MIN_UNIT`] of a
/// shard up to `max_blocks` (and [`DIRECT_BLOCKS`]), then as few rounds as the slots allow,
/// with every block running the same number of rounds (the slowest block sets the kernel's
/// time).
pub(crate) fn direct_plan(
    mode: DirectMode,
    bytes: usize,
    nranks: usize,
    max_blocks: usize,
) -> DirectPlan {
    let shard = direct_shard(mode, bytes, nranks).max(1);
    let blocks = shard
        .div_ceil(DIRECT_MIN_UNIT)
        .clamp(1, max_blocks.clamp(1, DIRECT_BLOCKS));
    let rounds = shard.div_ceil(blocks * DIRECT_SLOT_BYTES);
    let unit = shard.div_ceil(blocks * rounds).next_multiple_of(16).max(16);
    DirectPlan {
        blocks: blocks as u32,
        unit,
        rounds: shard.div_ceil(unit).div_ceil(blocks),
    }
}

/// Thread blocks for an LL all-reduce of `bytes` bytes with `threads` threads per block: enough
/// that each thread has [`LL_LINES_PER_THREAD`] lines of a chunk, at most [`LL_MAX_BLOCKS`]
/// and `max_blocks` (at least one).
pub(crate) fn blocks(bytes: usize, threads: usize, max_blocks: usize) -> u32 {
    let lines = bytes.min(LL_CHUNK_BYTES).div_ceil(8);
    lines
        .div_ceil(threads * LL_LINES_PER_THREAD)
        .clamp(1, LL_MAX_BLOCKS.min(max_blocks).max(1)) as u32
}

/// The kernel's arguments (`struct LlArgs`) for operation number `seq` (kernels/program.cuh,
/// operation tracking).
///
/// Errors: [`Error::Internal`] for more than [`LL_MAX_RANKS`] ranks or mismatched address
/// lists.
pub(crate) fn encode(op: &LlOp, seq: u64, spec: &ReduceSpec, ctl: &Control) -> Result<LlArgs> {
    let n = op.out.len();
    if n > LL_MAX_RANKS || op.inp.len() != n || op.out_counts.len() != n || op.inp_counts.len() != n
    {
        return Err(Error::Internal(format!(
            "an LL all-reduce over {n} ranks with {} incoming areas (at most {LL_MAX_RANKS})",
            op.inp.len()
        )));
    }
    let list = |f: &dyn Fn(usize) -> u64| {
        let mut a = [0u64; LL_MAX_RANKS];
        for (r, v) in a.iter_mut().enumerate().take(n) {
            *v = f(r);
        }
        a
    };
    Ok(LlArgs {
        ctl: header([0; 3], [0; 3], spec, ctl),
        src: op.src,
        dst: op.dst,
        bytes: op.bytes as u64,
        state: op.state,
        seq,
        unit: 0,
        nranks: n as u32,
        mode: op.mode as u32,
        root: op.root,
        reg_blocks: 0,
        reg_unit: 0,
        direct_blocks: 0,
        pad: 0,
        out: list(&|r| op.out[r]),
        inp: list(&|r| op.inp[r]),
        out_step: list(&|r| op.out_counts[r].0),
        out_live: list(&|r| op.out_counts[r].1),
        in_step: list(&|r| op.inp_counts[r].0),
        in_live: list(&|r| op.inp_counts[r].1),
        peer_src: list(&|r| op.peer_src.get(r).copied().unwrap_or(0)),
        peer_dst: list(&|r| op.peer_dst.get(r).copied().unwrap_or(0)),
        send_bytes: list(&|r| op.send_bytes.get(r).copied().unwrap_or(0)),
        recv_bytes: list(&|r| op.recv_bytes.get(r).copied().unwrap_or(0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_the_struct() {
        let ctl = Control {
            report: 0x10,
            abort: 0x20,
            claim: 0x30,
            timeout_ns: 5,
            ops: 0x40,
            finished: 0x48,
            rank: 1,
            slot_bytes: 512,
        };
        let op = LlOp {
            src: 0x1000,
            dst: 0x2000,
            bytes: 12,
            mode: DirectMode::Broadcast,
            root: 1,
            state: 0x3000,
            out: vec![0xa0, 0],
            inp: vec![0xb0, 0],
            out_counts: vec![(0xc0, 0xc8), (0, 0)],
            inp_counts: vec![(0xd0, 0xd8), (0, 0)],
            peer_src: vec![0xe0, 0x1000],
            peer_dst: vec![],
            send_bytes: vec![0, 0x40],
            recv_bytes: vec![0x50],
        };
        let args = encode(
            &op,
            7,
            &ReduceSpec::copy(crate::dtype::DataType::Float32),
            &ctl,
        )
        .unwrap();
        let mut b = Vec::new();
        crate::device::cuda::abi::put(&mut b, &args);
        assert_eq!(b.len(), size_of::<LlArgs>());
        // The arguments follow the program header (`ctl`).
        let h = size_of::<crate::device::cuda::abi::Program>();
        let at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        assert_eq!(at(h), 0x1000);
        assert_eq!(at(h + 16), 12);
        assert_eq!(at(h + 24), 0x3000);
        assert_eq!(at(h + 32), 7, "seq");
        assert_eq!(
            at(h + 40),
            0,
            "unit: the launch sets it for the direct kernel"
        );
        assert_eq!(u32::from_le_bytes(b[h + 48..h + 52].try_into().unwrap()), 2);
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(word(h + 52), 3, "mode");
        assert_eq!(word(h + 56), 1, "root");
        assert_eq!(word(h + 60), 0, "reg_blocks: the launch sets it");
        assert_eq!(at(h + 64), 0, "reg_unit");
        assert_eq!(word(h + 72), 0, "direct_blocks: the launch sets it");
        assert_eq!(at(h + 80), 0xa0, "out[0]");
        assert_eq!(at(h + 80 + 64), 0xb0, "in[0]");
        assert_eq!(at(h + 80 + 8 * 15), 0, "unused ranks are zero");
        for (list, want) in [(2, 0xc0), (3, 0xc8), (4, 0xd0), (5, 0xd8), (6, 0xe0)] {
            assert_eq!(at(h + 80 + 64 * list), want, "list {list}");
        }
        assert_eq!(at(h + 80 + 64 * 6 + 8), 0x1000, "peer_src[1]");
        assert_eq!(at(h + 80 + 64 * 7), 0, "no peer_dst: zero");
        assert_eq!(at(h + 80 + 64 * 8 + 8), 0x40, "send_bytes[1]");
        assert_eq!(at(h + 80 + 64 * 9), 0x50, "recv_bytes[0]");
        assert_eq!(at(h + 80 + 64 * 9 + 8), 0, "recv_bytes[1]: none given");
        assert_eq!(h + 80 + 64 * 10, size_of::<LlArgs>());
        let nine = LlOp {
            out: vec![0; 9],
            inp: vec![0; 9],
            out_counts: vec![(0, 0); 9],
            inp_counts: vec![(0, 0); 9],
            ..op
        };
        assert!(
            encode(
                &nine,
                7,
                &ReduceSpec::copy(crate::dtype::DataType::Float32),
                &ctl
            )
            .is_err()
        );
    }

    #[test]
    fn direct_plans_grow_with_the_shard_up_to_the_channels() {
        use DirectMode::{AllGather, AllReduce, ReduceScatter};
        let plan = |blocks, unit, rounds| DirectPlan {
            blocks,
            unit,
            rounds,
        };
        assert_eq!(direct_plan(AllReduce, 8, 2, 64), plan(1, 16, 1));
        assert_eq!(
            direct_plan(AllReduce, 1 << 20, 2, 64),
            plan(32, 16 << 10, 1),
            "512 KB shards: 32 of 16 KB"
        );
        assert_eq!(direct_plan(AllReduce, 1 << 20, 4, 64).blocks, 16);
        assert_eq!(direct_plan(AllReduce, 256 << 10, 2, 64).blocks, 8);
        assert_eq!(
            direct_plan(AllReduce, 16 << 20, 2, 1024),
            plan(DIRECT_BLOCKS as u32, 64 << 10, 1)
        );
        assert_eq!(
            direct_plan(AllReduce, 8 << 20, 2, 16),
            plan(16, 64 << 10, 4),
            "NCCL_MAX_NCHANNELS bounds it: four rounds of full slots"
        );
        assert_eq!(direct_plan(AllReduce, 8 << 20, 2, 0).blocks, 1);
        assert_eq!(
            direct_plan(AllGather, 512 << 10, 2, 64).blocks,
            32,
            "the per-rank part is the shard"
        );
        assert_eq!(direct_plan(ReduceScatter, 256 << 10, 4, 64).blocks, 16);
    }

    #[test]
    fn sym_plans_split_the_shard_in_one_round() {
        use DirectMode::{SymAllGather, SymAllReduce, SymReduceScatter};
        let cfg = |pairs: &[(&str, &str)]| {
            SymKernels::from_config(&crate::config::Config::from_pairs(pairs).unwrap()).unwrap()
        };
        let auto = cfg(&[]);
        let plan = |blocks, unit| DirectPlan {
            blocks,
            unit,
            rounds: 1,
        };
        // 8 MB over 2 ranks: 4 MB shards, 128 blocks of 32 KB.
        assert_eq!(
            sym_plan(SymAllReduce, 8 << 20, 2, &auto, usize::MAX),
            plan(128, 32 << 10)
        );
        // 1 MB over 4 ranks: 256 KB shards, one block per 16 KB.
        assert_eq!(
            sym_plan(SymAllReduce, 1 << 20, 4, &auto, usize::MAX),
            plan(16, 16 << 10)
        );
        // A reduce-scatter's and an all-gather's shard is the per-rank part.
        assert_eq!(
            sym_plan(SymReduceScatter, 1 << 20, 4, &auto, usize::MAX),
            plan(64, 16 << 10)
        );
        assert_eq!(
            sym_plan(SymAllGather, 100, 8, &auto, usize::MAX),
            plan(1, 112)
        );
        // 8 bytes over 2 ranks: one 16-byte piece.
        assert_eq!(sym_plan(SymAllReduce, 8, 2, &auto, usize::MAX), plan(1, 16));
        // NCCL_SYM_CTAS fixes the blocks, leaving out those that would get nothing.
        let eight = cfg(&[("NCCL_SYM_CTAS", "8")]);
        assert_eq!(
            sym_plan(SymAllReduce, 8 << 20, 2, &eight, usize::MAX),
            plan(8, 512 << 10)
        );
        assert_eq!(
            sym_plan(SymAllGather, 64, 2, &eight, usize::MAX),
            plan(4, 16)
        );
        // Pieces of 512 bytes and more are whole multiples of 512: 96 blocks of an 8 MB
        // all-reduce get 44,032 bytes each, not 43,696, the last one less.
        let ninety_six = cfg(&[("NCCL_SYM_CTAS", "96")]);
        assert_eq!(
            sym_plan(SymAllReduce, 8 << 20, 2, &ninety_six, usize::MAX),
            plan(96, 44_032)
        );
        // Ranks sharing a GPU cap the blocks (GpuComm::block_cap), knob or not: the shard
        // spreads over fewer, larger pieces, still in one round.
        assert_eq!(
            sym_plan(SymAllReduce, 8 << 20, 2, &auto, 33),
            plan(33, 127_488)
        );
        assert_eq!(
            sym_plan(SymAllReduce, 8 << 20, 2, &eight, 4),
            plan(4, 1 << 20)
        );
        assert_eq!(
            sym_plan(SymAllReduce, 8 << 20, 2, &auto, 0),
            plan(1, 4 << 20)
        );
    }

    #[test]
    fn direct_plans_give_every_block_the_fewest_rounds() {
        for bytes in [
            17,
            1000,
            (1 << 20) + 48,
            3 << 20,
            10 << 20,
            (20 << 20) + 16,
            33_554_431,
            64 << 20,
        ] {
            for (n, max) in [(2, 64), (3, 64), (4, 24), (8, 128)] {
                let p = direct_plan(DirectMode::AllReduce, bytes, n, max);
                let blocks = p.blocks as usize;
                let shard = direct_shard(DirectMode::AllReduce, bytes, n);
                assert!(p.unit.is_multiple_of(16) && (16..=DIRECT_SLOT_BYTES).contains(&p.unit));
                assert!(blocks <= max.min(DIRECT_BLOCKS));
                // Block b runs the pieces b, b + blocks, …: the first block runs the most.
                assert_eq!(p.rounds, shard.div_ceil(p.unit).div_ceil(blocks));
                assert_eq!(
                    p.rounds,
                    shard.div_ceil(blocks * DIRECT_SLOT_BYTES),
                    "{bytes} B over {n} ranks: {p:?}"
                );
            }
        }
    }

    #[test]
    fn blocks_grow_with_size_up_to_a_chunk() {
        let all = usize::MAX;
        assert_eq!(blocks(8, 512, all), 1);
        assert_eq!(blocks(8 << 10, 512, all), 1);
        assert_eq!(blocks(64 << 10, 512, all), 8);
        assert_eq!(blocks(LL_CHUNK_BYTES, 512, all), 64);
        assert_eq!(blocks(64 << 20, 512, all), 64);
        // Ranks sharing a GPU cap them (GpuComm::block_cap); a cap of 0 still runs one.
        assert_eq!(blocks(LL_CHUNK_BYTES, 512, 33), 33);
        assert_eq!(blocks(64 << 10, 512, 33), 8);
        assert_eq!(blocks(LL_CHUNK_BYTES, 512, 0), 1);
    }
}
