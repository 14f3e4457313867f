// The result check of `rnccl bench -c` on the device: compares a rank's output with the expected
// output the host generated and uploaded (src/bench/data.rs), and adds the number of wrong
// elements to a counter in device memory. Integers must be equal; floating-point elements must be
// within `tol × max(|want|, 4)` of the expected value, compared in double precision (a NaN never
// is), where the host passes tol = eps(type) × (nranks + 2).
//
// One kernel per data type, all in one module (RNCCL_DTYPE, which selects the interpreter's type,
// does not apply here): rnccl_check_<type>(out, want, count, tol, wrong), with interp.cu's type
// names. Any grid works (a grid-stride loop); the host launches blocks of 256 threads.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace rnccl_check {

typedef unsigned long long u64;

// Whether `out` passes against `want`: integers compare exactly (tol is 0 for them).
template <typename T>
struct Compare {
  static __device__ __forceinline__ bool ok(T out, T want, double) { return out == want; }
};

__device__ __forceinline__ bool close(double out, double want, double tol) {
  double scale = fabs(want) > 4.0 ? fabs(want) : 4.0;
  // Written so that a NaN on either side fails.
  return fabs(out - want) <= tol * scale;
}

template <>
struct Compare<float> {
  static __device__ __forceinline__ bool ok(float out, float want, double tol) {
    return close((double)out, (double)want, tol);
  }
};

template <>
struct Compare<double> {
  static __device__ __forceinline__ bool ok(double out, double want, double tol) {
    return close(out, want, tol);
  }
};

template <>
struct Compare<__half> {
  static __device__ __forceinline__ bool ok(__half out, __half want, double tol) {
    return close((double)__half2float(out), (double)__half2float(want), tol);
  }
};

template <>
struct Compare<__nv_bfloat16> {
  static __device__ __forceinline__ bool ok(__nv_bfloat16 out, __nv_bfloat16 want, double tol) {
    return close((double)__bfloat162float(out), (double)__bfloat162float(want), tol);
  }
};

template <>
struct Compare<__nv_fp8_e4m3> {
  static __device__ __forceinline__ bool ok(__nv_fp8_e4m3 out, __nv_fp8_e4m3 want, double tol) {
    return close((double)(float)out, (double)(float)want, tol);
  }
};

template <>
struct Compare<__nv_fp8_e5m2> {
  static __device__ __forceinline__ bool ok(__nv_fp8_e5m2 out, __nv_fp8_e5m2 want, double tol) {
    return close((double)(float)out, (double)(float)want, tol);
  }
};

template <typename T>
__device__ __forceinline__ void check(const T* out, const T* want, u64 count, double tol,
                                      u64* wrong) {
  u64 mine = 0;
  u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
    mine += Compare<T>::ok(out[i], want[i], tol) ? 0 : 1;
  }
  if (mine != 0) atomicAdd(wrong, mine);
}

}  // namespace rnccl_check

#define RNCCL_CHECK_TYPE(TN, T)                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                          \
      rnccl_check_##TN(const T* out, const T* want, unsigned long long count, double tol,    \
                       unsigned long long* wrong) {                                          \
    rnccl_check::check<T>(out, want, count, tol, wrong);                                     \
  }

RNCCL_CHECK_TYPE(i8, signed char)
RNCCL_CHECK_TYPE(u8, unsigned char)
RNCCL_CHECK_TYPE(i32, int)
RNCCL_CHECK_TYPE(u32, unsigned int)
RNCCL_CHECK_TYPE(i64, long long)
RNCCL_CHECK_TYPE(u64, unsigned long long)
RNCCL_CHECK_TYPE(f16, __half)
RNCCL_CHECK_TYPE(f32, float)
RNCCL_CHECK_TYPE(f64, double)
RNCCL_CHECK_TYPE(bf16, __nv_bfloat16)
RNCCL_CHECK_TYPE(f8e4m3, __nv_fp8_e4m3)
RNCCL_CHECK_TYPE(f8e5m2, __nv_fp8_e5m2)
