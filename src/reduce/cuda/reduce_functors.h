// The per-element arithmetic of the CUDA reduction kernels, compiled for the
// host too, so that the CPU tests check it on every machine (no GPU needed).
//
// The semantics are those of reduce.h and cpu/element_ops.h, bit for bit:
//  - integers wrap (arithmetic in the unsigned type of the same width);
//  - float16 / bfloat16 widen exactly to float, compute in float, round once
//    to nearest-even;
//  - float8 e4m3 / e5m2 likewise, saturating to max finite (core/fp8.h's
//    integer conversions, run on the device as they are, so no payload
//    difference either; 16 of them per 16-byte vector, element by element);
//  - max is (a > b ? a : b), min (a < b ? a : b), and a NaN operand gives
//    a + b (a NaN);
//  - avg divides the combined value by the divisor: a true IEEE division for
//    floats (float16/bfloat16 in float32, then one rounding), truncation for
//    integers, INT_MIN / -1 wrapping.
//
// Native half2 / bfloat162 arithmetic (pairFunctor) is used on the GPU for
// sum and prod without a divisor. It gives the same bits as "compute in
// float, round once": a float32 result of one addition or multiplication of
// two float16 (11-bit) or bfloat16 (8-bit) values, rounded again to 16 bits,
// equals the correctly rounded 16-bit result, because float32 carries
// 24 >= 2p + 2 significant bits (p = 11 or 8; the double-rounding bound for
// +, -, *, /). The hardware's __hadd2 / __hmul2 round to nearest-even
// without flushing subnormals, so they are that correctly rounded result.
// tests/unit/reduce_functors_test.cc checks the bound's consequence on the
// host; tests/gpu checks the kernels against the CPU bit for bit.
//
// Where the GPU differs, deliberately: a NaN result on the GPU is the
// canonical NaN (the hardware does not propagate payloads), where the CPU
// returns an operand's NaN quieted. Both are NaN; only the payload differs.
// max/min and every divided (avg) step widen to float on the GPU too:
// __hmax2 returns the non-NaN operand and orders -0 below +0, which is not
// our semantics, and avg must divide the float sum, not a rounded half sum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "reduce/element_math.h"
#include "tidal/tidal.h"

namespace tidal::gpu {

using elementwise::combine;
using elementwise::divide;
using elementwise::Element;

// One element: (a op b) [/ divisor].
template <tidalDataType_t kType, tidalRedOp_t kOp, bool kDivide>
struct ElementFunctor {
  using E = Element<kType>;
  using Storage = typename E::Storage;
  TIDAL_HOST_DEVICE Storage operator()(Storage a, Storage b, int divisor) const {
    auto value = combine<kOp>(E::load(a), E::load(b));
    if constexpr (kDivide) value = divide(value, divisor);
    return E::store(value);
  }
};

// Whether pairFunctor uses native 16-bit pair arithmetic for (type, op).
template <tidalDataType_t kType, tidalRedOp_t kOp>
inline constexpr bool kNativePair = (kType == tidalFloat16 || kType == tidalBfloat16) &&
                                    (kOp == tidalSum || kOp == tidalProd);

// Two adjacent 16-bit elements packed in a 32-bit word (low half first, as
// they lie in memory), combined without a divisor. On the device, sum and
// prod are one __hadd2 / __hmul2; everything else, and the host, combines the
// two halves one by one with ElementFunctor.
template <tidalDataType_t kType, tidalRedOp_t kOp>
struct PairFunctor {
  static_assert(sizeof(typename Element<kType>::Storage) == 2);
  TIDAL_HOST_DEVICE uint32_t operator()(uint32_t a, uint32_t b) const {
#if defined(__CUDA_ARCH__)
    if constexpr (kType == tidalFloat16 && kNativePair<kType, kOp>) {
      const __half2 x = *reinterpret_cast<const __half2*>(&a);
      const __half2 y = *reinterpret_cast<const __half2*>(&b);
      const __half2 r = kOp == tidalSum ? __hadd2(x, y) : __hmul2(x, y);
      return *reinterpret_cast<const uint32_t*>(&r);
    } else if constexpr (kType == tidalBfloat16 && kNativePair<kType, kOp>) {
      const __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162*>(&a);
      const __nv_bfloat162 y = *reinterpret_cast<const __nv_bfloat162*>(&b);
      const __nv_bfloat162 r = kOp == tidalSum ? __hadd2(x, y) : __hmul2(x, y);
      return *reinterpret_cast<const uint32_t*>(&r);
    }
#endif
    const ElementFunctor<kType, kOp, false> one;
    const uint32_t lo = one(static_cast<uint16_t>(a), static_cast<uint16_t>(b), 0);
    const uint32_t hi = one(static_cast<uint16_t>(a >> 16), static_cast<uint16_t>(b >> 16), 0);
    return lo | (hi << 16);
  }
};

}  // namespace tidal::gpu
