// The host's floor for one thread driving several GPUs (nccl-tests' and `rnccl bench`'s `-g N`):
// per iteration, make each GPU's context current and launch one kernel on its stream, as a
// group of collectives does, with a kernel argument block of the LL kernel's size (576 bytes,
// kernels/ll.cuh LlArgs). Prints microseconds per iteration and per launch for 1..N GPUs, with
// an empty kernel; a collective's `-g N` time at 8 B cannot go below this.
//
//   nvcc -O2 -arch=native -o /tmp/launch_floor perf/launch_floor.cu && /tmp/launch_floor [iterations]
//   (or perf/device_phases.sh floor)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

struct Args {
  unsigned long long w[72];  // 576 bytes
};

__global__ void empty(const __grid_constant__ Args a) {
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
  printf("gpus  us/iteration  us/launch  (%d iterations, one thread, 576-byte arguments)\n", iters);
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
  return 0;
}
