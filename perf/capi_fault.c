/* NCCL 2.30's growth, fault-tolerance and suspension calls through rnccl's libnccl.so.2 on G
 * GPUs of one host (every GPU it sees, at most 8, at least 2), one thread per GPU (issue 30's C
 * test on the device machine; perf/torch_fault.sh builds and runs it):
 *   1. a one-rank communicator on GPU 0 makes a grow id (ncclCommGetUniqueId); GPUs 1..G-1 join
 *      with ncclCommGrow(NULL, G, &id, r) while GPU 0 calls ncclCommGrow(comm, G, &id, -1);
 *   2. an all-reduce on the grown communicator is checked;
 *   3. ncclCommRevoke on every rank while the last rank's all-reduce waits for ranks that never
 *      call (the revoke ends it), then ncclCommShrink(NCCL_SHRINK_DEFAULT) excluding nobody
 *      makes a new G-rank communicator whose all-reduce is checked;
 *   4. ncclCommSuspend(NCCL_SUSPEND_MEM) on every rank: ncclCommMemStats reports it suspended
 *      and the freed bytes no longer counted; a collective while suspended is refused; after
 *      ncclCommResume an all-reduce is checked;
 *   5. the last rank is excluded on purpose: the others shrink it out and all-reduce.
 * Prints "capi_fault ok on G GPUs" and exits 0 when every step worked. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nccl.h"

#define N (1 << 20)
#define CHECK(cmd) do { ncclResult_t r_ = (cmd); if (r_ != ncclSuccess) { \
  printf("FAILED %s:%d %s -> %d (%s)\n", __FILE__, __LINE__, #cmd, (int)r_, ncclGetLastError(NULL)); exit(1); } } while (0)
#define EXPECT(c) do { if (!(c)) { printf("FAILED %s:%d %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static ncclUniqueId growId;
static ncclComm_t first;
static pthread_barrier_t barrier;
static int G; /* GPUs, ranks */

/* All-reduces `value` from every rank of `comm` on `dev` and checks the sum. */
static void allReduce(ncclComm_t comm, int dev, float value) {
  int n = 0;
  CHECK(ncclCommCount(comm, &n));
  float *buf, host[4];
  cudaSetDevice(dev);
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaMalloc((void**)&buf, N * sizeof(float));
  float* init = (float*)malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) init[i] = value;
  cudaMemcpy(buf, init, N * sizeof(float), cudaMemcpyHostToDevice);
  CHECK(ncclAllReduce(buf, buf, N, ncclFloat, ncclSum, comm, s));
  EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
  cudaMemcpy(host, buf + N - 4, sizeof host, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 4; i++) EXPECT(host[i] == value * n);
  cudaFree(buf);
  free(init);
  cudaStreamDestroy(s);
}

static void* rank(void* arg) {
  int r = (int)(long)arg, last = G - 1;
  cudaSetDevice(r);
  ncclComm_t grown = NULL, shrunk = NULL, rest = NULL;
  CHECK(ncclCommGrow(r == 0 ? first : NULL, G, &growId, r == 0 ? -1 : r, &grown, NULL));
  int me = -1, n = 0;
  CHECK(ncclCommUserRank(grown, &me));
  CHECK(ncclCommCount(grown, &n));
  EXPECT(me == r && n == G);
  allReduce(grown, r, 1.0f);
  printf("rank %d: grown communicator %d of %d all-reduced\n", r, me, n);
  fflush(stdout);

  /* The last rank's all-reduce waits for the others, which revoke instead of joining: the
   * revoke on every rank ends it. */
  pthread_barrier_wait(&barrier);
  if (r == last) {
    float* buf;
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaMalloc((void**)&buf, N * sizeof(float));
    CHECK(ncclAllReduce(buf, buf, N, ncclFloat, ncclSum, grown, s));
    pthread_barrier_wait(&barrier);
    CHECK(ncclCommRevoke(grown, NCCL_REVOKE_DEFAULT));
    cudaStreamSynchronize(s); /* returns: the kernel left its wait */
    cudaFree(buf);
    cudaStreamDestroy(s);
  } else {
    pthread_barrier_wait(&barrier);
    usleep(200 * 1000);
    CHECK(ncclCommRevoke(grown, NCCL_REVOKE_DEFAULT));
  }
  EXPECT(ncclCommFinalize(grown) == ncclInvalidUsage);
  CHECK(ncclCommShrink(grown, NULL, 0, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
  allReduce(shrunk, r, 3.0f);
  printf("rank %d: revoked, shrunk to a new communicator and all-reduced\n", r);
  fflush(stdout);

  /* Suspension: the suspendable memory is freed and counted out, work is refused, and resume
   * gives a working communicator back. */
  uint64_t total = 0, suspendable = 0, suspended = 0, after = 0;
  CHECK(ncclCommMemStats(shrunk, ncclStatGpuMemTotal, &total));
  CHECK(ncclCommMemStats(shrunk, ncclStatGpuMemSuspend, &suspendable));
  CHECK(ncclCommMemStats(shrunk, ncclStatGpuMemSuspended, &suspended));
  EXPECT(suspended == 0 && total >= suspendable);
  CHECK(ncclCommSuspend(shrunk, NCCL_SUSPEND_MEM));
  CHECK(ncclCommMemStats(shrunk, ncclStatGpuMemSuspended, &suspended));
  CHECK(ncclCommMemStats(shrunk, ncclStatGpuMemTotal, &after));
  EXPECT(suspended == 1 && after == total - suspendable);
  {
    float* buf;
    cudaMalloc((void**)&buf, sizeof(float));
    EXPECT(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, shrunk, 0) != ncclSuccess);
    cudaFree(buf);
  }
  pthread_barrier_wait(&barrier);
  CHECK(ncclCommResume(shrunk));
  CHECK(ncclCommMemStats(shrunk, ncclStatGpuMemSuspended, &suspended));
  EXPECT(suspended == 0);
  allReduce(shrunk, r, 4.0f);
  printf("rank %d: suspended (%llu of %llu bytes freed), resumed and all-reduced\n", r,
         (unsigned long long)suspendable, (unsigned long long)total);
  fflush(stdout);

  /* The last rank leaves on purpose. */
  pthread_barrier_wait(&barrier);
  if (r != last) {
    int exclude[1] = {last};
    CHECK(ncclCommShrink(shrunk, exclude, 1, &rest, NULL, NCCL_SHRINK_DEFAULT));
    CHECK(ncclCommCount(rest, &n));
    EXPECT(n == G - 1);
    allReduce(rest, r, 5.0f);
    CHECK(ncclCommDestroy(rest));
    printf("rank %d: shrank rank %d out and all-reduced with %d ranks\n", r, last, n);
  }
  CHECK(ncclCommDestroy(shrunk));
  CHECK(ncclCommDestroy(grown));
  CHECK(ncclCommAbort(NULL));
  return NULL;
}

int main(void) {
  ncclUniqueId id;
  EXPECT(cudaGetDeviceCount(&G) == cudaSuccess && G >= 2);
  if (G > 8) G = 8;
  cudaSetDevice(0);
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&first, 1, id, 0));
  CHECK(ncclCommGetUniqueId(first, &growId));
  EXPECT(ncclCommGetUniqueId(first, &id) == ncclInvalidUsage);
  pthread_barrier_init(&barrier, NULL, G);
  pthread_t t[8];
  for (long r = 0; r < G; r++) pthread_create(&t[r], NULL, rank, (void*)r);
  for (int r = 0; r < G; r++) pthread_join(t[r], NULL);
  CHECK(ncclCommDestroy(first));
  printf("capi_fault ok on %d GPUs\n", G);
  return 0;
}
