// Collectives on buffers in symmetric windows through nccl.h: ncclMemAlloc'd buffers registered
// with ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC) inside a group, as nccl-tests -R 2
// registers them, then all-reduces, reduce-scatters and all-gathers on them (rnccl runs its
// symmetric kernels there), in and out of place, checked element by element against the
// host's sums. One thread drives two ranks (ncclCommInitAll): one per GPU on a host with two,
// both on GPU 0 on a host with one (rnccl allows that; NCCL refuses it). Run by
// perf/capi_symmetric.sh; prints "check <name>: ok" or "FAILED", and "all ok" last.

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "capi_check.h"

static const int N = 2;
// Rank r's input element i: small integers, so float sums are exact.
static float value(int r, size_t i) { return (float)((r + 1) * (int)(i % 97) + r); }

int main() {
  int ngpus = 0;
  CK(cudaGetDeviceCount(&ngpus));
  int devs[N] = {0, ngpus > 1 ? 1 : 0};
  ncclComm_t comms[N];
  NK(ncclCommInitAll(comms, N, devs));
  const size_t max_count = (2u << 20) + 3;  // elements per rank and shard
  const size_t bytes = max_count * N * sizeof(float);
  float* send[N];
  float* recv[N];
  cudaStream_t streams[N];
  ncclWindow_t wins[N][2];
  for (int r = 0; r < N; r++) {
    CK(cudaSetDevice(devs[r]));
    CK(cudaStreamCreate(&streams[r]));
    NK(ncclMemAlloc((void**)&send[r], bytes));
    NK(ncclMemAlloc((void**)&recv[r], bytes));
  }
  NK(ncclGroupStart());
  for (int r = 0; r < N; r++) {
    NK(ncclCommWindowRegister(comms[r], send[r], bytes, &wins[r][0], NCCL_WIN_COLL_SYMMETRIC));
    NK(ncclCommWindowRegister(comms[r], recv[r], bytes, &wins[r][1], NCCL_WIN_COLL_SYMMETRIC));
  }
  NK(ncclGroupEnd());
  const char* names[3] = {"all_reduce", "reduce_scatter", "all_gather"};
  const size_t counts[] = {1, 7, 1021, 65537, 1000003, max_count};
  int failed = 0;
  std::vector<float> host(max_count * N), got(max_count * N);
  for (int coll = 0; coll < 3; coll++) {
    for (int in_place = 0; in_place < 2; in_place++) {
      for (size_t count : counts) {
        // Elements of each rank's input and output.
        const size_t nin = coll == 1 ? count * N : count, nout = coll == 2 ? count * N : count;
        for (int r = 0; r < N; r++) {
          CK(cudaSetDevice(devs[r]));
          CK(cudaMemset(recv[r], 0xa5, bytes));
          for (size_t i = 0; i < nin; i++) host[i] = value(r, i);
          // In place, the input sits where NCCL puts it: the whole buffer (all-reduce,
          // reduce-scatter) or this rank's part of the output (all-gather).
          float* in = in_place ? recv[r] + (coll == 2 ? r * count : 0) : send[r];
          CK(cudaMemcpy(in, host.data(), nin * sizeof(float), cudaMemcpyHostToDevice));
        }
        NK(ncclGroupStart());
        for (int r = 0; r < N; r++) {
          float* in = in_place ? recv[r] + (coll == 2 ? r * count : 0) : send[r];
          float* out = in_place && coll == 1 ? recv[r] + r * count : recv[r];
          if (coll == 0)
            NK(ncclAllReduce(in, out, count, ncclFloat, ncclSum, comms[r], streams[r]));
          else if (coll == 1)
            NK(ncclReduceScatter(in, out, count, ncclFloat, ncclSum, comms[r], streams[r]));
          else
            NK(ncclAllGather(in, out, count, ncclFloat, comms[r], streams[r]));
        }
        NK(ncclGroupEnd());
        size_t wrong = 0;
        for (int r = 0; r < N; r++) {
          CK(cudaSetDevice(devs[r]));
          CK(cudaStreamSynchronize(streams[r]));
          ncclResult_t async;
          NK(ncclCommGetAsyncError(comms[r], &async));
          if (async != ncclSuccess) {
            fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comms[r]));
            wrong++;
          }
          float* out = in_place && coll == 1 ? recv[r] + r * count : recv[r];
          CK(cudaMemcpy(got.data(), out, nout * sizeof(float), cudaMemcpyDeviceToHost));
          for (size_t i = 0; i < nout; i++) {
            float want = 0;
            if (coll == 0)
              for (int q = 0; q < N; q++) want += value(q, i);
            else if (coll == 1)
              for (int q = 0; q < N; q++) want += value(q, r * count + i);
            else
              want = value((int)(i / count), i % count);
            wrong += got[i] != want;
          }
        }
        printf("check %s %s count=%zu: %s", names[coll], in_place ? "in-place" : "out-of-place",
               count, wrong ? "FAILED" : "ok\n");
        if (wrong) printf(" (%zu wrong)\n", wrong);
        failed += wrong != 0;
      }
    }
  }
  for (int r = 0; r < N; r++) {
    NK(ncclCommWindowDeregister(comms[r], wins[r][0]));
    NK(ncclCommWindowDeregister(comms[r], wins[r][1]));
    NK(ncclMemFree(send[r]));
    NK(ncclMemFree(recv[r]));
    NK(ncclCommDestroy(comms[r]));
  }
  printf(failed ? "%d checks FAILED\n" : "all ok\n", failed);
  return failed ? 1 : 0;
}
