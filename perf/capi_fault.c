/* NCCL 2.30's growth and fault-tolerance calls through rnccl's libnccl.so.2 on two GPUs, one
 * thread per GPU (issue 30's C test on the device machine; perf/torch_fault.sh builds and runs
 * it):
 *   1. a one-rank communicator on GPU 0 makes a grow id (ncclCommGetUniqueId); GPU 1 joins with
 *      ncclCommGrow(NULL, 2, &id, 1) while GPU 0 calls ncclCommGrow(comm, 2, &id, -1);
 *   2. an all-reduce on the grown communicator is checked;
 *   3. ncclCommRevoke on both ranks while rank 1's all-reduce waits for a rank 0 that never
 *      calls (the revoke ends it), then ncclCommShrink(NCCL_SHRINK_DEFAULT) excluding nobody
 *      makes a new two-rank communicator whose all-reduce is checked;
 *   4. rank 1 is excluded on purpose: rank 0 shrinks it out and all-reduces alone.
 * Prints "capi_fault ok" and exits 0 when every step worked. */
#include <cuda_runtime.h>
#include <pthread.h>
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
  int r = (int)(long)arg;
  cudaSetDevice(r);
  ncclComm_t grown = NULL, shrunk = NULL, alone = NULL;
  if (r == 0) {
    CHECK(ncclCommGrow(first, 2, &growId, -1, &grown, NULL));
  } else {
    CHECK(ncclCommGrow(NULL, 2, &growId, 1, &grown, NULL));
  }
  int me = -1, n = 0;
  CHECK(ncclCommUserRank(grown, &me));
  CHECK(ncclCommCount(grown, &n));
  EXPECT(me == r && n == 2);
  allReduce(grown, r, 1.0f);
  printf("rank %d: grown communicator %d of %d all-reduced\n", r, me, n);
  fflush(stdout);

  /* Rank 1's all-reduce waits for rank 0, which revokes instead of joining: the revoke on
   * both ranks ends it. */
  pthread_barrier_wait(&barrier);
  if (r == 1) {
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

  /* Rank 1 leaves on purpose. */
  pthread_barrier_wait(&barrier);
  if (r == 0) {
    int exclude[1] = {1};
    CHECK(ncclCommShrink(shrunk, exclude, 1, &alone, NULL, NCCL_SHRINK_DEFAULT));
    CHECK(ncclCommCount(alone, &n));
    EXPECT(n == 1);
    allReduce(alone, 0, 5.0f);
    CHECK(ncclCommDestroy(alone));
    printf("rank 0: shrank rank 1 out and all-reduced alone\n");
  }
  CHECK(ncclCommDestroy(shrunk));
  CHECK(ncclCommDestroy(grown));
  CHECK(ncclCommAbort(NULL));
  return NULL;
}

int main(void) {
  ncclUniqueId id;
  cudaSetDevice(0);
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&first, 1, id, 0));
  CHECK(ncclCommGetUniqueId(first, &growId));
  EXPECT(ncclCommGetUniqueId(first, &id) == ncclInvalidUsage);
  pthread_barrier_init(&barrier, NULL, 2);
  pthread_t t[2];
  for (long r = 0; r < 2; r++) pthread_create(&t[r], NULL, rank, (void*)r);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  CHECK(ncclCommDestroy(first));
  printf("capi_fault ok\n");
  return 0;
}
