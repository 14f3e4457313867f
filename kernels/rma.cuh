// One-sided operations (nccl.h 2.30's ncclPutSignal, ncclSignal and ncclWaitSignal) between
// ranks of one host whose GPUs reach each other's memory. A put stores the caller's bytes
// straight into the peer's window (mapped into this process through CUDA IPC, or peer access
// for a GPU of the same process), then adds one to this rank's signal word in the peer's
// memory; a signal only adds the one. A wait spins on this rank's signal words until each
// peer's count reaches what this rank consumed before plus what it waits for now, then
// consumes them.
//
// A signal word is the u64 at RNCCL_SIGNAL_OFF of the direct area (direct.cuh) the sender
// stores into, in the receiver's memory: after the area's two flag rows, so nothing else
// touches it. Only signals ever write it, and only by adding, so it counts every signal the
// sender ever sent; the receiver keeps how many it consumed in its own device memory
// (RmaArgs::state). Both counts live on the GPUs, so back-to-back kernels and CUDA-graph
// replays (which repeat a captured put and wait with the same arguments) continue from them.
// Signals of a rank to itself use a word of its own state.
//
// The put's bytes are ordered before its signal: a put of one block stores, synchronises the
// block and fences at system scope before thread 0 adds the signal (the pattern of direct.cuh's
// flags, which peers read with acquire loads); a larger put runs as two kernels on the stream,
// the stores on many blocks, then the signal alone (RMA_SIGNAL), which starts once every store
// of the first completed. No count is shared between launches, so puts on several streams of
// one communicator may run at once.
//
// Mirrored by src/device/cuda/abi.rs (RmaArgs, the modes and constants), whose test checks the
// layout; change both together.
#pragma once

namespace rnccl {

// Byte offset of the signal word in a direct area (after RNCCL_DIRECT_BLOCKS flags × 2 rows).
#define RNCCL_SIGNAL_OFF 2048
// Bytes of a communicator's one-sided state: u64 signals consumed per rank, then u64 the rank's
// signal word for itself.
#define RNCCL_RMA_STATE (8u * RNCCL_LL_MAX_RANKS + 8u)

// What the one-sided kernel runs (RmaArgs::mode).
enum RmaMode { RMA_PUT = 0, RMA_WAIT = 1, RMA_SIGNAL = 2 };

struct RmaArgs {
  Program ctl;    // report, abort, claim, timeout and rank; no lanes
  u64 src;        // put: the caller's bytes (device address)
  u64 dst;        // put: where they go in the peer's window (an address in this process)
  u64 bytes;      // put: bytes to store; signal: bytes to add to the traffic counters
  u64 signal;     // put, signal: u64* the signal word to add one to (put: 0 for none)
  u64 state;      // this rank's one-sided state (RNCCL_RMA_STATE bytes of device memory)
  u64 out_step;   // put, signal: the send end's Conn::step of this rank's first connection with
  u64 out_live;   // the peer, and its Conn::bytes (0: none): the put's bytes add to its traffic
  u32 mode;       // RmaMode
  u32 peer;       // put: the rank stored into
  u32 nranks;
  u32 pad;
  u64 word[RNCCL_LL_MAX_RANKS];  // wait: per rank, this rank's signal word for its signals
  u64 want[RNCCL_LL_MAX_RANKS];  // wait: per rank, signals to wait for (0: none)
  u64 mark[RNCCL_LL_MAX_RANKS];  // wait: per rank, where a long wait marks itself (the live
                                 // words of the receive end with it; 0: nowhere)
};
static_assert(sizeof(RmaArgs) == 392, "RmaArgs layout");

#ifndef RNCCL_ABI_ONLY

// Thread 0, once the put's bytes are stored: fences, adds the signal and the traffic.
__device__ void rma_signal(const RmaArgs& a) {
  __threadfence_system();
  atomicAdd_system((unsigned long long*)a.signal, 1ull);
  if (a.out_step != 0) {
    u64* c = (u64*)a.out_step;
    c[1] += a.bytes;
    st_volatile((u64*)a.out_live + 1, c[1]);
  }
}

// The put: every block stores its share of the bytes (16-byte aligned pieces); with a signal
// (a put of one block), thread 0 adds it once the block is done.
__device__ void rma_put(const RmaArgs& a) {
  const u64 per = ((a.bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
  const u64 at = min(a.bytes, (u64)blockIdx.x * per);
  const u64 len = min(per, a.bytes - at);
  direct_copy<unsigned char>(a.dst + at, a.src + at, len, threadIdx.x, blockDim.x);
  __syncthreads();
  if (threadIdx.x == 0 && a.signal != 0) rma_signal(a);
}

// The wait, one block: thread r waits for rank r's signals; a wait that fails reports the rank
// and the count it waited for, and consumes nothing.
__device__ void rma_wait(const RmaArgs& a) {
  const u32 r = threadIdx.x;
  if (blockIdx.x != 0 || r >= a.nranks || a.want[r] == 0) return;
  u64* consumed = (u64*)a.state + r;
  const u64 target = *consumed + a.want[r];
  const int st = wait_at_least((const u64*)a.word[r], target, &a.ctl, (u64*)a.mark[r]);
  if (st != ST_OK) {
    Conn c = {};
    c.peer = r;
    report(&a.ctl, st, 0, c, target, 3);
    return;
  }
  *consumed = target;
}

#endif  // RNCCL_ABI_ONLY

}  // namespace rnccl

#ifndef RNCCL_ABI_ONLY
#define RNCCL_RMA                                                                           \
  extern "C" __global__ void __launch_bounds__(512) rnccl_rma(                              \
      const __grid_constant__ rnccl::RmaArgs a) {                                           \
    if (a.mode == rnccl::RMA_PUT)                                                           \
      rnccl::rma_put(a);                                                                    \
    else if (a.mode == rnccl::RMA_WAIT)                                                     \
      rnccl::rma_wait(a);                                                                   \
    else if (blockIdx.x == 0 && threadIdx.x == 0)                                           \
      rnccl::rma_signal(a);                                                                 \
  }
#endif  // RNCCL_ABI_ONLY
