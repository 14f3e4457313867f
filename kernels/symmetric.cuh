// All-reduce, reduce-scatter and all-gather between buffers every rank registered in a
// symmetric window (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC: each rank's buffer
// at the same offset of its window), loaded and stored in place in the peers' memory: no
// slot, no copy out of one. The shapes and names are NCCL's symmetric kernels' (2.27+,
// src/device/symmetric/; gpu-backend.md §A.5), run by the direct kernel's entry
// (LlArgs::mode):
// - ReduceScatter_LD: block b loads its piece of this rank's shard from every rank's input
//   (the peers' through peer access), reduces them in rank order and stores the output;
// - AllGather_ST: block b stores its piece of this rank's input at this rank's place in every
//   rank's output;
// - AllReduce_RSxLD_AGxST: both in one pass: block b reduces its piece of this rank's shard
//   from every rank's input and stores it into every rank's output.
// Only rank s loads or stores shard s of any rank's buffers, so the all-reduce needs no
// barrier between its halves and runs in place as well.
//
// Two barriers per block guard the peers' buffers. Before block b touches a peer's memory it
// waits for the peer's block b to have started the same operation: the peer's stream reached
// it, so what ran before it there is done with the buffers. Before block b ends it waits for
// the peer's block b to be done, so once a rank's kernel ends no peer still loads its input
// or stores into its output. Each is one flag per block and peer in the receiver's direct
// area (RNCCL_SYM_FLAGS_OFF, after the one-sided signal word), counting the block's
// symmetric operations twice: 2c + 1 once it entered operation c, 2c + 2 once it left; the
// count c lives in LlArgs::state from word RNCCL_SYM_COUNT_WORD. Every rank runs the same
// operations on the same blocks (the block count depends on the size and the ranks only).
//
// SendRecv_ST moves a group's sends the same way when one thread drives every rank: each rank
// stores its send to rank r straight into r's receive buffer (LlArgs::peer_src / peer_dst /
// send_bytes), block b the b-th piece of every send, between the same two barriers. Every
// rank of the communicator runs it, so the counts stay alike (src/exec/gpu/group_sends.rs
// decides for all of them); an all-to-all and a two-rank broadcast on a group's buffers run it
// too.
//
// Mirrored by src/device/cuda/abi.rs (the constants); change both together.
#pragma once

namespace rnccl {

// Most blocks of a symmetric kernel (flag row of an area, count words of the state).
#define RNCCL_SYM_BLOCKS 128
// Byte offset of the symmetric flags in a direct area: inside RNCCL_DIRECT_FLAGS, after the
// direct flag rows and the one-sided signal word (RNCCL_SIGNAL_OFF).
#define RNCCL_SYM_FLAGS_OFF 2304
// Word of LlArgs::state where the blocks' symmetric operation counts start.
#define RNCCL_SYM_COUNT_WORD (RNCCL_DIRECT_ROUNDS_WORD + RNCCL_DIRECT_BLOCKS)

#ifndef RNCCL_ABI_ONLY

// Block b's symmetric flag in the direct area that follows the LL area at `ll_area`.
__device__ __forceinline__ u64* sym_flag(u64 ll_area, u32 b) {
  return (u64*)(ll_area + RNCCL_LL_AREA + RNCCL_SYM_FLAGS_OFF) + b;
}

// Thread 0, after the block's loads and stores before it: raises this rank's flag for block
// b to `value` in every peer's area, then waits until every peer raised its flag for block b
// in this rank's areas to `value`. Returns ST_OK, or the failure (reported, naming the peer).
__device__ int sym_barrier(const LlArgs& a, u32 b, u64 value) {
  const Program* P = &a.ctl;
  const u32 n = a.nranks, me = P->rank;
  fence_release_sys();
  for (u32 j = 1; j < n; j++) st_volatile(sym_flag(a.out[(me + j) % n], b), value);
  for (u32 j = 1; j < n; j++) {
    const u32 r = (me + j) % n;
    const int st = wait_at_least(sym_flag(a.in[r], b), value, P, (u64*)a.in_live[r] + 2);
    if (st != ST_OK) {
      Conn c = {};
      c.peer = r;
      report(P, st, b, c, value, 1);
      return st;
    }
  }
  return ST_OK;
}

// Block b of a symmetric kernel of `mode` (a DIRECT_SYM_ mode). LlArgs::bytes is the
// all-reduce's buffer and the others' per-rank part; `unit` the bytes of this rank's shard
// each block takes (a multiple of 16); peer_src / peer_dst every rank's input and output as
// mapped here. A block that is not
// `active` (past the plan's blocks in a registered kernel, registered.cuh) only finishes.
// Without `enter` the entry barrier is skipped: the registered kernel's exchange of records
// already showed every peer reached the operation. `key` numbers this direct kernel.
template <typename T, int OP>
__device__ void sym_run(const LlArgs& a, u32 mode, const u64* peer_src, const u64* peer_dst,
                        u64 unit, bool active, bool enter, u64 key) {
  __shared__ u64 count;
  __shared__ int status;
  __shared__ LlStart begun;
  const Program* P = &a.ctl;
  const u32 tid = threadIdx.x, b = blockIdx.x, n = a.nranks, me = P->rank;
  u64* counted = (u64*)a.state + RNCCL_SYM_COUNT_WORD + (active ? b : 0);
  // Loaded before ll_start's loads, so that thread 0 waits for them all at once (ll_conn_lane).
  const u64 count0 = tid == 0 ? *counted : 0;
  ll_start(a, begun);
  if (tid == 0) {
    count = count0;
    status = active && enter ? sym_barrier(a, b, 2 * count0 + 1) : ST_OK;
  }
  op_started(P, a.seq);
  __syncthreads();
  const bool ar = mode == DIRECT_SYM_ALL_REDUCE, ag = mode == DIRECT_SYM_ALL_GATHER;
  // This rank's shard: of the all-reduce's buffers (16-byte aligned shards), of the
  // reduce-scatter's inputs, of the all-gather's outputs; `total` bytes in those buffers.
  const u64 shard = ar ? ((a.bytes + n - 1) / n + 15) & ~15ull : a.bytes;
  const u64 total = ar ? a.bytes : a.bytes * n;
  const u64 start = me * shard + min(shard, (u64)b * unit);
  const u64 end = min(min((u64)me * shard + shard, start + unit), total);
  if (active && status == ST_OK && end > start) {
    const Scalars sc = scalars<T>(P);
    u64 srcs[RNCCL_LL_MAX_RANKS], dsts[RNCCL_LL_MAX_RANKS];
    u32 nsrc = 0, ndst = 0;
    // Sources: every rank's input at this piece (the all-gather's own input, at its start).
    if (ag) {
      srcs[nsrc++] = a.src + (start - me * shard);
    } else {
      for (u32 r = 0; r < n; r++) srcs[nsrc++] = peer_src[r] + start;
    }
    // Destinations: this rank's output first (a reduce-scatter's holds only the shard; an
    // all-gather in place has its piece there already), then every peer's from the next on.
    const u64 own = ar || ag ? a.dst + start : a.dst + (start - me * shard);
    if (!ag || own != srcs[0]) dsts[ndst++] = own;
    if (ar || ag)
      for (u32 j = 1; j < n; j++) dsts[ndst++] = peer_dst[(me + j) % n] + start;
    direct_reduce<T, OP>(srcs, nsrc, dsts, ndst, end - start, sc, ag, tid, blockDim.x);
  }
  __syncthreads();
  if (tid == 0) {
    if (active && status == ST_OK) sym_barrier(a, b, 2 * count + 2);
    if (active) *counted = count + 1;
    // Bytes sent to (way 0) and received from (way 1) every peer r: r loads its shard from
    // this rank and this rank stores its own into r (all-reduce both), and the other way.
    const u64 mine = min(shard, total - min(total, me * shard));
    ll_finish(a, begun, (const u32*)0, key, -1, [&](u32 r, int way) -> u64 {
      const u64 theirs = min(shard, total - min(total, r * shard));
      if (ar) return mine + theirs;
      return (way == 0) == ag ? mine : theirs;
    });
  }
}

// Bytes of each block's piece of a send of `bytes` bytes over `blocks` blocks: an equal share,
// rounded up to 512 bytes (whole 128-byte lines of the peer's memory, as the symmetric
// kernels' pieces) where it is that large, to 16 below. Mirrored by the host model
// (src/exec/gpu/emulate/send_recv.rs).
__device__ __forceinline__ u64 p2p_unit(u64 bytes, u32 blocks) {
  const u64 even = (bytes + blocks - 1) / blocks;
  const u64 align = even >= 512 ? 512 : 16;
  return max((even + align - 1) / align * align, (u64)16);
}

// Block b of SendRecv_ST: after the entry barrier (every peer's stream reached its part of the
// group, so nothing before it still uses the receive buffers), stores piece b of each of this
// rank's sends into the receiving rank's buffer, its own first, then from the next rank on (so
// the ranks of an all-to-all do not all store into the same rank at once); the exit barrier then
// says every peer's piece b is in this rank's buffers. A failed barrier skips the stores and the
// exit barrier, as in sym_run. `key` numbers this direct kernel.
__device__ void p2p_run(const LlArgs& a, u64 key) {
  __shared__ u64 count;
  __shared__ int status;
  __shared__ LlStart begun;
  const u32 tid = threadIdx.x, b = blockIdx.x;
  u64* counted = (u64*)a.state + RNCCL_SYM_COUNT_WORD + b;
  const u64 count0 = tid == 0 ? *counted : 0;  // before ll_start's loads, as in sym_run
  ll_start(a, begun);
  if (tid == 0) {
    count = count0;
    status = sym_barrier(a, b, 2 * count0 + 1);
  }
  op_started(&a.ctl, a.seq);
  __syncthreads();
  for (u32 j = 0; j < a.nranks && status == ST_OK; j++) {
    const u32 r = (a.ctl.rank + j) % a.nranks;
    const u64 bytes = a.send_bytes[r];
    if (bytes == 0) continue;
    const u64 unit = p2p_unit(bytes, gridDim.x);
    const u64 start = min(bytes, (u64)b * unit), end = min(bytes, start + unit);
    if (end > start)
      direct_copy<u8>(a.peer_dst[r] + start, a.peer_src[r] + start, end - start, tid, blockDim.x);
  }
  __syncthreads();
  if (tid == 0) {
    if (status == ST_OK) sym_barrier(a, b, 2 * count + 2);
    *counted = count + 1;
    ll_finish(a, begun, (const u32*)0, key, -1,
              [&](u32 r, int way) -> u64 { return way == 0 ? a.send_bytes[r] : a.recv_bytes[r]; });
  }
}

#endif  // RNCCL_ABI_ONLY

}  // namespace rnccl
