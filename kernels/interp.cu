// STAND-IN for the lead's interp.cu (branch nvrtc, for testing the NVRTC pipeline only): one
// kernel per data type and operation, named rnccl_interp_<dtype>_<op> as
// src/device/cuda/compile/entry.rs lists them, each combining two arrays element-wise.
// The real kernels replace this file when the branch is merged.
#include "program.cuh"
#include "reduce.cuh"

namespace rnccl {

template <typename T, typename Op>
__device__ void interp(const Step* steps, int nsteps) {
  Op op;
  for (int s = 0; s < nsteps; s++) {
    const T* a = static_cast<const T*>(steps[s].a);
    const T* b = static_cast<const T*>(steps[s].b);
    T* dst = static_cast<T*>(steps[s].dst);
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < steps[s].count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
      dst[i] = op(a[i], b[i]);
    }
  }
}

}  // namespace rnccl

#define RNCCL_INTERP(name, T, Op)                                                    \
  extern "C" __global__ void rnccl_interp_##name(const rnccl::Step* steps, int n) {  \
    rnccl::interp<T, rnccl::Op>(steps, n);                                           \
  }

#define RNCCL_INTERP_ALL_OPS(dtype, T) \
  RNCCL_INTERP(dtype##_sum, T, Sum)    \
  RNCCL_INTERP(dtype##_prod, T, Prod)  \
  RNCCL_INTERP(dtype##_max, T, Max)    \
  RNCCL_INTERP(dtype##_min, T, Min)

RNCCL_INTERP_ALL_OPS(int8, signed char)
RNCCL_INTERP_ALL_OPS(uint8, unsigned char)
RNCCL_INTERP_ALL_OPS(int32, int)
RNCCL_INTERP_ALL_OPS(uint32, unsigned int)
RNCCL_INTERP_ALL_OPS(int64, long long)
RNCCL_INTERP_ALL_OPS(uint64, unsigned long long)
RNCCL_INTERP_ALL_OPS(float16, __half)
RNCCL_INTERP_ALL_OPS(float32, float)
RNCCL_INTERP_ALL_OPS(float64, double)
RNCCL_INTERP_ALL_OPS(bfloat16, __nv_bfloat16)
