// All-reduce, reduce-scatter and all-gather straight through the peers' memory. The all-reduce
// is two-shot (reduce-scatter, then all-gather), with NCCL's Simple protocol per block: every
// rank owns one shard of the buffer; it stores each peer's shard of its input into that
// peer's direct area, reduces its own shard from its input and what the peers stored, in rank
// order (so every rank gets the same bits), writes the result to its output and stores it into
// every peer's area, then copies the peers' reduced shards into its output. Each rank sends
// 2(n-1)/n of the buffer, as a ring does, but with two flag hops per round instead of 2(n-1)
// slot handshakes per chunk (the two-shot shape of vLLM's custom all-reduce and PyTorch's
// SymmetricMemory two_shot_all_reduce, written into the peers rather than read from them, so
// the caller's buffers need no registration; gpu-backend.md §B.1, §B.4).
//
// A direct area (per peer and direction, in the receiver's memory, after its LL area) holds
// two flag rows and two data regions (scatter, gather) of two parities × RNCCL_DIRECT_BLOCKS
// slots of RNCCL_DIRECT_SLOT bytes. Block b only ever uses slot b and flag b, whatever the
// operation's block count, and counts its rounds in device memory (LlArgs::state, from word
// 8): round R writes parity R & 1 and raises the flags to R. A parity was last used by round
// R - 2, and block b of a rank stores round R into a peer's slots only once the peer's block b
// is done reading round R - 2 there: a scatter after the peer's gather flag for R - 2 (raised,
// in every mode, once it reduced R - 2, which is when it read its scatter slots); a gather
// after the peer's scatter flag for R (all-reduce) or gather flag for R - 1 (all-gather), both
// raised after it copied R - 2 out (a reduce-scatter round uses no gather slot). So two
// parities are enough, and back-to-back kernels of any mode and CUDA-graph replays continue
// from the counts.
//
// A reduce-scatter is the all-reduce's first shot (its shards are the ranks' outputs), run by
// two groups of warps: one stores the scatters round after round as far ahead as the peers'
// gather flags allow, the other reduces each round as it arrives. An all-gather is the second
// shot (every rank stores its input into every peer's area). A broadcast is an all-gather in
// which only the root's shard holds bytes (the others still raise their gather flags, which
// tell the root its slots are free again), and an all-to-all one in which each rank stores a
// different block of its input into each peer's area. Every rank stores into its peers in turn
// from the next rank on, so at any time each rank's links carry one peer's stores rather than
// every rank writing into rank 0 first.
//
// Mirrored by src/device/cuda/abi.rs (the constants); change both together.
#pragma once

namespace rnccl {

// Bytes of one block's slot (per kind and parity) of a direct area.
#define RNCCL_DIRECT_SLOT (64u << 10)
// Most blocks of a direct all-reduce (flag and slot rows of an area).
#define RNCCL_DIRECT_BLOCKS 128
// Bytes of a direct area's flag rows (two rows of RNCCL_DIRECT_BLOCKS u64, padded).
#define RNCCL_DIRECT_FLAGS 4096
// Bytes of a direct area.
#define RNCCL_DIRECT_AREA (RNCCL_DIRECT_FLAGS + 4u * RNCCL_DIRECT_BLOCKS * RNCCL_DIRECT_SLOT)
// Word of LlArgs::state where the blocks' round counts start.
#define RNCCL_DIRECT_ROUNDS_WORD 8
// Byte offset of the registration record in a direct area (registered.cuh): inside
// RNCCL_DIRECT_FLAGS, after the symmetric flags. Three u64 the peer stores: its input and
// output as this rank maps them, then the word 2k (those are valid) or 2k + 1 (its buffers
// are not registered) for its k-th direct kernel.
#define RNCCL_REG_REC_OFF 3328

// What a direct kernel runs (LlArgs::mode).
enum DirectMode {
  DIRECT_ALL_REDUCE = 0,
  DIRECT_REDUCE_SCATTER = 1,
  DIRECT_ALL_GATHER = 2,
  DIRECT_BROADCAST = 3,
  DIRECT_ALL_TO_ALL = 4,
  // The symmetric kernels (symmetric.cuh), on buffers in symmetric windows.
  DIRECT_SYM_ALL_REDUCE = 5,
  DIRECT_SYM_REDUCE_SCATTER = 6,
  DIRECT_SYM_ALL_GATHER = 7,
  // The direct send/receive (symmetric.cuh, SendRecv_ST) on a group's own buffers.
  DIRECT_SYM_SEND_RECV = 8
};

#ifndef RNCCL_ABI_ONLY

// The slot of block `b` for `kind` (0 scatter, 1 gather) and parity `par` in the direct area
// at `area`.
__device__ __forceinline__ u64 direct_slot(u64 area, u32 kind, u32 par, u32 b) {
  return area + RNCCL_DIRECT_FLAGS +
         ((u64)(kind * 2 + par) * RNCCL_DIRECT_BLOCKS + b) * RNCCL_DIRECT_SLOT;
}

__device__ __forceinline__ u64* direct_flag(u64 area, u32 kind, u32 b) {
  return (u64*)area + kind * RNCCL_DIRECT_BLOCKS + b;
}

// The registration record in the direct area that follows the LL area at `ll_area`.
__device__ __forceinline__ u64* reg_record(u64 ll_area) {
  return (u64*)(ll_area + RNCCL_LL_AREA + RNCCL_REG_REC_OFF);
}

// dst[i] = src[i] over `bytes` bytes (element-aligned; 16-byte packs where both are 16-byte
// aligned) with the `nt` threads of a group, this one being number `tid`.
template <typename T>
__device__ __forceinline__ void direct_copy(u64 dst, u64 src, u64 bytes, u32 tid, u32 nt) {
  u64 done = 0;
  if (((dst | src) & 15) == 0) {
    const u64 npacks = bytes / 16;
    const uint4* s = (const uint4*)src;
    uint4* d = (uint4*)dst;
    for (u64 base = 0; base < npacks; base += (u64)nt * UNROLL) {
      uint4 v[UNROLL];
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        const u64 p = base + tid + (u64)k * nt;
        if (p < npacks) v[k] = __ldcg(s + p);
      }
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        const u64 p = base + tid + (u64)k * nt;
        if (p < npacks) d[p] = v[k];
      }
    }
    done = npacks * 16;
  }
  const T* s = (const T*)src;
  T* d = (T*)dst;
  for (u64 i = done / sizeof(T) + tid; i < bytes / sizeof(T); i += nt) d[i] = s[i];
}

// acc (the reduction of the ranks before r) combined with x, rank r's 16-byte pack: pre on
// every input, post on the last (`first`: r is rank 0, `last`: the last rank).
template <typename T, int OP>
__device__ __forceinline__ uint4 pack_reduce(uint4 acc, uint4 x, bool first, bool last,
                                             const Scalars& sc) {
  union {
    uint4 v;
    u64 u[2];
  } a, b;
  a.v = acc;
  b.v = x;
  a.u[0] = reduce_unit<T, OP>(a.u[0], b.u[0], first, last, sc);
  a.u[1] = reduce_unit<T, OP>(a.u[1], b.u[1], first, last, sc);
  return a.v;
}

// dsts[j][i] = reduce over r of srcs[r][i] (pre on every input, post on the last), or the
// plain copy of srcs[0] when `copy`, for `bytes` bytes (element-aligned), with the `nt` threads
// of a group (this one number `tid`): 16-byte packs where every pointer is 16-byte aligned,
// 8-byte units of whole elements otherwise and for the tail.
//
// Each thread keeps its UNROLL packs' loads of one rank in flight together, and issues the
// next rank's before it reduces this one's: a pass costs about one load latency per rank (the
// peers' over NVLink the longest), not one per pack and rank as a reduction pack by pack would.
template <typename T, int OP>
__device__ __forceinline__ void direct_reduce(const u64* srcs, u32 n, const u64* dsts, u32 ndst,
                                              u64 bytes, const Scalars& sc, bool copy, u32 tid,
                                              u32 nt) {
  u64 any = 0;
  for (u32 r = 0; r < n; r++) any |= srcs[r];
  for (u32 j = 0; j < ndst; j++) any |= dsts[j];
  const u64 npacks = (any & 15) == 0 ? bytes / 16 : 0;
  const u32 nred = copy ? 1 : n;
  for (u64 base = 0; base < npacks; base += (u64)nt * UNROLL) {
    uint4 acc[UNROLL] = {}, x[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const u64 p = base + tid + (u64)k * nt;
      if (p < npacks) x[k] = __ldcg((const uint4*)srcs[0] + p);
    }
    for (u32 r = 0; r < nred; r++) {
      uint4 next[UNROLL];
      if (r + 1 < nred) {
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
          const u64 p = base + tid + (u64)k * nt;
          if (p < npacks) next[k] = __ldcg((const uint4*)srcs[r + 1] + p);
        }
      }
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        acc[k] = copy ? x[k] : pack_reduce<T, OP>(acc[k], x[k], r == 0, r + 1 == nred, sc);
        if (r + 1 < nred) x[k] = next[k];
      }
    }
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const u64 p = base + tid + (u64)k * nt;
      if (p < npacks)
        for (u32 j = 0; j < ndst; j++) ((uint4*)dsts[j])[p] = acc[k];
    }
  }
  for (u64 at = npacks * 16 + (u64)tid * 8; at < bytes; at += (u64)nt * 8) {
    u64 acc = copy ? ld_unit<T>(srcs[0], at, bytes) : 0;
    for (u32 r = 0; r < n && !copy; r++)
      acc = reduce_unit<T, OP>(acc, ld_unit<T>(srcs[r], at, bytes), r == 0, r + 1 == n, sc);
    for (u32 j = 0; j < ndst; j++) st_unit<T>(dsts[j], at, bytes, acc);
  }
}

// Barrier `id` of the `count` threads of a group of whole warps (id 0 with every thread of the
// block is __syncthreads).
__device__ __forceinline__ void group_sync(u32 id, u32 count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// Thread 0: waits until every peer's block `b` raised its `kind` flag in this rank's areas to
// `round`. Returns ST_OK, or the failure (reported, naming the peer).
__device__ int direct_wait(const LlArgs& a, u32 kind, u32 b, u64 round) {
  const Program* P = &a.ctl;
  for (u32 r = 0; r < a.nranks; r++) {
    if (r == P->rank) continue;
    const u64 area = a.in[r] + RNCCL_LL_AREA;
    const int st = wait_at_least(direct_flag(area, kind, b), round, P, (u64*)a.in_live[r] + 2);
    if (st != ST_OK) {
      Conn c = {};
      c.peer = r;
      report(P, st, b, c, round, 1);
      return st;
    }
  }
  return ST_OK;
}

// Thread 0, after the block's stores of round `round`: makes them visible, then raises this
// rank's `kind` flag for block `b` in every peer's area.
__device__ __forceinline__ void direct_post(const LlArgs& a, u32 kind, u32 b, u64 round) {
  fence_release_sys();
  for (u32 r = 0; r < a.nranks; r++)
    if (r != a.ctl.rank) st_volatile(direct_flag(a.out[r] + RNCCL_LL_AREA, kind, b), round);
}

// Thread 0: waits until every peer's block `b` raised its `kind` flag in this rank's areas to
// at least `round`, or raises `status` (reported).
__device__ __forceinline__ void direct_need(const LlArgs& a, u32 kind, u32 b, u64 round,
                                            int* status) {
  if (*status == ST_OK) *status = direct_wait(a, kind, b, round);
}

// Block b's rounds of a direct collective. All-reduce: scatter the peers' shards (A), reduce
// this rank's shard and store it to every peer (B), copy the peers' reduced shards (C); the
// scatter of round k + 1 goes out before the wait for round k's gather flags, so its stores
// overlap that hop. Reduce-scatter: A and B without the gather data; B still raises the gather
// flag, which tells the peers the scatter slots of that round are read. All-gather: B stores
// this rank's input to every peer, then C; a broadcast's root does the same with its buffer
// (the other ranks' B stores nothing), an all-to-all's B stores block r of the input to peer r.
//
// The plan's LlArgs::direct_blocks blocks take part; a registered kernel (registered.cuh) may
// run more, which only finish. `key` numbers this direct kernel on the communicator; unless
// `offered` (a registered kernel did), block 0 tells every peer this rank's buffers are not
// registered for it.
template <typename T, int OP>
__device__ void direct_run(const LlArgs& a, u64 key, bool offered) {
  __shared__ u64 base_round;
  __shared__ int status[2];  // per group of warps (one group outside reduce-scatters)
  const Program* P = &a.ctl;
  const u32 tid = threadIdx.x, b = blockIdx.x, B = a.direct_blocks, n = a.nranks, me = P->rank;
  const u32 mode = a.mode;
  const bool rs = mode == DIRECT_REDUCE_SCATTER, bcast = mode == DIRECT_BROADCAST,
             a2a = mode == DIRECT_ALL_TO_ALL;
  __shared__ LlStart begun;
  const bool active = b < B;
  u64* rounds_done = (u64*)a.state + RNCCL_DIRECT_ROUNDS_WORD + (active ? b : 0);
  // Loaded before ll_start's loads, so that thread 0 waits for them all at once (ll_conn_lane),
  // and so are the peers' gather flags of block b: the kernel's first scatter waits for them to
  // reach a round of an earlier kernel, which they almost always have by the time it starts,
  // and then needs no load of its own (`scatter`). Unrolled, so that they stay in registers.
  // Two ranks as threads on one H200 (2026-12-04, perf/op_spans.sh's stamps, 4 rounds in ABBA
  // order, CUDA graphs): the kernel's span against the wait's, all-reduce 1 / 8 MB 0.97 /
  // 0.99x (10.27 to 9.98 us at 1 MB), reduce-scatter 8 / 16 MB 0.91 / 1.00x.
  const u64 round0 = tid == 0 ? *rounds_done : 0;
  u64 flags[RNCCL_LL_MAX_RANKS];
#pragma unroll
  for (u32 r = 0; r < RNCCL_LL_MAX_RANKS; r++)
    flags[r] = tid == 0 && active && r < n && r != me
                   ? ld_volatile(direct_flag(a.in[r] + RNCCL_LL_AREA, 1, b))
                   : ~0ull;
  ll_start(a, begun);
  u64 gathered = ~0ull;  // thread 0: the least of those flags
#pragma unroll
  for (u32 r = 0; r < RNCCL_LL_MAX_RANKS; r++) gathered = min(gathered, flags[r]);
  if (tid == 0) {
    base_round = round0;
    status[0] = status[1] = ST_OK;
    if (b == 0 && !offered)
      for (u32 j = 1; j < n; j++) st_volatile(reg_record(a.out[(me + j) % n]) + 2, 2 * key + 1);
  }
  op_started(P, a.seq);
  __syncthreads();
  const Scalars sc = scalars<T>(P);
  // Shard s: bytes [s * shard, (s + 1) * shard) of the all-reduce's buffers (16-byte aligned
  // shards), of the reduce-scatter's input, of the all-gather's and the all-to-all's output
  // (and of the all-to-all's input, the block for rank s); `a.bytes` is the all-reduce's and
  // the broadcast's buffer and the others' per-rank part. A broadcast has one shard, the
  // root's: the whole buffer. A round moves `unit` bytes of every shard per block.
  const bool whole = mode == DIRECT_ALL_REDUCE || bcast;
  const u64 total = whole ? a.bytes : a.bytes * n;
  const u64 shard = mode == DIRECT_ALL_REDUCE ? ((a.bytes + n - 1) / n + 15) & ~15ull : a.bytes;
  const u64 unit = max(16ull, a.unit);
  // Block b runs the rounds whose piece starts inside the shard, and counts only those: the
  // peers' block b runs as many and raises its flags for each.
  const u64 pieces = (shard + unit - 1) / unit;
  const u64 nrounds = active && b < pieces ? (pieces - b + B - 1) / B : 0;
  // Where shard s of this block's piece of round k is in the input and in the output.
  auto off = [&](u64 k) { return (k * B + b) * unit; };
  auto piece = [&](u32 s, u64 k) -> u64 {
    if (bcast && s != a.root) return 0;
    const u64 o = off(k), base = bcast ? 0 : s * shard;
    const u64 at = base + o, end = min(base + min(o + unit, shard), total);
    return end > at ? end - at : 0;
  };
  auto in_at = [&](u32 s, u64 k) {
    return a.src + (mode == DIRECT_ALL_GATHER || bcast ? 0 : s * shard) + off(k);
  };
  auto out_at = [&](u32 s, u64 k) {
    return a.dst + (rs || bcast ? 0 : s * shard) + off(k);
  };
  const bool scatters = mode == DIRECT_ALL_REDUCE || rs;
  // Stores this rank's scatter of round k into the peers' slots and raises its flags, with the
  // `nt` threads of barrier `bar` (this one number `t`, thread 0 of the block); false once `st`
  // holds a failure. A slot's parity was last used two rounds before: first the peers' gather
  // flags of that round (raised once they read it, in any mode). Round 0 needs no wait when
  // the flags loaded as the kernel began reached it (flags only grow; the stores it permits
  // follow that load on control and a barrier, as the stores after the waits of NCCL's Simple
  // protocol follow its `ld.volatile` of the peer's step).
  auto scatter = [&](u64 k, u32 t, u32 nt, u32 bar, int* st) {
    const u64 round = base_round + k + 1;
    if (t == 0 && round > 2 && !(k == 0 && gathered >= round - 2))
      direct_need(a, 1, b, round - 2, st);
    group_sync(bar, nt);
    if (*(volatile int*)st != ST_OK) return false;
    const u32 par = (u32)(round & 1);
    // Peers in turn from the next rank on, so the ranks' stores spread over the peers.
    for (u32 j = 1; j < n; j++) {
      const u32 r = (me + j) % n;
      direct_copy<T>(direct_slot(a.out[r] + RNCCL_LL_AREA, 0, par, b), in_at(r, k), piece(r, k), t,
                     nt);
    }
    group_sync(bar, nt);
    if (t == 0) direct_post(a, 0, b, round);
    return true;
  };
  // The reduction of round k's shard of this rank: its input and what every peer stored, in
  // rank order, into `dsts` (after the output, the peers' gather slots when `gathers`). Without
  // scatters, the copy of this rank's shard; an all-to-all's block for each peer to that peer.
  auto reduce = [&](u64 k, u32 t, u32 nt, bool gathers) {
    const u64 round = base_round + k + 1;
    const u32 par = (u32)(round & 1);
    if (a2a) {
      for (u32 j = 0; j < n; j++) {
        const u32 r = (me + j) % n;
        const u64 to = j == 0 ? out_at(me, k) : direct_slot(a.out[r] + RNCCL_LL_AREA, 1, par, b);
        direct_copy<T>(to, in_at(r, k), piece(r, k), t, nt);
      }
      return;
    }
    u64 srcs[RNCCL_LL_MAX_RANKS], dsts[RNCCL_LL_MAX_RANKS];
    u32 nsrc = 0, ndst = 0;
    if (scatters) {
      for (u32 r = 0; r < n; r++)
        srcs[nsrc++] = r == me ? in_at(me, k) : direct_slot(a.in[r] + RNCCL_LL_AREA, 0, par, b);
    } else {
      srcs[nsrc++] = in_at(me, k);
    }
    // An in-place copy has its shard in place already.
    if (scatters || out_at(me, k) != srcs[0]) dsts[ndst++] = out_at(me, k);
    if (gathers)
      for (u32 j = 1; j < n; j++)
        dsts[ndst++] = direct_slot(a.out[(me + j) % n] + RNCCL_LL_AREA, 1, par, b);
    direct_reduce<T, OP>(srcs, nsrc, dsts, ndst, piece(me, k), sc, !scatters, t, nt);
  };
  if (rs) {
    // Two groups of warps: the first stores the scatters round after round, as far ahead as
    // the peers' gather flags allow; the second reduces each round once the peers' scatter
    // flags say it arrived, then raises its gather flag. The stores of later rounds cross the
    // links while earlier ones are reduced.
    const u32 half = blockDim.x / 2;
    const bool sender = tid < half;
    const u32 t = sender ? tid : tid - half;
    int* st = &status[sender ? 0 : 1];
    for (u64 k = 0; k < nrounds; k++) {
      if (sender) {
        if (!scatter(k, t, half, 1, st)) break;
        continue;
      }
      const u64 round = base_round + k + 1;
      if (t == 0) direct_need(a, 0, b, round, st);
      group_sync(2, half);
      if (*(volatile int*)st != ST_OK) break;
      reduce(k, t, half, false);
      group_sync(2, half);
      if (t == 0) direct_post(a, 1, b, round);
    }
  } else {
    // All-reduce (two-shot) and all-gather, with every thread: the scatter of round k + 1 goes
    // out before the wait for round k's gather flags, so its stores overlap that hop.
    int* st = &status[0];
    const u32 nt = blockDim.x;
    if (scatters && nrounds > 0) scatter(0, tid, nt, 0, st);
    for (u64 k = 0; k < nrounds; k++) {
      const u64 round = base_round + k + 1;
      const u32 par = (u32)(round & 1);
      if (scatters && tid == 0) direct_need(a, 0, b, round, st);
      __syncthreads();
      if (*st != ST_OK) break;
      reduce(k, tid, nt, true);
      __syncthreads();
      if (tid == 0) direct_post(a, 1, b, round);
      if (scatters && k + 1 < nrounds && !scatter(k + 1, tid, nt, 0, st)) break;
      if (tid == 0) direct_need(a, 1, b, round, st);
      __syncthreads();
      if (*st != ST_OK) break;
      for (u32 r = 0; r < n; r++)
        if (r != me)
          direct_copy<T>(out_at(r, k), direct_slot(a.in[r] + RNCCL_LL_AREA, 1, par, b),
                         piece(r, k), tid, nt);
    }
  }
  __syncthreads();
  if (tid == 0) {
    if (active) *rounds_done = base_round + nrounds;
    // Bytes sent to (way 0) and received from (way 1) every peer r.
    const u64 mine = min(shard, total - min(total, me * shard));
    ll_finish(a, begun, (const u32*)0, key, -1, [&](u32 r, int way) -> u64 {
      const u64 theirs = min(shard, total - min(total, r * shard));
      if (bcast) return (way == 0 ? me : r) == a.root ? a.bytes : 0;
      return mode == DIRECT_ALL_REDUCE ? mine + theirs : rs ? theirs : a2a ? shard : mine;
    });
  }
}

#endif  // RNCCL_ABI_ONLY

}  // namespace rnccl

#ifndef RNCCL_ABI_ONLY
// Every thread reads the kernel's number (the count of direct kernels before it, plus one)
// before its block's last barrier; the last block to finish advances the count.
#define RNCCL_DIRECT(NAME, T, OP)                                                       \
  extern "C" __global__ void __launch_bounds__(512) rnccl_direct_##NAME(                \
      const __grid_constant__ rnccl::LlArgs a) {                                        \
    const rnccl::u64 key =                                                              \
        rnccl::ld_volatile((const rnccl::u64*)a.state + RNCCL_KEY_WORD) + 1;              \
    if (a.mode == rnccl::DIRECT_SYM_SEND_RECV)                                          \
      rnccl::p2p_run(a, key);                                                           \
    else if (a.mode >= rnccl::DIRECT_SYM_ALL_REDUCE)                                    \
      rnccl::sym_run<T, OP>(a, a.mode, a.peer_src, a.peer_dst, a.unit, true, true, key);\
    else if (a.reg_blocks > 0)                                                          \
      rnccl::reg_run<T, OP>(a, key);                                                    \
    else                                                                                \
      rnccl::direct_run<T, OP>(a, key, false);                                          \
  }
#endif  // RNCCL_ABI_ONLY
