// One element of every (type, op): the definition both CPU kernel families
// share (its arithmetic, element_math.h, is the CUDA kernels' too).
//
// The scalar family is these functions in a loop; the AVX2 family uses them
// for tails and for the cases it does not vectorise (integer division). Since
// the SIMD code must produce the same bits, this file is also the reference
// for what each vector instruction sequence has to reproduce:
//  - integers wrap: arithmetic happens in the unsigned type of the same width;
//  - float16/bfloat16 widen exactly to float, compute in float, round once;
//  - float8 e4m3/e5m2 likewise, the rounding saturating to max finite;
//  - max is (a > b ? a : b) and min (a < b ? a : b), which is what vmaxps /
//    vminps compute for ordered inputs (including which zero wins for +0/-0);
//    an unordered pair returns a + b, i.e. a quiet NaN;
//  - division is a true IEEE division by (T)divisor, never a reciprocal
//    multiply, and truncating for integers.
//
// Everything here is a baseline-ISA inline template: the AVX2 translation unit
// includes it too, and the copies the linker may pick must run on any x86-64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "reduce/element_math.h"
#include "tidal/tidal.h"

namespace tidal::cpu {

// Element<type> (storage, math type, load/store), combine<op> and divide
// are element_math.h's, the same definitions the CUDA kernels run.
using elementwise::combine;
using elementwise::divide;
using elementwise::Element;

// Calls f(std::integral_constant<tidalDataType_t, type>{}); type must be valid.
template <typename F>
decltype(auto) visitType(tidalDataType_t type, F&& f) {
  using T = tidalDataType_t;
  switch (type) {
    case tidalInt8:
      return f(std::integral_constant<T, tidalInt8>{});
    case tidalUint8:
      return f(std::integral_constant<T, tidalUint8>{});
    case tidalInt32:
      return f(std::integral_constant<T, tidalInt32>{});
    case tidalUint32:
      return f(std::integral_constant<T, tidalUint32>{});
    case tidalInt64:
      return f(std::integral_constant<T, tidalInt64>{});
    case tidalUint64:
      return f(std::integral_constant<T, tidalUint64>{});
    case tidalFloat16:
      return f(std::integral_constant<T, tidalFloat16>{});
    case tidalFloat32:
      return f(std::integral_constant<T, tidalFloat32>{});
    case tidalFloat64:
      return f(std::integral_constant<T, tidalFloat64>{});
    case tidalFloat8e4m3:
      return f(std::integral_constant<T, tidalFloat8e4m3>{});
    case tidalFloat8e5m2:
      return f(std::integral_constant<T, tidalFloat8e5m2>{});
    default:
      return f(std::integral_constant<T, tidalBfloat16>{});
  }
}

// Calls f(std::integral_constant<tidalRedOp_t, op>{}); avg is folded into sum
// because the division is driven by the divisor alone.
template <typename F>
decltype(auto) visitOp(tidalRedOp_t op, F&& f) {
  using O = tidalRedOp_t;
  switch (op) {
    case tidalProd:
      return f(std::integral_constant<O, tidalProd>{});
    case tidalMax:
      return f(std::integral_constant<O, tidalMax>{});
    case tidalMin:
      return f(std::integral_constant<O, tidalMin>{});
    default:
      return f(std::integral_constant<O, tidalSum>{});
  }
}

// dst[i] = (a[i] op b[i]) [/ divisor] for i in [0, count).
template <tidalDataType_t kType, tidalRedOp_t kOp, bool kDivide>
inline void reduceElements(typename Element<kType>::Storage* dst,
                           const typename Element<kType>::Storage* a,
                           const typename Element<kType>::Storage* b, size_t count, int divisor) {
  using E = Element<kType>;
  for (size_t i = 0; i < count; ++i) {
    auto value = combine<kOp>(E::load(a[i]), E::load(b[i]));
    if constexpr (kDivide) value = divide(value, divisor);
    dst[i] = E::store(value);
  }
}

// dst[i] = src[i] / divisor for i in [0, count), divisor != 0.
template <tidalDataType_t kType>
inline void divideElements(typename Element<kType>::Storage* dst,
                           const typename Element<kType>::Storage* src, size_t count, int divisor) {
  using E = Element<kType>;
  for (size_t i = 0; i < count; ++i) dst[i] = E::store(divide(E::load(src[i]), divisor));
}

}  // namespace tidal::cpu
