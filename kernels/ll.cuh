// All-reduce with NCCL's LL (low-latency) protocol, one-shot: every rank stores its whole
// input into every peer's LL area as 16-byte lines {data, flag, data, flag} and reduces the
// lines the peers stored into its own area, in rank order, so every rank computes the same
// bits. A line is valid when both its flags equal the operation's epoch, so there is no
// fence and no barrier: one NVLink store per 8 bytes, one local load to see it (NCCL
// src/device/prims_ll.h; internals §5.3; the one-shot shape of vLLM's custom all-reduce and
// TensorRT-LLM's Lamport kernels, gpu-backend.md §B.1).
//
// Areas hold two halves of `RNCCL_LL_HALF` bytes; an epoch's lines go to half `epoch & 1`. A
// rank stores epoch e+2's line i only after reading epoch e+1's line i from the peer, which the
// peer stored only after reading epoch e's line i: the same thread handles line i in every
// chunk on both ranks, and kernels of one communicator run in stream order. Inputs larger
// than a half's payload (`RNCCL_LL_HALF / 2`) go in chunks, one epoch each; an input of at
// most 32 lines in a kernel of one block is warp 0's alone (ll_allreduce_warp), whose lane i
// takes line i as thread i of block 0 does in the block path. The epoch lives in device
// memory (`state[0]`, the last epoch used), advanced by the last block to finish, so
// back-to-back kernels and CUDA-graph replays continue from it.
//
// Mirrored by src/device/cuda/abi.rs (LlArgs layout and the constants), whose test compiles
// this header with RNCCL_ABI_ONLY (its types alone) against the Rust offsets; change both
// together.
#pragma once

namespace rnccl {

// Bytes of one half of an LL area (per peer and direction).
#define RNCCL_LL_HALF (1u << 20)
// Bytes of an LL area (two halves); the direct area (direct.cuh) follows it.
#define RNCCL_LL_AREA (2u * RNCCL_LL_HALF)
// Most ranks of a one-shot LL all-reduce (the peers' addresses travel in the arguments).
#define RNCCL_LL_MAX_RANKS 8
// Word of LlArgs::state counting the kernels of the direct entry (direct.cuh) that ran on the
// communicator: each of their blocks reads it as it starts, the last to finish advances it, so
// every rank numbers its direct kernels alike, CUDA-graph replays included (registered.cuh).
#define RNCCL_KEY_WORD 2

struct LlArgs {
  Program ctl;  // report, abort, claim, timeout, scalars and rank; no lanes
  u64 src;      // input (device address)
  u64 dst;      // output (device address; may equal src)
  u64 bytes;    // bytes per rank
  u64 state;    // in device memory: u32 last epoch used, u32 blocks finished, u64 the last
                // operation reported finished (program.cuh, operation tracking)
  u64 seq;      // the operation's number
  u64 unit;     // direct.cuh: bytes of a shard per block and round (16..RNCCL_DIRECT_SLOT); 0 for LL
  u32 nranks;
  u32 mode;     // direct.cuh: what the direct kernel runs (DirectMode); 0 for LL
  u32 root;     // direct.cuh: the broadcast's root; 0 otherwise
  u32 reg_blocks;     // registered.cuh: the symmetric plan's blocks when this rank's buffers
                      // are registered with every peer (peer_src / peer_dst say where); 0 not
  u64 reg_unit;       // registered.cuh: the symmetric plan's bytes of a shard per block
  u32 direct_blocks;  // direct.cuh: blocks of the direct plan (the launch may run more)
  u32 pad;
  u64 out[RNCCL_LL_MAX_RANKS];  // per rank: the LL area it reads this rank's lines from
  u64 in[RNCCL_LL_MAX_RANKS];   // per rank: this rank's LL area for that rank's lines
  // Per rank, the byte counters of this rank's first point-to-point connection ends with it
  // (Conn::step and Conn::bytes of the send and receive ends; 0 for this rank): LL traffic
  // adds to their bytes (index 1), never to their slot counts, which the FIFO protocol owns;
  // a wait for the rank's lines marks the receive end's live word 2.
  u64 out_step[RNCCL_LL_MAX_RANKS];
  u64 out_live[RNCCL_LL_MAX_RANKS];
  u64 in_step[RNCCL_LL_MAX_RANKS];
  u64 in_live[RNCCL_LL_MAX_RANKS];
  // symmetric.cuh: per rank, its input and output as mapped in this process (this rank's
  // own at its index); registered.cuh (reg_blocks > 0): this rank's input and output as
  // mapped in rank r's process; 0 otherwise.
  u64 peer_src[RNCCL_LL_MAX_RANKS];
  u64 peer_dst[RNCCL_LL_MAX_RANKS];
  // symmetric.cuh, SendRecv_ST: per rank, the bytes this rank stores into it (from peer_src
  // into peer_dst) and the bytes it stores into this rank; 0 otherwise.
  u64 send_bytes[RNCCL_LL_MAX_RANKS];
  u64 recv_bytes[RNCCL_LL_MAX_RANKS];
};
static_assert(sizeof(LlArgs) == 848, "LlArgs layout");

#ifndef RNCCL_ABI_ONLY

__device__ __forceinline__ void st_line(u64 addr, u64 v, u32 flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(addr), "r"((u32)v),
               "r"(flag), "r"((u32)(v >> 32)), "r"(flag)
               : "memory");
}

// Waits for line `addr` to carry `flag` in both halves; returns its 8 data bytes, or sets
// `status` (abort or timeout). A wait that outlasts its first round of polls sets `mark` (the
// peer's receive counters' word 2), which the last block clears when the operation ends.
__device__ __forceinline__ u64 ld_line(u64 addr, u32 flag, const Program* P, int& status,
                                      u64* mark) {
  u32 a, f0, b, f1;
  u64 start = 0;
  u32 spins = 0;
  for (;;) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(f0), "=r"(b), "=r"(f1)
                 : "l"(addr)
                 : "memory");
    if (f0 == flag && f1 == flag) return ((u64)b << 32) | a;
    if (++spins < 1024) continue;
    spins = 0;
    if (ld_volatile32((const u32*)P->abort)) {
      status = ST_ABORTED;
      return 0;
    }
    u64 now = globaltimer();
    if (start == 0) {
      start = now;
      st_volatile(mark, 1);
    } else if (now - start > P->timeout_ns) {
      status = ST_TIMEOUT;
      return 0;
    }
  }
}

// 8 bytes of a buffer of `bytes` bytes starting at byte `at`, element by element (buffers are
// only element-aligned); bytes past the end read as 0.
template <typename T>
__device__ __forceinline__ u64 ld_unit(u64 base, u64 at, u64 bytes) {
  union {
    u64 u;
    T e[8 / sizeof(T)];
  } v;
  v.u = 0;
  const T* p = (const T*)(base + at);
#pragma unroll
  for (int j = 0; j < (int)(8 / sizeof(T)); j++)
    if (at + (j + 1) * sizeof(T) <= bytes) v.e[j] = p[j];
  return v.u;
}

template <typename T>
__device__ __forceinline__ void st_unit(u64 base, u64 at, u64 bytes, u64 u) {
  union {
    u64 u;
    T e[8 / sizeof(T)];
  } v;
  v.u = u;
  T* p = (T*)(base + at);
#pragma unroll
  for (int j = 0; j < (int)(8 / sizeof(T)); j++)
    if (at + (j + 1) * sizeof(T) <= bytes) p[j] = v.e[j];
}

// acc ⊕ pre(x) element-wise over one 8-byte unit (first: pre(x) alone); `post` on the last.
template <typename T, int OP>
__device__ __forceinline__ u64 reduce_unit(u64 acc, u64 x, bool first, bool last,
                                           const Scalars& s) {
  typedef Reduce<T, OP> R;
  union U {
    u64 u;
    T e[8 / sizeof(T)];
  } a, b;
  a.u = acc;
  b.u = x;
#pragma unroll
  for (int j = 0; j < (int)(8 / sizeof(T)); j++)
    a.e[j] = first ? R::transform(b.e[j], true, last, s) : R::combine(a.e[j], b.e[j], true, last, s);
  return a.u;
}

// What a block of a kernel that ends with ll_finish reads as it starts, so that its end waits
// for no load: the state's last epoch and last operation reported finished (thread 0), and per
// connection end `2 r + way` of this rank with every peer r (way 0 the send end, 1 the receive
// end) its step and live words' addresses and its byte count (one lane each, from
// ll_conn_lane; only the last block of a kernel changes the counts, in ll_finish, and a
// communicator's kernels run in stream order, so no other kernel changes them meanwhile). In
// shared memory; read after the block's first barrier.
struct LlStart {
  u32 epoch;
  u64 guard;
  u64 count[2 * RNCCL_LL_MAX_RANKS];
  u64 step_at[2 * RNCCL_LL_MAX_RANKS];
  u64 live_at[2 * RNCCL_LL_MAX_RANKS];
};

// The thread of connection end 0 in ll_start and ll_finish; end i's is i threads later. Warp
// 1's first lanes where the block has them: each end's loads (two argument words, then the
// count they point to) then run beside thread 0's loads of the state instead of after them.
// Lanes of one warp that take different branches run one branch after the other, and each
// branch here ends by storing what it loaded into shared memory, so it waits for its own loads
// before the next branch issues any. An 8-byte all-reduce replayed in a CUDA graph took
// 3.89 µs with both chains in warp 0 and 3.52 apart (perf/ll_kernel.cu, two ranks on one H200,
// 2026-12-02).
__device__ __forceinline__ u32 ll_conn_lane() {
  return blockDim.x >= 32 + 2 * RNCCL_LL_MAX_RANKS ? 32 : 1;
}

// Every thread of the block, before the block's first barrier: fills `s`.
__device__ __forceinline__ void ll_start(const LlArgs& a, LlStart& s) {
  const u32 t = threadIdx.x, lane = ll_conn_lane();
  if (t == 0) {
    const u32 e = ld_volatile32((const u32*)a.state);
    const u64 g = ld_volatile((const u64*)a.state + 1);
    s.epoch = e;
    s.guard = g;
  } else if (t >= lane && t < lane + 2 * a.nranks) {
    const u32 i = t - lane, r = i / 2;
    const u64 step = i % 2 ? a.in_step[r] : a.out_step[r];
    const u64 live = i % 2 ? a.in_live[r] : a.out_live[r];
    if (r != a.ctl.rank) {
      const u64 c = ((const u64*)step)[1];
      s.step_at[i] = step;
      s.live_at[i] = live;
      s.count[i] = c;
    }
  }
}

// Connection end i (2 r + way) of `s` moved `moved` more bytes: its step and live words say
// so, and a receive end's mark of a wait (ld_line) is cleared.
__device__ __forceinline__ void ll_count(const LlStart& s, u32 i, u64 moved) {
  const u64 b = s.count[i] + moved;
  ((u64*)s.step_at[i])[1] = b;
  st_volatile((u64*)s.live_at[i] + 1, b);
  if (i % 2) st_volatile((u64*)s.live_at[i] + 2, 0);
}

// After the block's last store: the last block to finish sets the epoch to `*epoch` (unless
// null) and the direct kernels' count to `key` (unless 0), resets the count of blocks, adds
// `moved(r, way)` bytes to the counters of the connection ends with every peer r (way 0 the
// send end, 1 the receive end) and, unless this is a CUDA-graph replay of an operation already
// reported or the kernel failed, says the operation finished. `failed` is whether this block
// failed, when the caller knows (0 or 1), else -1: a kernel of one block then takes that
// instead of reading whether any block claimed the report. A kernel of one block is its own
// last block: it skips the fence and the count of blocks.
//
// Called by thread 0 alone, or (`every_thread`) by every thread of the block after a barrier
// that follows every thread's last store: then a kernel of one block has each connection end's
// lane (ll_conn_lane) store that end's counters while thread 0 stores the rest: 3.52 µs per
// 8-byte all-reduce replayed in a CUDA graph, against 3.76 with thread 0 storing them all one
// after the other (perf/ll_kernel.cu, two ranks on one H200, 2026-12-02). Reading the counts as
// the kernel starts (ll_start) rather than here had taken it from 5.86 to 4.98 µs.
template <typename F>
__device__ void ll_finish(const LlArgs& a, const LlStart& s, const u32* epoch, u64 key,
                          int failed, F moved, bool every_thread = false) {
  const u32 t = threadIdx.x, lane = ll_conn_lane();
  u32* st = (u32*)a.state;
  const bool alone = gridDim.x == 1;
  const bool lanes_count = every_thread && alone;  // the ends' lanes store their counters
  if (lanes_count && t >= lane && t < lane + 2 * a.nranks) {
    const u32 i = t - lane, r = i / 2;
    if (r != a.ctl.rank) ll_count(s, i, moved(r, (int)(i % 2)));
    return;
  }
  if (t != 0) return;
  if (!alone) {
    __threadfence();
    if (atomicAdd(st + 1, 1u) != gridDim.x - 1) return;
    st_volatile32(st + 1, 0u);
  }
  if (epoch) st_volatile32(st, *epoch);
  if (key) st_volatile((u64*)a.state + RNCCL_KEY_WORD, key);
  if (!lanes_count)
    for (u32 i = 0; i < 2 * a.nranks; i++)
      if (i / 2 != a.ctl.rank) ll_count(s, i, moved(i / 2, (int)(i % 2)));
  // Every block ends up here, failed or not: a failure claimed the report first. A replay
  // of a CUDA graph carries an earlier number than the last one reported.
  const bool ok = alone && failed >= 0 ? failed == 0 : ld_volatile32((const u32*)a.ctl.claim) == 0;
  if (a.seq > s.guard && ok) {
    st_volatile((u64*)a.state + 1, a.seq);
    st_volatile((u64*)a.ctl.ops + 1, a.seq);
  }
}

// An all-reduce of at most one line per lane of a warp (1 to RNCCL_LL_WARP_BYTES bytes) in a
// kernel of one block: warp 0 alone does what ll_allreduce's block does, lane i with line i
// (the line thread i of block 0 takes in the block path), without the block's barriers, shared
// memory or separate loads of the state. Every lane issues every load it needs at once: the
// state (one word for the whole warp), its input line, and lane i < 2 nranks connection end i's
// byte count (end 2 r + way, as ll_start numbers them); it stores its line into every peer's
// area and reduces the peers' lines in rank order; the warp ends as ll_finish does for a kernel
// of one block, lane 0 storing the epoch and the finished report, each end's lane its counters.
// Replayed in a CUDA graph (perf/ll_kernel.cu, two ranks on one H200, 2026-12-04, bare 8-byte
// exchange 1.69 µs): 256 bytes took 2.47 µs against 3.02 through the block (first graph launch
// 3.71 against 4.38), 64 bytes 2.52 against 3.08; 8 bytes 2.51 against 2.44 on thread 0 alone,
// which this path replaced (an earlier run: thread 0 2.91, block 3.53).
#define RNCCL_LL_WARP_BYTES 256
template <typename T, int OP>
__device__ void ll_allreduce_warp(const LlArgs& a) {
  const u32 lane = threadIdx.x;
  if (lane >= 32) return;
  const Program* P = &a.ctl;
  const u32 flag = ld_volatile32((const u32*)a.state) + 1;
  const u64 guard = ld_volatile((const u64*)a.state + 1);
  const u64 v = ld_unit<T>(a.src, (u64)lane * 8, a.bytes);  // 0 past the input's end
  const u32 me = P->rank, n = a.nranks;
  const u32 er = lane / 2;
  const bool end = lane < 2 * n && er != me;
  u64 step_at = 0, live_at = 0, count = 0;
  if (end) {
    step_at = lane % 2 ? a.in_step[er] : a.out_step[er];
    live_at = lane % 2 ? a.in_live[er] : a.out_live[er];
    count = ((const u64*)step_at)[1];
  }
  op_started(P, a.seq);
  const bool mine = lane < (a.bytes + 7) / 8;
  const u64 half = (flag & 1) * (u64)RNCCL_LL_HALF + (u64)lane * 16;
  if (mine)
    for (u32 r = 0; r < n; r++)
      if (r != me) st_line(a.out[r] + half, v, flag);
  int status = ST_OK;
  if (mine) {
    const Scalars sc = scalars<T>(P);
    u64 acc = 0;
    for (u32 r = 0; r < n; r++) {
      const u64 x = r == me ? v : ld_line(a.in[r] + half, flag, P, status, (u64*)a.in_live[r] + 2);
      if (status != ST_OK) {
        Conn c = {};
        c.peer = r;
        report(P, status, 0, c, flag, 1);
        break;
      }
      acc = reduce_unit<T, OP>(acc, x, r == 0, r + 1 == n, sc);
    }
    if (status == ST_OK) st_unit<T>(a.dst, (u64)lane * 8, a.bytes, acc);
  }
  const bool failed = __any_sync(~0u, status != ST_OK);
  __syncwarp();  // orders every lane's waits' marks before the ends' lanes clear them
  if (end) {
    const u64 b = count + a.bytes;
    ((u64*)step_at)[1] = b;
    st_volatile((u64*)live_at + 1, b);
    if (lane % 2) st_volatile((u64*)live_at + 2, 0);
  }
  if (lane != 0) return;
  st_volatile32((u32*)a.state, flag);
  if (a.seq > guard && !failed) {
    st_volatile((u64*)a.state + 1, a.seq);
    st_volatile((u64*)a.ctl.ops + 1, a.seq);
  }
}

template <typename T, int OP>
__device__ void ll_allreduce(const LlArgs& a) {
  __shared__ LlStart begun;
  const Program* P = &a.ctl;
  if (gridDim.x == 1 && a.bytes > 0 && a.bytes <= RNCCL_LL_WARP_BYTES) {
    ll_allreduce_warp<T, OP>(a);
    return;
  }
  const u32 tid = threadIdx.x;
  const u64 payload = RNCCL_LL_HALF / 2;
  const u64 first = (u64)blockIdx.x * blockDim.x + tid, stride = (u64)blockDim.x * gridDim.x;
  // This thread's first line of the first chunk, loaded before the barrier so that its load
  // overlaps the state's.
  const u64 v0 = first < (min(payload, a.bytes) + 7) / 8 ? ld_unit<T>(a.src, first * 8, a.bytes) : 0;
  ll_start(a, begun);
  op_started(P, a.seq);
  __syncthreads();
  const u32 epoch0 = begun.epoch;
  const Scalars sc = scalars<T>(P);
  const u64 nchunks = a.bytes == 0 ? 0 : (a.bytes + payload - 1) / payload;
  const u64 me = P->rank;
  int status = ST_OK;
  for (u64 c = 0; c < nchunks && status == ST_OK; c++) {
    const u32 flag = epoch0 + 1 + (u32)c;
    const u64 half = (flag & 1) * (u64)RNCCL_LL_HALF;
    const u64 at0 = c * payload;
    const u64 n = min(payload, a.bytes - at0);
    const u64 lines = (n + 7) / 8;
    for (u64 i = first; i < lines; i += stride) {
      const u64 v = c == 0 && i == first ? v0 : ld_unit<T>(a.src, at0 + i * 8, a.bytes);
      for (u32 r = 0; r < a.nranks; r++)
        if (r != me) st_line(a.out[r] + half + i * 16, v, flag);
    }
    for (u64 i = first; i < lines && status == ST_OK; i += stride) {
      u64 acc = 0;
      for (u32 r = 0; r < a.nranks; r++) {
        u64 v;
        if (r == me) {
          v = c == 0 && i == first ? v0 : ld_unit<T>(a.src, at0 + i * 8, a.bytes);
        } else {
          v = ld_line(a.in[r] + half + i * 16, flag, P, status, (u64*)a.in_live[r] + 2);
          if (status != ST_OK) {
            Conn c = {};
            c.peer = r;
            report(P, status, blockIdx.x, c, flag, 1);
            break;
          }
        }
        acc = reduce_unit<T, OP>(acc, v, r == 0, r + 1 == a.nranks, sc);
      }
      if (status == ST_OK) st_unit<T>(a.dst, at0 + i * 8, a.bytes, acc);
    }
  }
  const int failed = __syncthreads_or(status != ST_OK);
  const u32 epoch = epoch0 + (u32)nchunks;
  ll_finish(a, begun, &epoch, 0, failed, [&](u32, int) { return a.bytes; }, true);
}

#endif  // RNCCL_ABI_ONLY

}  // namespace rnccl

#ifndef RNCCL_ABI_ONLY
#define RNCCL_LL(NAME, T, OP)                                                           \
  extern "C" __global__ void __launch_bounds__(512) rnccl_ll_allreduce_##NAME(          \
      const __grid_constant__ rnccl::LlArgs a) {                                        \
    rnccl::ll_allreduce<T, OP>(a);                                                      \
  }
#endif  // RNCCL_ABI_ONLY
