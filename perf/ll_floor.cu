// The floor of a small all-reduce between two ranks: the bare one-shot LL exchange (each rank
// stores its 8 bytes with the epoch as flags into the peer's area, polls its own area for the
// peer's line, adds, stores the sum; kernels/ll.cuh's shape without its operation tracking,
// traffic counters, timeouts or abort checks), one kernel per rank and operation, with an
// argument block of LlArgs's size (848 bytes). Times `iterations` operations launched back to
// back from one thread on both ranks' streams, then the same captured into one CUDA graph per
// stream (thread-local capture, as nccl-tests' `-G 1` does) and launched once, timed as
// nccl-tests and `rnccl bench` time it: the first launch after instantiation, which also
// uploads the nodes' arguments (on one H200 that upload was about 1 µs of an 848-byte node's
// time, 2026-12-02), then the uploaded graphs' replays. Prints µs per operation for the three;
// perf/ll_floor.sh runs it beside `rnccl bench` for the ratio.
//
// The ranks' GPUs come from argv (default `0 1`, or `0 0` on a one-GPU machine: two ranks
// sharing GPU 0, each on its own stream). Checks every sum.
//
//   nvcc -O2 -arch=native -o /tmp/ll_floor perf/ll_floor.cu && /tmp/ll_floor [iterations [gpu0 gpu1]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x)                                                     \
  do {                                                            \
    cudaError_t ck_ = (x);                                        \
    if (ck_ != cudaSuccess) {                                     \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(ck_));   \
      exit(1);                                                    \
    }                                                             \
  } while (0)

struct Args {
  unsigned long long mine;   // uint4[2]: this rank's area, the peer's lines (two halves)
  unsigned long long peer;   // uint4[2]: the peer's area, this rank's lines
  unsigned long long state;  // unsigned: the last epoch used (device memory)
  unsigned long long src, dst;  // float[2]
  unsigned long long pad[101];  // to 848 bytes, LlArgs's size
};
static_assert(sizeof(Args) == 848, "Args size");

__global__ void __launch_bounds__(512) ll8(const __grid_constant__ Args a) {
  if (threadIdx.x != 0) return;
  const unsigned e = *(volatile unsigned*)a.state + 1;
  const uint2 v = *(const uint2*)a.src;
  const unsigned long long half = (e & 1) * 16;
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(a.peer + half), "r"(v.x),
               "r"(e), "r"(v.y), "r"(e)
               : "memory");
  unsigned x, f0, y, f1;
  do {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(x), "=r"(f0), "=r"(y), "=r"(f1)
                 : "l"(a.mine + half)
                 : "memory");
  } while (f0 != e || f1 != e);
  float* d = (float*)a.dst;
  d[0] = __uint_as_float(v.x) + __uint_as_float(x);
  d[1] = __uint_as_float(v.y) + __uint_as_float(y);
  *(volatile unsigned*)a.state = e;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 20000;
  const int gpu[2] = {argc > 3 ? atoi(argv[2]) : 0, argc > 3 ? atoi(argv[3]) : 1};
  cudaStream_t s[2];
  Args a[2] = {};
  void* area[2];
  for (int r = 0; r < 2; r++) {
    CK(cudaSetDevice(gpu[r]));
    if (gpu[0] != gpu[1]) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(gpu[1 - r], 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
      cudaGetLastError();
    }
    CK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
    CK(cudaMalloc(&area[r], 32));
    CK(cudaMemset(area[r], 0, 32));
    void *state, *src, *dst;
    CK(cudaMalloc(&state, 4));
    CK(cudaMemset(state, 0, 4));
    CK(cudaMalloc(&src, 8));
    CK(cudaMalloc(&dst, 8));
    const float in[2] = {1.0f + r, 10.0f * (1 + r)};
    CK(cudaMemcpy(src, in, 8, cudaMemcpyHostToDevice));
    a[r].mine = (unsigned long long)area[r];
    a[r].state = (unsigned long long)state;
    a[r].src = (unsigned long long)src;
    a[r].dst = (unsigned long long)dst;
  }
  a[0].peer = (unsigned long long)area[1];
  a[1].peer = (unsigned long long)area[0];
  auto check = [&](const char* what) {
    for (int r = 0; r < 2; r++) {
      CK(cudaSetDevice(gpu[r]));
      float out[2];
      CK(cudaMemcpy(out, (void*)a[r].dst, 8, cudaMemcpyDeviceToHost));
      if (out[0] != 3.0f || out[1] != 30.0f) {
        fprintf(stderr, "%s: rank %d got %g %g, want 3 30\n", what, r, out[0], out[1]);
        exit(1);
      }
    }
  };
  auto launch_all = [&](int k) {
    for (int i = 0; i < k; i++)
      for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(gpu[r]));
        ll8<<<1, 512, 0, s[r]>>>(a[r]);
      }
  };
  auto sync_all = [&] {
    for (int r = 0; r < 2; r++) {
      CK(cudaSetDevice(gpu[r]));
      CK(cudaStreamSynchronize(s[r]));
    }
  };
  launch_all(200);
  sync_all();
  auto t0 = std::chrono::steady_clock::now();
  launch_all(iters);
  sync_all();
  const double launched =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  check("launched");

  cudaGraphExec_t exec[2];
  for (int r = 0; r < 2; r++) {
    CK(cudaSetDevice(gpu[r]));
    CK(cudaStreamBeginCapture(s[r], cudaStreamCaptureModeThreadLocal));
  }
  launch_all(iters);
  // Every capture ends before any graph is instantiated: a thread that still captures a stream
  // may not instantiate.
  cudaGraph_t g[2];
  for (int r = 0; r < 2; r++) {
    CK(cudaSetDevice(gpu[r]));
    CK(cudaStreamEndCapture(s[r], &g[r]));
  }
  for (int r = 0; r < 2; r++) {
    CK(cudaSetDevice(gpu[r]));
    CK(cudaGraphInstantiate(&exec[r], g[r], 0));
  }
  sync_all();
  // The first launch of the instantiated graphs, as nccl-tests `-G 1` and `rnccl bench -G 1`
  // time it (no cudaGraphUpload first: the launch also uploads every node's arguments), then
  // the best of two replays of the uploaded graphs.
  auto launch_graphs = [&] {
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 2; r++) {
      CK(cudaSetDevice(gpu[r]));
      CK(cudaGraphLaunch(exec[r], s[r]));
    }
    sync_all();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  };
  const double graphed = launch_graphs();
  check("graphed");
  double replayed = 1e30;
  for (int round = 0; round < 2; round++) replayed = std::min(replayed, launch_graphs());
  check("replayed");
  printf("ll_floor gpus %d %d iterations %d: launched %.2f us/op, graph %.2f us/op, replay %.2f us/op\n",
         gpu[0], gpu[1], iters, launched, graphed, replayed);
  return 0;
}
