// The arithmetic of one element of every (type, op), shared by the CPU kernels
// (cpu/element_ops.h) and the CUDA kernels (cuda/reduce_functors.h): one
// definition, so the two families cannot drift apart. T is the type the
// arithmetic happens in (float for float16, bfloat16 and the FP8 types).
//  - float16 / bfloat16 widen exactly to float and narrow once to
//    nearest-even (core/half.h on the host, one cvt instruction on the device;
//    they differ only in NaN payloads);
//  - float8 e4m3 / e5m2 widen exactly to float and narrow once to
//    nearest-even, saturating to the largest finite value (core/fp8.h, the
//    same integer code on host and device, so the bits agree everywhere);
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

#include "core/fp8.h"
#include "core/half.h"
#include "tidal/tidal.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TIDAL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TIDAL_HOST_DEVICE inline
#endif

namespace tidal::elementwise {

// Storage type in memory and the type arithmetic happens in.
template <typename T>
struct SameElement {
  using Storage = T;
  using Math = T;
  static TIDAL_HOST_DEVICE T load(T value) { return value; }
  static TIDAL_HOST_DEVICE T store(T value) { return value; }
};

template <tidalDataType_t kType>
struct Element;
template <>
struct Element<tidalInt8> : SameElement<int8_t> {};
template <>
struct Element<tidalUint8> : SameElement<uint8_t> {};
template <>
struct Element<tidalInt32> : SameElement<int32_t> {};
template <>
struct Element<tidalUint32> : SameElement<uint32_t> {};
template <>
struct Element<tidalInt64> : SameElement<int64_t> {};
template <>
struct Element<tidalUint64> : SameElement<uint64_t> {};
template <>
struct Element<tidalFloat32> : SameElement<float> {};
template <>
struct Element<tidalFloat64> : SameElement<double> {};

// On the device the conversions are single instructions (cvt); on the host
// they are core/half.h, which the CPU kernels use. Both widen exactly and
// narrow to nearest-even; they differ only in NaN payloads (see above).
template <>
struct Element<tidalFloat16> {
  using Storage = uint16_t;
  using Math = float;
  static TIDAL_HOST_DEVICE float load(uint16_t bits) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));
#else
    return halfBitsToFloat(bits);
#endif
  }
  static TIDAL_HOST_DEVICE uint16_t store(float value) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(value));
#else
    return floatToHalfBits(value);
#endif
  }
};

template <>
struct Element<tidalBfloat16> {
  using Storage = uint16_t;
  using Math = float;
  static TIDAL_HOST_DEVICE float load(uint16_t bits) {
#if defined(__CUDA_ARCH__)
    return __bfloat162float(__ushort_as_bfloat16(bits));
#else
    return bf16BitsToFloat(bits);
#endif
  }
  static TIDAL_HOST_DEVICE uint16_t store(float value) {
#if defined(__CUDA_ARCH__)
    return __bfloat16_as_ushort(__float2bfloat16_rn(value));
#else
    return floatToBf16Bits(value);
#endif
  }
};

// OCP FP8 (core/fp8.h): stored as the raw byte, computed in float, rounded
// back saturating to max finite. The same conversion code on host and
// device, hence the same bits (NaNs included).
template <class Format>
struct Fp8Element {
  using Storage = uint8_t;
  using Math = float;
  static TIDAL_HOST_DEVICE float load(uint8_t bits) { return Format::toFloat(bits); }
  static TIDAL_HOST_DEVICE uint8_t store(float value) {
    return Format::fromFloat(value, Fp8Overflow::kSatFinite);
  }
};
template <>
struct Element<tidalFloat8e4m3> : Fp8Element<fp8_detail::E4M3> {};
template <>
struct Element<tidalFloat8e5m2> : Fp8Element<fp8_detail::E5M2> {};

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
