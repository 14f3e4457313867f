// Checks for the nccl.h test programs of perf/ (capi_rma.cu, capi_symmetric.cu): a failing CUDA
// runtime call exits with status 2, a failing NCCL call with status 3, each after printing the
// call, where it is and why (for NCCL, its last error too).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)
#define NK(x)                                                                                 \
  do {                                                                                        \
    ncclResult_t r_ = (x);                                                                    \
    if (r_ != ncclSuccess) {                                                                  \
      fprintf(stderr, "%s:%d %s: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_),  \
              ncclGetLastError(NULL));                                                        \
      exit(3);                                                                                \
    }                                                                                         \
  } while (0)
