// The host's floor for one thread driving several GPUs (nccl-tests' and `rnccl bench`'s `-g N`):
// per iteration, make each GPU's context current and launch one kernel on its stream, as a
// group of collectives does, with a kernel argument block of the LL kernel's size (848 bytes,
// kernels/ll.cuh LlArgs). Prints microseconds per iteration and per launch for 1..N GPUs, with
// an empty kernel; a collective's `-g N` time at 8 B cannot go below this. Then the same with
// one launcher thread per GPU (the caller launches GPU 0's kernel, a persistent thread each
// other GPU's, in lock step per iteration as a group's end would wait for them), and the host
// cost of one launch call alone (200 launches, fewer than a stream queues, before any sync);
// then both for argument blocks of 8 to 2048 bytes on GPU 0 (one H200, 2026-12-04: 4.1 to 4.6
// µs per launch back to back and 3.7 to 4.3 per call whatever the size, 848 bytes 4.16 /
// 4.21); last, the host's cost of ordering GPU 0's stream after another's (event record and
// wait), which a group launching one kernel for several GPUs would pay instead of a launch.
//
//   nvcc -O2 -arch=native -Xcompiler -pthread -o /tmp/launch_floor perf/launch_floor.cu && /tmp/launch_floor [iterations]
//   (or perf/device_phases.sh floor)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

struct Args {
  unsigned long long w[106];  // 848 bytes
};

__global__ void empty(const __grid_constant__ Args a) {
  if (a.w[0] == 1 && threadIdx.x == 1000) printf("never\n");
}

// The same empty kernel on an argument block of B bytes, for the launch cost's dependence on it.
template <int B>
struct Sized {
  unsigned long long w[B / 8];
};
template <int B>
__global__ void empty_sized(const __grid_constant__ Sized<B> a) {
  if (a.w[0] == 1 && threadIdx.x == 1000) printf("never\n");
}

#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e = (x);                                                          \
    if (e != cudaSuccess) {                                                       \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                     \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

// One row of the argument-size table: `iters` launches of empty_sized<B> back to back on
// `stream` (the slower of the host's calls and the GPU's kernel turnaround), then the host's
// cost of 200 calls alone, fewer than a stream queues.
template <int B>
void by_size(cudaStream_t stream, int iters) {
  Sized<B> a = {};
  double per[2];
  for (int part = 0; part < 2; part++) {
    const int k = part == 0 ? iters : 200;
    for (int i = 0; i < 200; i++) empty_sized<B><<<1, 512, 0, stream>>>(a);
    CK(cudaStreamSynchronize(stream));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < k; i++) empty_sized<B><<<1, 512, 0, stream>>>(a);
    if (part == 0) CK(cudaStreamSynchronize(stream));
    per[part] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / k;
    CK(cudaStreamSynchronize(stream));
  }
  printf("%14d  %9.2f  %27.2f\n", B, per[0], per[1]);
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 20000;
  int ngpus = 0;
  CK(cudaGetDeviceCount(&ngpus));
  cudaStream_t s[16];
  for (int g = 0; g < ngpus && g < 16; g++) {
    CK(cudaSetDevice(g));
    CK(cudaStreamCreateWithFlags(&s[g], cudaStreamNonBlocking));
  }
  Args a = {};
  printf("gpus  us/iteration  us/launch  (%d iterations, one thread, 848-byte arguments)\n", iters);
  for (int n = 1; n <= ngpus && n <= 16; n *= 2) {
    for (int warm = 0; warm < 2; warm++) {
      const int k = warm ? iters : 200;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < k; i++)
        for (int g = 0; g < n; g++) {
          CK(cudaSetDevice(g));
          empty<<<1, 512, 0, s[g]>>>(a);
        }
      for (int g = 0; g < n; g++) {
        CK(cudaSetDevice(g));
        CK(cudaStreamSynchronize(s[g]));
      }
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (warm) printf("%4d  %12.2f  %9.2f\n", n, us / k, us / k / n);
    }
  }
  printf("gpus  us/iteration  (one launcher thread per GPU, lock step)\n");
  for (int n = 2; n <= ngpus && n <= 16; n *= 2) {
    std::atomic<int> go{0}, done{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int g = 1; g < n; g++)
      workers.emplace_back([&, g] {
        CK(cudaSetDevice(g));
        int seen = 0;
        while (true) {
          int now;
          while ((now = go.load(std::memory_order_acquire)) == seen)
            if (stop.load()) return;
          seen = now;
          empty<<<1, 512, 0, s[g]>>>(a);
          done.fetch_add(1, std::memory_order_acq_rel);
        }
      });
    CK(cudaSetDevice(0));
    for (int warm = 0; warm < 2; warm++) {
      const int k = warm ? iters : 200;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < k; i++) {
        done.store(0, std::memory_order_relaxed);
        go.fetch_add(1, std::memory_order_acq_rel);
        empty<<<1, 512, 0, s[0]>>>(a);
        while (done.load(std::memory_order_acquire) != n - 1) {
        }
      }
      for (int g = 0; g < n; g++) {
        CK(cudaSetDevice(g));
        CK(cudaStreamSynchronize(s[g]));
      }
      CK(cudaSetDevice(0));
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (warm) printf("%4d  %12.2f\n", n, us / k);
    }
    stop = true;
    for (auto& w : workers) w.join();
  }
  CK(cudaSetDevice(0));
  CK(cudaStreamSynchronize(s[0]));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; i++) empty<<<1, 512, 0, s[0]>>>(a);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  CK(cudaStreamSynchronize(s[0]));
  printf("host cost of one launch call: %.2f us (200 launches, no sync)\n", us / 200);
  printf("argument bytes  us/launch (GPU 0, %d back to back)  host us/call (200, no sync)\n", iters);
  by_size<8>(s[0], iters);
  by_size<64>(s[0], iters);
  by_size<256>(s[0], iters);
  by_size<512>(s[0], iters);
  by_size<848>(s[0], iters);
  by_size<2048>(s[0], iters);
  // What ordering one GPU's stream after another's costs the host, for a group that would
  // launch one kernel for several GPUs instead of one each: an event recorded on the other
  // stream (GPU 1's where there is one, else a second stream of GPU 0; timing disabled, as
  // NCCL's group events) and this stream made to wait for it, 200 pairs after 200 to warm up.
  const int og = ngpus > 1 ? 1 : 0;
  CK(cudaSetDevice(og));
  cudaStream_t other;
  cudaEvent_t ev;
  CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  double pair = 0;
  for (int part = 0; part < 2; part++) {
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; i++) {
      CK(cudaSetDevice(og));
      CK(cudaEventRecord(ev, other));
      CK(cudaSetDevice(0));
      CK(cudaStreamWaitEvent(s[0], ev, 0));
    }
    pair = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count() / 200;
  }
  CK(cudaStreamSynchronize(s[0]));
  printf("host cost of an event record on GPU %d's stream and a wait for it on GPU 0's: %.2f us\n", og,
         pair);
  return 0;
}
