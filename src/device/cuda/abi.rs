//! The device ABI: the Rust mirror of what the kernels read and write, field for field —
//! `kernels/program.cuh` (the step interpreter's program: [`Program`], [`Lane`], [`DevConn`],
//! [`Step`], the error [`Report`]), `kernels/ll.cuh` (the one-shot LL all-reduce's [`LlArgs`]),
//! `kernels/rma.cuh` (the one-sided kernel's [`RmaArgs`]),
//! and the host-side layouts the kernels are handed addresses into: a GPU FIFO's segment
//! (`[tail][head @ HEAD_OFF][sizes @ SIZES_OFF][slots @ SLOTS_OFF]`) and a communicator's
//! host-mapped control block (`[abort][report @ REPORT_OFF][operations @ OPS_OFF]`).
//!
//! The structs are `#[repr(C)]` with every pad spelt out, so their bytes are what the kernels
//! read ([`put`]); `layout_asserts` writes their sizes, every field's offset and every code as
//! CUDA `static_assert`s, which a test compiles against the kernels' headers with NVRTC (and the
//! headers assert their own sizes). Change a struct here and in the header together.
//!
//! This file sits at the bottom of the GPU code: the encoders (`crate::exec::gpu`), the GPU
//! connections (`crate::transport::gpu`) and the kernel launches (`super::module`) import it;
//! it imports nothing of the crate.

/// Threads per block of the step interpreter and the LL kernel (their `__launch_bounds__`;
/// NCCL's `NCCL_NTHREADS` default).
pub(crate) const THREADS: u32 = 512;

/// "No connection" in a step (`RNCCL_NO_CONN`).
pub(crate) const NO_CONN: u16 = 0xffff;
/// Byte offset of the lanes in every program (`RNCCL_LANES_AT`): right after the header, so a
/// block reads its lane in the same round as the header (kernels/interp.cu `load`).
pub(crate) const LANES_AT: usize = size_of::<Program>();
/// Step flag: apply the pre-multiplier (`RNCCL_STEP_PRE`).
pub(crate) const STEP_PRE: u8 = 1;
/// Step flag: apply the post-divisor (`RNCCL_STEP_POST`).
pub(crate) const STEP_POST: u8 = 2;

/// What a step does (`enum StepOp`, in `crate::coll::Op`'s order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum StepOp {
    /// `OP_COPY`.
    Copy = 0,
    /// `OP_SEND`.
    Send = 1,
    /// `OP_COPY_SEND`.
    CopySend = 2,
    /// `OP_RECV`.
    Recv = 3,
    /// `OP_RECV_COPY_SEND`.
    RecvCopySend = 4,
    /// `OP_RECV_REDUCE_SEND`.
    RecvReduceSend = 5,
    /// `OP_RECV_REDUCE_COPY`.
    RecvReduceCopy = 6,
    /// `OP_RECV_REDUCE_COPY_SEND`.
    RecvReduceCopySend = 7,
    /// `OP_EXCHANGE`.
    Exchange = 8,
}

impl StepOp {
    /// Every operation with its name in the header.
    #[cfg(test)]
    pub(crate) const ALL: [(StepOp, &'static str); 9] = [
        (StepOp::Copy, "OP_COPY"),
        (StepOp::Send, "OP_SEND"),
        (StepOp::CopySend, "OP_COPY_SEND"),
        (StepOp::Recv, "OP_RECV"),
        (StepOp::RecvCopySend, "OP_RECV_COPY_SEND"),
        (StepOp::RecvReduceSend, "OP_RECV_REDUCE_SEND"),
        (StepOp::RecvReduceCopy, "OP_RECV_REDUCE_COPY"),
        (StepOp::RecvReduceCopySend, "OP_RECV_REDUCE_COPY_SEND"),
        (StepOp::Exchange, "OP_EXCHANGE"),
    ];
}

/// Why a kernel stopped early (`enum Status`; 0, `ST_OK`, is no report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// A wait outlasted the program's timeout (`ST_TIMEOUT`).
    Timeout = 1,
    /// The communicator's abort flag was raised (`ST_ABORTED`).
    Aborted = 2,
    /// A peer posted a slot of a size the plan does not expect (`ST_BAD_SIZE`).
    BadSize = 3,
}

impl Status {
    /// The status a report's `code` names, if any.
    pub(crate) fn from_code(code: u32) -> Option<Status> {
        match code {
            1 => Some(Status::Timeout),
            2 => Some(Status::Aborted),
            3 => Some(Status::BadSize),
            _ => None,
        }
    }
}

/// One step (`struct Step`): `bytes` bytes from `src` and/or into `dst` (device addresses; 0
/// where the op has none), sending on connection `send` and receiving on `recv` (indices into
/// the program's connections, or [`NO_CONN`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Step {
    pub src: u64,
    pub dst: u64,
    pub bytes: u64,
    pub send: u16,
    pub recv: u16,
    /// A [`StepOp`].
    pub op: u8,
    /// [`STEP_PRE`] | [`STEP_POST`].
    pub flags: u8,
    pub pad: u16,
}

/// One end of a connection as the kernel sees it (`struct Conn`): device addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub(crate) struct DevConn {
    /// The FIFO's slots (receiver's memory).
    pub fifo: u64,
    /// `u64[NSLOTS]` slot sizes (receiver's memory).
    pub sizes: u64,
    /// Slots posted (receiver's memory).
    pub tail: u64,
    /// Slots freed (sender's memory).
    pub head: u64,
    /// `u64[2]`: this end's persistent slot and byte counts (this rank's memory).
    pub step: u64,
    /// `u64[3]`: host-mapped copy of the slot and byte counts, for live counters, and 1 while
    /// a wait on this end outlasts its first round of polls.
    pub bytes: u64,
    /// The rank at the other end.
    pub peer: u32,
    /// The channel.
    pub channel: u16,
    pub pad: u16,
}

/// A lane (`struct Lane`): `nsteps` steps from `first`, run by one thread block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Lane {
    pub first: u32,
    pub nsteps: u32,
    /// For error reports.
    pub channel: u32,
    pub pad: u32,
}

/// What a kernel reports when it stops early (`struct Report`, host-mapped at
/// [`REPORT_OFF`] of the control block); `code` 0 means no error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Report {
    /// A [`Status`], written last.
    pub code: u32,
    pub lane: u32,
    pub peer: u32,
    pub channel: u32,
    /// The slot count waited for.
    pub step: u64,
    /// 1: for a peer's data (recv), 2: for a free slot (send).
    pub waiting: u64,
}

/// The program header (`struct Program`), followed in memory by `Lane[nlanes]`,
/// `DevConn[nconns]` and `Step[nsteps]` at the byte offsets it names.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C)]
pub(crate) struct Program {
    pub lanes: u64,
    pub conns: u64,
    pub steps: u64,
    pub slot_bytes: u64,
    /// `Report*` (host-mapped).
    pub report: u64,
    /// `u32*` (host-mapped): nonzero stops every wait.
    pub abort: u64,
    /// `u32*` (device memory): the first failing block takes it, then reports.
    pub claim: u64,
    /// Longest wait for a peer, ns of `%globaltimer`.
    pub timeout_ns: u64,
    /// `u64[2]` (host-mapped): the last operation started, the last finished.
    pub ops: u64,
    /// `u32*` (device memory): blocks of the running kernel that finished; at `finished + 4`,
    /// `u64`: the last operation reported finished.
    pub finished: u64,
    /// The pre-multiplier as a float (`Scalars`, reduce.cuh).
    pub pre_f: f64,
    /// The pre-multiplier as an integer.
    pub pre_i: i64,
    /// The post-divisor (1: none).
    pub post_div: u64,
    /// `const T*` (device memory): the pre-multiplier, read by the kernel when it starts
    /// (`ncclScalarDevice`); 0 when `pre_f`/`pre_i` hold it.
    pub pre_at: u64,
    pub nlanes: u32,
    pub nconns: u32,
    pub nsteps: u32,
    pub rank: u32,
}

/// Most ranks of a one-shot LL all-reduce (`RNCCL_LL_MAX_RANKS`).
pub(crate) const LL_MAX_RANKS: usize = 8;
/// Bytes of one half of an LL area (`RNCCL_LL_HALF`): an operation's epoch picks the half its
/// lines go to.
pub(crate) const LL_HALF_BYTES: usize = 1 << 20;
/// Bytes of the LL area a rank keeps for each peer's lines (both halves).
pub(crate) const LL_AREA_BYTES: usize = 2 * LL_HALF_BYTES;
/// Input bytes one epoch carries (a line holds 8 data bytes in 16): larger inputs go in chunks.
pub(crate) const LL_CHUNK_BYTES: usize = LL_HALF_BYTES / 2;
/// Bytes of one block's slot in a direct area (`RNCCL_DIRECT_SLOT`, kernels/direct.cuh): the
/// most bytes of one shard a block moves per round.
pub(crate) const DIRECT_SLOT_BYTES: usize = 64 << 10;
/// Most blocks of a direct all-reduce (`RNCCL_DIRECT_BLOCKS`).
pub(crate) const DIRECT_BLOCKS: usize = 128;
/// Bytes of a direct area's flag rows (`RNCCL_DIRECT_FLAGS`).
pub(crate) const DIRECT_FLAGS_BYTES: usize = 4096;
/// Bytes of the direct area a rank keeps for each peer after its LL area (`RNCCL_DIRECT_AREA`):
/// the flags, then scatter and gather slots of two parities per block.
pub(crate) const DIRECT_AREA_BYTES: usize =
    DIRECT_FLAGS_BYTES + 4 * DIRECT_BLOCKS * DIRECT_SLOT_BYTES;
/// What a direct kernel runs (`enum DirectMode`, kernels/direct.cuh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub(crate) enum DirectMode {
    /// All-reduce of `bytes` bytes per rank: reduce-scatter, then all-gather.
    AllReduce = 0,
    /// Reduce-scatter: `bytes` is the output's size (each input is `nranks` × `bytes`).
    ReduceScatter = 1,
    /// All-gather: `bytes` is the input's size (each output is `nranks` × `bytes`).
    AllGather = 2,
    /// Broadcast from `LlArgs::root`: `bytes` is the buffer's size.
    Broadcast = 3,
    /// All-to-all: `bytes` is the block each rank sends to each rank (each buffer is `nranks`
    /// × `bytes`).
    AllToAll = 4,
    /// The symmetric all-reduce (`AllReduce_RSxLD_AGxST`, kernels/symmetric.cuh) of `bytes`
    /// bytes per rank, on buffers in symmetric windows.
    SymAllReduce = 5,
    /// The symmetric reduce-scatter (`ReduceScatter_LD`): `bytes` as [`DirectMode::ReduceScatter`].
    SymReduceScatter = 6,
    /// The symmetric all-gather (`AllGather_ST`): `bytes` as [`DirectMode::AllGather`].
    SymAllGather = 7,
    /// The direct send/receive (`SendRecv_ST`, kernels/symmetric.cuh) of a group's own
    /// buffers: `LlArgs::send_bytes` per receiving rank; `bytes` is the largest send of any
    /// rank of the group, which sizes the grid alike on every rank.
    SymSendRecv = 8,
}

/// Word of the LL state where the direct blocks' round counts start
/// (`RNCCL_DIRECT_ROUNDS_WORD`); the state holds [`DIRECT_BLOCKS`] of them after it.
pub(crate) const DIRECT_ROUNDS_WORD: usize = 8;
/// Most blocks of a symmetric kernel (`RNCCL_SYM_BLOCKS`, kernels/symmetric.cuh), as many as
/// the direct kernel's ([`DIRECT_BLOCKS`]): twice NCCL's bound for its symmetric kernels
/// (`ncclSymkMaxBlocks`, src/include/sym_kernels.h), because a block's loads from a peer are
/// what keeps NVLink busy. On 2×H200 (2026-11-29, `-g 2`) an all-reduce of 8 / 32 / 64 MB took
/// 41.2 / 147 / 272 µs on 32 blocks, 40.0 / 129 / 243 on 48 and 38.5 / 122 / 229 on 64.
pub(crate) const SYM_BLOCKS: usize = 128;
/// Byte offset of the symmetric flags (a `u64` per block) in a direct area
/// (`RNCCL_SYM_FLAGS_OFF`): inside [`DIRECT_FLAGS_BYTES`], after [`SIGNAL_OFF`].
pub(crate) const SYM_FLAGS_OFF: usize = 2304;
const _: () = assert!(SIGNAL_OFF + 8 <= SYM_FLAGS_OFF);
const _: () = assert!(SYM_FLAGS_OFF + 8 * SYM_BLOCKS <= DIRECT_FLAGS_BYTES);
/// Word of the LL state where the symmetric blocks' operation counts start
/// (`RNCCL_SYM_COUNT_WORD`); the state holds [`SYM_BLOCKS`] of them after it.
pub(crate) const SYM_COUNT_WORD: usize = DIRECT_ROUNDS_WORD + DIRECT_BLOCKS;
/// Word of the LL state counting the direct kernels that ran (`RNCCL_KEY_WORD`,
/// kernels/ll.cuh): every rank numbers its direct kernels alike, which the registered kernel's
/// records name (kernels/registered.cuh).
#[cfg(test)]
pub(crate) const KEY_WORD: usize = 2;
/// Word of the LL state where block 0 of a registered kernel posts its verdict
/// (`RNCCL_VERDICT_WORD`).
pub(crate) const VERDICT_WORD: usize = 3;
const _: () = assert!(VERDICT_WORD < DIRECT_ROUNDS_WORD);
/// Word of the LL state where a registered kernel's block 0 leaves every rank's input, then
/// output, as mapped here (`RNCCL_REG_PEERS_WORD`, [`LL_MAX_RANKS`] words each).
pub(crate) const REG_PEERS_WORD: usize = SYM_COUNT_WORD + SYM_BLOCKS;
/// Byte offset of the registration record (three `u64`: input, output, the kernel's word) in
/// a direct area (`RNCCL_REG_REC_OFF`): inside [`DIRECT_FLAGS_BYTES`], after the symmetric
/// flags.
pub(crate) const REG_REC_OFF: usize = SYM_FLAGS_OFF + 8 * SYM_BLOCKS;
const _: () = assert!(REG_REC_OFF + 24 <= DIRECT_FLAGS_BYTES);
/// Bytes of the LL state: its words, the direct round counts, the symmetric counts, the
/// registered kernel's addresses.
pub(crate) const LL_STATE_BYTES: usize = 8 * (REG_PEERS_WORD + 2 * LL_MAX_RANKS);

/// The one-shot LL all-reduce's arguments (`struct LlArgs`), passed by value as the kernel's
/// parameter.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C)]
pub(crate) struct LlArgs {
    /// Report, abort, claim, timeout, scalars and rank; no lanes.
    pub ctl: Program,
    /// Input (device address).
    pub src: u64,
    /// Output (device address; may equal `src`).
    pub dst: u64,
    /// Bytes per rank.
    pub bytes: u64,
    /// In device memory: `u32` last epoch used, `u32` blocks finished, `u64` the last
    /// operation reported finished.
    pub state: u64,
    /// The operation's number.
    pub seq: u64,
    /// The direct kernel's bytes of a shard per block and round (a multiple of 16, at most
    /// [`DIRECT_SLOT_BYTES`]); 0 for the LL kernel.
    pub unit: u64,
    pub nranks: u32,
    /// What the direct kernel runs ([`DirectMode`]); 0 for the LL kernel.
    pub mode: u32,
    /// The direct broadcast's root (a rank); 0 otherwise.
    pub root: u32,
    /// The registered kernel (kernels/registered.cuh): the symmetric plan's blocks when this
    /// rank's buffers are registered with every peer (`peer_src`/`peer_dst` then say where
    /// each peer maps them); 0 otherwise.
    pub reg_blocks: u32,
    /// The registered kernel's symmetric plan: bytes of a shard per block.
    pub reg_unit: u64,
    /// Blocks of the direct plan (a registered kernel may launch more).
    pub direct_blocks: u32,
    /// Padding to the next `u64`.
    pub pad: u32,
    /// Per rank: the LL area it reads this rank's lines from.
    pub out: [u64; LL_MAX_RANKS],
    /// Per rank: this rank's LL area for that rank's lines (`in` in CUDA).
    pub inp: [u64; LL_MAX_RANKS],
    /// Per rank: the send end's `DevConn::step` of this rank's first point-to-point
    /// connection with it.
    pub out_step: [u64; LL_MAX_RANKS],
    /// Per rank: the same end's `DevConn::bytes`.
    pub out_live: [u64; LL_MAX_RANKS],
    /// Per rank: the receive end's `DevConn::step`.
    pub in_step: [u64; LL_MAX_RANKS],
    /// Per rank: the receive end's `DevConn::bytes`.
    pub in_live: [u64; LL_MAX_RANKS],
    /// Symmetric kernels: per rank, its input as mapped in this process (this rank's own at
    /// its index); 0 otherwise.
    pub peer_src: [u64; LL_MAX_RANKS],
    /// Symmetric kernels: per rank, its output as mapped in this process. `SendRecv_ST`:
    /// per rank, where this rank's send to it goes (`peer_src` is where it comes from).
    pub peer_dst: [u64; LL_MAX_RANKS],
    /// `SendRecv_ST`: per rank, the bytes this rank stores into it; 0 otherwise.
    pub send_bytes: [u64; LL_MAX_RANKS],
    /// `SendRecv_ST`: per rank, the bytes it stores into this rank; 0 otherwise.
    pub recv_bytes: [u64; LL_MAX_RANKS],
}

/// Byte offset of the signal word in a direct area (`RNCCL_SIGNAL_OFF`, kernels/rma.cuh): after
/// the area's two flag rows of [`DIRECT_BLOCKS`] `u64`, inside [`DIRECT_FLAGS_BYTES`].
pub(crate) const SIGNAL_OFF: usize = 2048;
const _: () = assert!(2 * DIRECT_BLOCKS * 8 <= SIGNAL_OFF && SIGNAL_OFF + 8 <= DIRECT_FLAGS_BYTES);
/// Bytes of a communicator's one-sided state (`RNCCL_RMA_STATE`): `u64` signals consumed per
/// rank ([`LL_MAX_RANKS`]), then `u64` the rank's signal word for itself (at
/// [`RMA_SELF_SIGNAL_OFF`]).
pub(crate) const RMA_STATE_BYTES: usize = 8 * LL_MAX_RANKS + 8;
/// Byte offset of a rank's signal word for its own signals in its one-sided state.
pub(crate) const RMA_SELF_SIGNAL_OFF: usize = 8 * LL_MAX_RANKS;

/// What the one-sided kernel runs (`enum RmaMode`, kernels/rma.cuh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum RmaMode {
    /// Store `bytes` bytes into the peer's window; with a `signal` (a put of one block), then
    /// add one to it.
    Put = 0,
    /// Wait for signals from every rank with a nonzero `want`, then consume them.
    Wait = 1,
    /// Add one to `signal` and `bytes` to the traffic counters, storing nothing.
    Signal = 2,
}

/// The one-sided kernel's arguments (`struct RmaArgs`, kernels/rma.cuh), passed by value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C)]
pub(crate) struct RmaArgs {
    /// Report, abort, claim, timeout and rank; no lanes.
    pub ctl: Program,
    /// Put: the caller's bytes (device address).
    pub src: u64,
    /// Put: where they go in the peer's window (an address mapped in this process).
    pub dst: u64,
    /// Put: bytes to store; signal: bytes to add to the traffic counters.
    pub bytes: u64,
    /// Put, signal: the `u64` signal word to add one to (in the peer's memory; a put's may
    /// be 0: none).
    pub signal: u64,
    /// This rank's one-sided state ([`RMA_STATE_BYTES`] of device memory).
    pub state: u64,
    /// Put, signal: the send end's `DevConn::step` of this rank's first connection with the
    /// peer (0: none); the put's bytes add to its byte count.
    pub out_step: u64,
    /// Put: the same end's `DevConn::bytes` (host-mapped live counters).
    pub out_live: u64,
    /// [`RmaMode`].
    pub mode: u32,
    /// Put: the rank stored into.
    pub peer: u32,
    pub nranks: u32,
    /// Padding to the next `u64`.
    pub pad: u32,
    /// Wait: per rank, this rank's signal word for that rank's signals.
    pub word: [u64; LL_MAX_RANKS],
    /// Wait: per rank, signals to wait for (0: none).
    pub want: [u64; LL_MAX_RANKS],
    /// Wait: per rank, where a long wait marks itself (word 2 of the receive end's
    /// `DevConn::bytes`; 0: nowhere).
    pub mark: [u64; LL_MAX_RANKS],
}

/// Byte offset of `head` in a GPU FIFO segment that holds it (its own 128-byte line).
pub(crate) const HEAD_OFF: usize = 128;
/// Byte offset of the `u64[NSLOTS]` sizes (tail and head on their own 128-byte lines).
pub(crate) const SIZES_OFF: usize = 256;
/// Byte offset of the slots (512-byte aligned).
pub(crate) const SLOTS_OFF: usize = 512;

/// Byte offset of the kernels' [`Report`] in a communicator's control block (its own cache
/// line; the `u32` abort flag is at 0).
pub(crate) const REPORT_OFF: usize = 64;
/// Byte offset of the operation words, `u64[2]` (program.cuh, operation tracking), in the
/// control block (their own cache line).
pub(crate) const OPS_OFF: usize = 128;
/// Bytes of a control block.
pub(crate) const CONTROL_BYTES: usize = OPS_OFF + 16;
const _: () = assert!(REPORT_OFF + size_of::<Report>() <= OPS_OFF);

/// Bytes of a [`Program`] header.
#[cfg(test)]
pub(crate) const PROGRAM_BYTES: usize = size_of::<Program>();
/// Bytes of a [`Lane`].
#[cfg(test)]
pub(crate) const LANE_BYTES: usize = size_of::<Lane>();
/// Bytes of a [`DevConn`].
#[cfg(test)]
pub(crate) const CONN_BYTES: usize = size_of::<DevConn>();
/// Bytes of a [`Step`].
#[cfg(test)]
pub(crate) const STEP_BYTES: usize = size_of::<Step>();
/// Bytes of a [`Report`].
#[cfg(test)]
pub(crate) const REPORT_BYTES: usize = size_of::<Report>();
/// Bytes of [`LlArgs`].
#[cfg(test)]
pub(crate) const LL_ARGS_BYTES: usize = size_of::<LlArgs>();

/// Plain data the kernels read as bytes.
///
/// # Safety
/// Implementors are `#[repr(C)]` structs of integers, floats and arrays of them, without
/// implicit padding (every pad is a field), so all their bytes are initialised.
pub(crate) unsafe trait Pod: Copy {}

// SAFETY: each is `#[repr(C)]` of u64/u32/u16/u8/f64/i64 fields and arrays of them, with its
// pads as fields: the size checks below equal the sum of the fields' sizes.
unsafe impl Pod for Step {}
// SAFETY: as above.
unsafe impl Pod for DevConn {}
// SAFETY: as above.
unsafe impl Pod for Lane {}
// SAFETY: as above.
unsafe impl Pod for Report {}
// SAFETY: as above.
unsafe impl Pod for Program {}
// SAFETY: as above.
unsafe impl Pod for LlArgs {}
// SAFETY: as above.
unsafe impl Pod for RmaArgs {}

const _: () = {
    assert!(size_of::<Step>() == 3 * 8 + 2 * 2 + 2 + 2);
    assert!(size_of::<DevConn>() == 6 * 8 + 4 + 2 + 2);
    assert!(size_of::<Lane>() == 4 * 4);
    assert!(size_of::<Report>() == 4 * 4 + 2 * 8);
    assert!(size_of::<Program>() == 14 * 8 + 4 * 4);
    assert!(size_of::<LlArgs>() == size_of::<Program>() + 7 * 8 + 6 * 4 + 10 * 8 * LL_MAX_RANKS);
    assert!(size_of::<RmaArgs>() == size_of::<Program>() + 7 * 8 + 4 * 4 + 3 * 8 * LL_MAX_RANKS);
};

// The kernels' hosts are little-endian, as every CUDA host is: the bytes of these structs are
// the values the GPU reads.
#[cfg(target_endian = "big")]
compile_error!("the device ABI assumes a little-endian host, as CUDA does");

/// Appends the bytes of `v` to `out`.
pub(crate) fn put<T: Pod>(out: &mut Vec<u8>, v: &T) {
    // SAFETY: `T: Pod` has no uninitialised bytes; the slice covers exactly `v`.
    let bytes = unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) };
    out.extend_from_slice(bytes);
}

#[cfg(test)]
/// CUDA source asserting this file's layouts against the kernels' headers: the size of every
/// struct, the offset of every field, every code and constant (compiled by a test).
pub(crate) fn layout_asserts() -> String {
    use std::mem::offset_of;
    let mut out = String::from(
        "#define RNCCL_ABI_ONLY\n#include \"program.cuh\"\n#include \"ll.cuh\"\n#include \"direct.cuh\"\n#include \"symmetric.cuh\"\n#include \"registered.cuh\"\n#include \"rma.cuh\"\nnamespace rnccl {\n",
    );
    let mut check = |what: String, value: usize| {
        out.push_str(&format!("static_assert({what} == {value}, \"{what}\");\n"));
    };
    macro_rules! fields {
        ($cuda:literal, $rust:ty, [$($f:ident $(=> $c:literal)?),* $(,)?]) => {
            check(format!("sizeof({})", $cuda), size_of::<$rust>());
            $(
                // The CUDA field's name: the Rust one, or the one given after `=>`.
                let name = [stringify!($f) $(, $c)?][[stringify!($f) $(, $c)?].len() - 1];
                check(format!("__INTADDR__(&((({}*)0)->{name}))", $cuda), offset_of!($rust, $f));
            )*
        };
    }
    fields!("Step", Step, [src, dst, bytes, send, recv, op, flags, pad]);
    fields!(
        "Conn",
        DevConn,
        [fifo, sizes, tail, head, step, bytes, peer, channel, pad]
    );
    fields!("Lane", Lane, [first, nsteps, channel, pad]);
    fields!("Report", Report, [code, lane, peer, channel, step, waiting]);
    fields!(
        "Program",
        Program,
        [
            lanes, conns, steps, slot_bytes, report, abort, claim, timeout_ns, ops, finished,
            pre_f, pre_i, post_div, pre_at, nlanes, nconns, nsteps, rank
        ]
    );
    fields!(
        "LlArgs",
        LlArgs,
        [
            ctl, src, dst, bytes, state, seq, unit, nranks, mode, root, reg_blocks, reg_unit,
            direct_blocks, pad, out, inp => "in", out_step, out_live, in_step, in_live, peer_src,
            peer_dst, send_bytes, recv_bytes
        ]
    );
    fields!(
        "RmaArgs",
        RmaArgs,
        [
            ctl, src, dst, bytes, signal, state, out_step, out_live, mode, peer, nranks, pad, word,
            want, mark
        ]
    );
    for (mode, name) in [
        (RmaMode::Put, "RMA_PUT"),
        (RmaMode::Wait, "RMA_WAIT"),
        (RmaMode::Signal, "RMA_SIGNAL"),
    ] {
        check(name.to_string(), mode as usize);
    }
    for (op, name) in StepOp::ALL {
        check(name.to_string(), op as usize);
    }
    for (mode, name) in [
        (DirectMode::AllReduce, "DIRECT_ALL_REDUCE"),
        (DirectMode::ReduceScatter, "DIRECT_REDUCE_SCATTER"),
        (DirectMode::AllGather, "DIRECT_ALL_GATHER"),
        (DirectMode::Broadcast, "DIRECT_BROADCAST"),
        (DirectMode::AllToAll, "DIRECT_ALL_TO_ALL"),
        (DirectMode::SymAllReduce, "DIRECT_SYM_ALL_REDUCE"),
        (DirectMode::SymReduceScatter, "DIRECT_SYM_REDUCE_SCATTER"),
        (DirectMode::SymAllGather, "DIRECT_SYM_ALL_GATHER"),
        (DirectMode::SymSendRecv, "DIRECT_SYM_SEND_RECV"),
    ] {
        check(name.to_string(), mode as usize);
    }
    for (code, name) in [
        (Status::Timeout, "ST_TIMEOUT"),
        (Status::Aborted, "ST_ABORTED"),
        (Status::BadSize, "ST_BAD_SIZE"),
    ] {
        check(name.to_string(), code as usize);
    }
    // The headers' macros, `RNCCL_` + name.
    for (name, value) in [
        ("NO_CONN", usize::from(NO_CONN)),
        ("LANES_AT", LANES_AT),
        ("STEP_PRE", usize::from(STEP_PRE)),
        ("STEP_POST", usize::from(STEP_POST)),
        ("NSLOTS", crate::conn::NSLOTS),
        ("LL_HALF", LL_HALF_BYTES),
        ("LL_MAX_RANKS", LL_MAX_RANKS),
        ("LL_AREA", LL_AREA_BYTES),
        ("DIRECT_SLOT", DIRECT_SLOT_BYTES),
        ("DIRECT_BLOCKS", DIRECT_BLOCKS),
        ("DIRECT_FLAGS", DIRECT_FLAGS_BYTES),
        ("DIRECT_AREA", DIRECT_AREA_BYTES),
        ("DIRECT_ROUNDS_WORD", DIRECT_ROUNDS_WORD),
        ("SYM_BLOCKS", SYM_BLOCKS),
        ("SYM_FLAGS_OFF", SYM_FLAGS_OFF),
        ("SYM_COUNT_WORD", SYM_COUNT_WORD),
        ("KEY_WORD", KEY_WORD),
        ("VERDICT_WORD", VERDICT_WORD),
        ("REG_PEERS_WORD", REG_PEERS_WORD),
        ("REG_REC_OFF", REG_REC_OFF),
        ("SIGNAL_OFF", SIGNAL_OFF),
        ("RMA_STATE", RMA_STATE_BYTES),
    ] {
        check(format!("RNCCL_{name}"), value);
    }
    out.push_str("}  // namespace rnccl\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headers assert these sizes themselves (a change on one side only fails the build of
    /// the kernels or this test even without NVRTC).
    #[test]
    fn sizes_match_the_kernel_headers() {
        let h = include_str!("../../../kernels/program.cuh");
        for (name, n) in [
            ("Step", size_of::<Step>()),
            ("Conn", size_of::<DevConn>()),
            ("Lane", size_of::<Lane>()),
            ("Report", size_of::<Report>()),
            ("Program", size_of::<Program>()),
        ] {
            let want = format!("static_assert(sizeof({name}) == {n},");
            assert!(h.contains(&want), "program.cuh lacks `{want}`");
        }
        let ll = include_str!("../../../kernels/ll.cuh");
        let want = format!("static_assert(sizeof(LlArgs) == {},", size_of::<LlArgs>());
        assert!(ll.contains(&want), "ll.cuh lacks `{want}`");
        let rma = include_str!("../../../kernels/rma.cuh");
        let want = format!("static_assert(sizeof(RmaArgs) == {},", size_of::<RmaArgs>());
        assert!(rma.contains(&want), "rma.cuh lacks `{want}`");
    }

    #[test]
    fn put_writes_the_fields_at_their_offsets() {
        let c = DevConn {
            fifo: 1,
            sizes: 2,
            tail: 3,
            head: 4,
            step: 5,
            bytes: 6,
            peer: 7,
            channel: 8,
            pad: 0,
        };
        let mut b = Vec::new();
        put(&mut b, &c);
        assert_eq!(b.len(), 56);
        let at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        assert_eq!(at(std::mem::offset_of!(DevConn, head)), 4);
        assert_eq!(u32::from_le_bytes(b[48..52].try_into().unwrap()), 7);
        assert_eq!(u16::from_le_bytes(b[52..54].try_into().unwrap()), 8);
    }

    #[test]
    fn the_layout_source_names_every_struct() {
        let src = layout_asserts();
        for s in [
            "sizeof(Step) == 32",
            "sizeof(Conn) == 56",
            "((Conn*)0)->head)) == 24",
            "sizeof(LlArgs) == 848",
            "((LlArgs*)0)->peer_dst)) == 656",
            "RNCCL_SYM_COUNT_WORD == 136",
            "((LlArgs*)0)->in)) == 272",
            "OP_EXCHANGE == 8",
        ] {
            assert!(src.contains(s), "{s} missing from:\n{src}");
        }
    }
}
