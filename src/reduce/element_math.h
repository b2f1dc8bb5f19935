// The arithmetic of one element of every (type, op), shared by the CPU kernels
// (cpu/element_ops.h) and the CUDA kernels (cuda/reduce_functors.h): one
// definition, so the two families cannot drift apart. T is the type the
// arithmetic happens in (float for float16 and bfloat16).
//  - integers wrap: arithmetic happens in the unsigned type of the same width;
//  - max is (a > b ? a : b) and min (a < b ? a : b); an unordered pair returns
//    a + b, i.e. a quiet NaN;
//  - division is a true IEEE division by (T)divisor, never a reciprocal
//    multiply; signed integers truncate toward zero and dividing the most
//    negative value by -1 wraps instead of trapping; unsigned integers divide
//    by the divisor converted to uint64_t.
//
// Baseline-ISA inline templates: the CPU's AVX2 translation unit includes this
// too, and the copies the linker may pick must run on any x86-64.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tidal/tidal.h"

#if defined(__CUDACC__)
#define TIDAL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TIDAL_HOST_DEVICE inline
#endif

namespace tidal::elementwise {

template <tidalRedOp_t kOp, typename T>
TIDAL_HOST_DEVICE T combine(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    // x != x is the NaN test that needs no <cmath> on the device.
    if constexpr (kOp == tidalProd) {
      return a * b;
    } else if constexpr (kOp == tidalMax) {
      if (a != a || b != b) return a + b;
      return a > b ? a : b;
    } else if constexpr (kOp == tidalMin) {
      if (a != a || b != b) return a + b;
      return a < b ? a : b;
    } else {
      return a + b;
    }
  } else {
    // At least unsigned int wide, so that uint8 * uint8 cannot promote to a
    // signed int and overflow.
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    if constexpr (kOp == tidalProd) {
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else if constexpr (kOp == tidalMax) {
      return a > b ? a : b;
    } else if constexpr (kOp == tidalMin) {
      return a < b ? a : b;
    } else {
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    }
  }
}

// x / divisor, divisor != 0.
template <typename T>
TIDAL_HOST_DEVICE T divide(T x, int divisor) {
  if constexpr (std::is_floating_point_v<T>) {
    return x / static_cast<T>(divisor);
  } else if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (divisor == -1) return static_cast<T>(U{0} - static_cast<U>(x));
    return static_cast<T>(static_cast<int64_t>(x) / divisor);
  } else {
    return static_cast<T>(static_cast<uint64_t>(x) /
                          static_cast<uint64_t>(static_cast<int64_t>(divisor)));
  }
}

}  // namespace tidal::elementwise
