// STAND-IN for the lead's reduce.cuh (branch nvrtc, for testing the NVRTC pipeline only):
// the four ways two elements combine, for every NCCL data type, with __half and __nv_bfloat16
// done in float as NCCL does. The real header replaces this one when the branch is merged.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace rnccl {

struct Sum {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
  __device__ __half operator()(__half a, __half b) const {
    return __float2half(__half2float(a) + __half2float(b));
  }
  __device__ __nv_bfloat16 operator()(__nv_bfloat16 a, __nv_bfloat16 b) const {
    return __float2bfloat16(__bfloat162float(a) + __bfloat162float(b));
  }
};

struct Prod {
  template <typename T> __device__ T operator()(T a, T b) const { return a * b; }
  __device__ __half operator()(__half a, __half b) const {
    return __float2half(__half2float(a) * __half2float(b));
  }
  __device__ __nv_bfloat16 operator()(__nv_bfloat16 a, __nv_bfloat16 b) const {
    return __float2bfloat16(__bfloat162float(a) * __bfloat162float(b));
  }
};

struct Max {
  template <typename T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

struct Min {
  template <typename T> __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

}  // namespace rnccl
