//! The one-shot LL all-reduce (`kernels/ll.cuh`): its argument block, passed by value as the
//! kernel's parameter (no program in memory, nothing to copy or keep per launch), and how
//! many thread blocks it runs on. Every rank stores its input into every peer's LL area as
//! 16-byte lines carrying 8 data bytes and two flags, and reduces what the peers stored into
//! its own area, in rank order (NCCL's LL protocol, internals §5.3; one-shot as vLLM's custom
//! all-reduce, gpu-backend.md §B.1).

use super::program::{Control, PROGRAM_BYTES, Writer, header};
use crate::device::ReduceSpec;
use crate::error::{Error, Result};

/// Bytes of one half of an LL area (kernels/ll.cuh `RNCCL_LL_HALF`): an operation's epoch
/// picks the half its lines go to.
pub(crate) const LL_HALF_BYTES: usize = 1 << 20;
/// Bytes of the LL area a rank keeps for each peer's lines (both halves).
pub(crate) const LL_AREA_BYTES: usize = 2 * LL_HALF_BYTES;
/// Input bytes one epoch carries (a line holds 8 data bytes in 16): larger inputs go in chunks.
pub(crate) const LL_CHUNK_BYTES: usize = LL_HALF_BYTES / 2;
/// Most ranks of a one-shot LL all-reduce (kernels/ll.cuh `RNCCL_LL_MAX_RANKS`).
pub(crate) const LL_MAX_RANKS: usize = 8;
/// Bytes of `struct LlArgs`.
pub(crate) const LL_ARGS_BYTES: usize = 552;
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
    /// Bytes per rank.
    pub bytes: usize,
    /// 16 bytes of device memory: the last epoch used and the blocks finished (`u32` each),
    /// and the last operation reported finished (`u64`).
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
}

/// Thread blocks for an LL all-reduce of `bytes` bytes with `threads` threads per block: enough
/// that each thread has [`LL_LINES_PER_THREAD`] lines of a chunk, at most [`LL_MAX_BLOCKS`].
pub(crate) fn blocks(bytes: usize, threads: usize) -> u32 {
    let lines = bytes.min(LL_CHUNK_BYTES).div_ceil(8);
    lines
        .div_ceil(threads * LL_LINES_PER_THREAD)
        .clamp(1, LL_MAX_BLOCKS) as u32
}

/// The kernel argument block (`struct LlArgs`, [`LL_ARGS_BYTES`]) of operation number `seq`
/// (kernels/program.cuh, operation tracking).
///
/// Errors: [`Error::Internal`] for more than [`LL_MAX_RANKS`] ranks or mismatched address
/// lists.
pub(crate) fn encode(op: &LlOp, seq: u64, spec: &ReduceSpec, ctl: &Control) -> Result<Vec<u8>> {
    let n = op.out.len();
    if n > LL_MAX_RANKS || op.inp.len() != n || op.out_counts.len() != n || op.inp_counts.len() != n
    {
        return Err(Error::Internal(format!(
            "an LL all-reduce over {n} ranks with {} incoming areas (at most {LL_MAX_RANKS})",
            op.inp.len()
        )));
    }
    let mut w = Writer(Vec::with_capacity(LL_ARGS_BYTES));
    header(&mut w, [0; 3], [0; 3], spec, ctl);
    debug_assert_eq!(w.0.len(), PROGRAM_BYTES);
    for v in [op.src, op.dst, op.bytes as u64, op.state, seq] {
        w.u64(v);
    }
    w.u32(n as u32);
    w.u32(0);
    let step = |c: &Vec<(u64, u64)>| c.iter().map(|x| x.0).collect::<Vec<u64>>();
    let live = |c: &Vec<(u64, u64)>| c.iter().map(|x| x.1).collect::<Vec<u64>>();
    let lists = [
        op.out.clone(),
        op.inp.clone(),
        step(&op.out_counts),
        live(&op.out_counts),
        step(&op.inp_counts),
        live(&op.inp_counts),
    ];
    for list in &lists {
        for r in 0..LL_MAX_RANKS {
            w.u64(list.get(r).copied().unwrap_or(0));
        }
    }
    debug_assert_eq!(w.0.len(), LL_ARGS_BYTES);
    Ok(w.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_the_kernel_header() {
        let h = include_str!("../../../kernels/ll.cuh");
        for want in [
            format!("static_assert(sizeof(LlArgs) == {LL_ARGS_BYTES},"),
            format!(
                "#define RNCCL_LL_HALF (1u << {})",
                LL_HALF_BYTES.trailing_zeros()
            ),
            format!("#define RNCCL_LL_MAX_RANKS {LL_MAX_RANKS}"),
        ] {
            assert!(h.contains(&want), "ll.cuh lacks `{want}`");
        }
        assert!(LL_HALF_BYTES.is_power_of_two());
    }

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
            state: 0x3000,
            out: vec![0xa0, 0],
            inp: vec![0xb0, 0],
            out_counts: vec![(0xc0, 0xc8), (0, 0)],
            inp_counts: vec![(0xd0, 0xd8), (0, 0)],
        };
        let b = encode(&op, 7, &ReduceSpec::copy(crate::DataType::Float32), &ctl).unwrap();
        assert_eq!(b.len(), LL_ARGS_BYTES);
        let at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        assert_eq!(at(PROGRAM_BYTES), 0x1000);
        assert_eq!(at(PROGRAM_BYTES + 16), 12);
        assert_eq!(at(PROGRAM_BYTES + 24), 0x3000);
        assert_eq!(at(PROGRAM_BYTES + 32), 7, "seq");
        assert_eq!(u32::from_le_bytes(b[160..164].try_into().unwrap()), 2);
        assert_eq!(at(168), 0xa0, "out[0]");
        assert_eq!(at(168 + 64), 0xb0, "in[0]");
        assert_eq!(at(168 + 8 * 15), 0, "unused ranks are zero");
        for (list, want) in [(2, 0xc0), (3, 0xc8), (4, 0xd0), (5, 0xd8)] {
            assert_eq!(at(168 + 64 * list), want, "counter list {list}");
        }
        assert_eq!(168 + 64 * 6, LL_ARGS_BYTES);
        let nine = LlOp {
            out: vec![0; 9],
            inp: vec![0; 9],
            out_counts: vec![(0, 0); 9],
            inp_counts: vec![(0, 0); 9],
            ..op
        };
        assert!(encode(&nine, 7, &ReduceSpec::copy(crate::DataType::Float32), &ctl).is_err());
    }

    #[test]
    fn blocks_grow_with_size_up_to_a_chunk() {
        assert_eq!(blocks(8, 512), 1);
        assert_eq!(blocks(8 << 10, 512), 1);
        assert_eq!(blocks(64 << 10, 512), 8);
        assert_eq!(blocks(LL_CHUNK_BYTES, 512), 64);
        assert_eq!(blocks(64 << 20, 512), 64);
    }
}
