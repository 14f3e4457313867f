// Element-wise reductions for every data type and operation of nccl.h, as the CPU backend
// computes them (src/device/cpu/reduce.rs), so GPU and CPU ranks agree bit for bit:
//   * integers: wrapping sum and product, min, max; `pre` multiplies (wrapping) by an integer
//     scalar, `post` divides by an integer (avg of integers = sum, then divide by nranks);
//   * float and double: IEEE operations in the type itself, `pre` multiplies by the scalar
//     rounded to the type;
//   * half and bfloat16 (CUDA's __half / __nv_bfloat16): widened to float, combined, rounded
//     back once; `pre` multiplies in float;
//   * FP8 (__nv_fp8_e4m3 / __nv_fp8_e5m2), NCCL's rules (src/device/reduce_kernel.h): each step
//     rounds the exact result to half, then to FP8 with saturation (__NV_SATFINITE); `pre`
//     multiplies by the scalar rounded to FP8 and rounds the product the same way. In float the
//     sum and product of two FP8 values are exact or correctly rounded (24 ≥ 2·11 + 2 bits), so
//     float → half → FP8 is what __hadd/__hmul then the FP8 conversion give (src/fp8.rs).
// Avg on floating point is lowered by the host to PreMulSum(1/nranks) (NCCL does the same).
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

// __ldcg for the FP8 types, which cuda_fp8.h does not declare: the byte, loaded cache-global.
// In the global namespace beside CUDA's overloads, so unqualified calls in rnccl:: find them all.
static __device__ __forceinline__ __nv_fp8_e4m3 __ldcg(const __nv_fp8_e4m3* p) {
  __nv_fp8_e4m3 r;
  r.__x = __ldcg((const unsigned char*)p);
  return r;
}
static __device__ __forceinline__ __nv_fp8_e5m2 __ldcg(const __nv_fp8_e5m2* p) {
  __nv_fp8_e5m2 r;
  r.__x = __ldcg((const unsigned char*)p);
  return r;
}

namespace rnccl {

typedef unsigned long long u64;
typedef long long i64;

// The binary operation (redop.rs `Combine`, same order).
enum Combine { SUM = 0, PROD = 1, MAX = 2, MIN = 3 };

// The transforms of one call: the scalar of `pre` (both forms; the type picks) and the
// divisor of `post`.
struct Scalars {
  double pre_f;
  i64 pre_i;
  u64 post_div;
};

// How a type is computed: `Acc` is the type arithmetic runs in, `load`/`store` convert.
template <typename T> struct Arith {
  typedef T Acc;
  static __device__ __forceinline__ Acc load(T v) { return v; }
  static __device__ __forceinline__ T store(Acc v) { return v; }
};
template <> struct Arith<__half> {
  typedef float Acc;
  static __device__ __forceinline__ float load(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half store(float v) { return __float2half_rn(v); }
};
template <> struct Arith<__nv_bfloat16> {
  typedef float Acc;
  static __device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <typename F> struct Fp8Arith {
  typedef float Acc;
  static __device__ __forceinline__ float load(F v) { return (float)v; }
  static __device__ __forceinline__ F store(float v) { return F(__float2half_rn(v)); }
};
template <> struct Arith<__nv_fp8_e4m3> : Fp8Arith<__nv_fp8_e4m3> {};
template <> struct Arith<__nv_fp8_e5m2> : Fp8Arith<__nv_fp8_e5m2> {};

template <typename T> struct IsInt { static const bool value = false; };
template <> struct IsInt<signed char> { static const bool value = true; };
template <> struct IsInt<unsigned char> { static const bool value = true; };
template <> struct IsInt<int> { static const bool value = true; };
template <> struct IsInt<unsigned int> { static const bool value = true; };
template <> struct IsInt<i64> { static const bool value = true; };
template <> struct IsInt<u64> { static const bool value = true; };

// Wrapping integer arithmetic is done in the unsigned type of the same width, so overflow is
// defined (C++ signed overflow is not) and matches Rust's wrapping_add/wrapping_mul.
template <typename T> struct Unsigned { typedef T type; };
template <> struct Unsigned<signed char> { typedef unsigned char type; };
template <> struct Unsigned<int> { typedef unsigned int type; };
template <> struct Unsigned<i64> { typedef u64 type; };

template <typename A, int OP, bool INT> struct CombineOp;
template <typename A, int OP> struct CombineOp<A, OP, true> {
  static __device__ __forceinline__ A apply(A x, A y) {
    typedef typename Unsigned<A>::type U;
    if (OP == SUM) return (A)((U)x + (U)y);
    if (OP == PROD) return (A)((U)x * (U)y);
    if (OP == MAX) return x > y ? x : y;
    return x < y ? x : y;
  }
};
template <typename A, int OP> struct CombineOp<A, OP, false> {
  static __device__ __forceinline__ A apply(A x, A y) {
    if (OP == SUM) return x + y;
    if (OP == PROD) return x * y;
    // NaN propagates as Rust's f32::max does not: keep `x` when comparing with NaN fails, the
    // order the CPU backend uses (a > b ? a : b).
    if (OP == MAX) return x > y ? x : y;
    return x < y ? x : y;
  }
};

// `pre(x)`: x times the scalar, in the type's arithmetic.
template <typename T> struct Pre {
  typedef typename Arith<T>::Acc A;
  static __device__ __forceinline__ A apply(A x, const Scalars& s) {
    if (IsInt<T>::value) {
      typedef typename Unsigned<T>::type U;
      return (A)((U)x * (U)(T)s.pre_i);
    }
    return x * (A)s.pre_f;
  }
};
template <> struct Pre<__half> {
  static __device__ __forceinline__ float apply(float x, const Scalars& s) {
    return x * (float)s.pre_f;
  }
};
template <> struct Pre<__nv_bfloat16> {
  static __device__ __forceinline__ float apply(float x, const Scalars& s) {
    return x * (float)s.pre_f;
  }
};

template <typename F> struct Fp8Pre {
  static __device__ __forceinline__ float apply(float x, const Scalars& s) {
    const float k = (float)F((float)s.pre_f);
    return Arith<F>::load(Arith<F>::store(x * k));
  }
};
template <> struct Pre<__nv_fp8_e4m3> : Fp8Pre<__nv_fp8_e4m3> {};
template <> struct Pre<__nv_fp8_e5m2> : Fp8Pre<__nv_fp8_e5m2> {};

// `post(x)`: integer division by the divisor (only integer averages have a post).
template <typename T> struct Post {
  typedef typename Arith<T>::Acc A;
  static __device__ __forceinline__ A apply(A x, const Scalars& s) {
    if (IsInt<T>::value) return (A)(x / (A)s.post_div);
    return x;
  }
};

// The reduction of one element: `post(a ⊕ pre(b))` with the transforms `PRE`/`POST` switched
// on at run time by the step's flags.
template <typename T, int OP> struct Reduce {
  typedef Arith<T> Ar;
  typedef typename Ar::Acc A;
  static __device__ __forceinline__ T combine(T a, T b, bool pre, bool post, const Scalars& s) {
    A y = Ar::load(b);
    if (pre) y = Pre<T>::apply(y, s);
    A r = CombineOp<A, OP, IsInt<T>::value>::apply(Ar::load(a), y);
    if (post) r = Post<T>::apply(r, s);
    return Ar::store(r);
  }
  // `post(pre(b))`: a copy with transforms. Half types with `pre` round once (0 + pre(b)), as
  // the CPU backend does.
  static __device__ __forceinline__ T transform(T b, bool pre, bool post, const Scalars& s) {
    A y = Ar::load(b);
    if (pre) y = Pre<T>::apply(y, s);
    if (post) y = Post<T>::apply(y, s);
    return Ar::store(y);
  }
};

}  // namespace rnccl
