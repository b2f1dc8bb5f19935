// Inputs for which every reduction is exact, and the expected results
// computed independently of the library.
//
// Rank r's element i is a small integer (0..4, or -2..2 for signed types and
// min/max; 1 or 2 for prod), so sums of up to 8 ranks stay below 64 and
// products at most 2^8: exactly representable in every type, bfloat16
// included, whatever the order of reduction. Integer prod may wrap (int8 at
// 2^7): the reference wraps the same way, through unsigned arithmetic.
//
// FP8 holds fewer integers exactly (E4M3 every integer up to 16, E5M2 up to
// 8), so its sum/avg inputs are 0..2 (E4M3) or 0..1 (E5M2) on ranks 0..7 and
// 0 on higher ranks: every partial sum stays at most 16 (resp. 8), exact in
// any order for any rank count. Products (powers of two up to 2^3 for 8
// ranks) and max/min (-2..2) are exact in both.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp8.h"
#include "core/half.h"
#include "tidal/tidal.h"

namespace tidal::test {

inline size_t sizeOf(tidalDataType_t t) {
  switch (t) {
    case tidalInt8:
    case tidalUint8:
    case tidalFloat8e4m3:
    case tidalFloat8e5m2:
      return 1;
    case tidalFloat16:
    case tidalBfloat16:
      return 2;
    case tidalInt32:
    case tidalUint32:
    case tidalFloat32:
      return 4;
    default:
      return 8;
  }
}

inline bool isSigned(tidalDataType_t t) {
  return t == tidalInt8 || t == tidalInt32 || t == tidalInt64 || t >= tidalFloat16;
}

// Rank r's input element at global index i for op.
inline int64_t inputValue(int rank, size_t i, tidalRedOp_t op, tidalDataType_t t) {
  const auto k = static_cast<int64_t>((static_cast<size_t>(rank) * 3 + i * 7) % 5);
  if (op == tidalProd) return 1 + (((static_cast<size_t>(rank) + i) % 3) == 0 ? 1 : 0);
  if ((op == tidalMin || op == tidalMax) && isSigned(t)) return k - 2;
  if (t == tidalFloat8e4m3) return rank < 8 ? k % 3 : 0;
  if (t == tidalFloat8e5m2) return rank < 8 ? k % 2 : 0;
  return k;
}

// Writes integer value v as element i of a buffer of type t.
inline void storeValue(void* buf, size_t i, tidalDataType_t t, int64_t v) {
  char* p = static_cast<char*>(buf) + i * sizeOf(t);
  switch (t) {
    case tidalInt8: {
      auto x = static_cast<int8_t>(static_cast<uint8_t>(v));
      std::memcpy(p, &x, 1);
      break;
    }
    case tidalUint8: {
      auto x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case tidalInt32: {
      auto x = static_cast<int32_t>(static_cast<uint32_t>(v));
      std::memcpy(p, &x, 4);
      break;
    }
    case tidalUint32: {
      auto x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case tidalInt64:
    case tidalUint64:
      std::memcpy(p, &v, 8);
      break;
    case tidalFloat16: {
      uint16_t x = floatToHalfBits(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case tidalBfloat16: {
      uint16_t x = floatToBf16Bits(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case tidalFloat8e4m3:
      *reinterpret_cast<uint8_t*>(p) = floatToFp8e4m3Bits(static_cast<float>(v));
      break;
    case tidalFloat8e5m2:
      *reinterpret_cast<uint8_t*>(p) = floatToFp8e5m2Bits(static_cast<float>(v));
      break;
    case tidalFloat32: {
      auto x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case tidalFloat64: {
      auto x = static_cast<double>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    default:
      break;
  }
}

// Wrapping arithmetic in the type's width, as the library promises.
inline int64_t wrapTo(tidalDataType_t t, int64_t v) {
  switch (t) {
    case tidalInt8:
      return static_cast<int8_t>(static_cast<uint8_t>(v));
    case tidalUint8:
      return static_cast<uint8_t>(v);
    case tidalInt32:
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    case tidalUint32:
      return static_cast<uint32_t>(v);
    default:
      return v;
  }
}

// Writes the expected reduction over ranks 0..n-1 of element i into `out`
// (one element of type t).
inline void storeExpected(void* out, size_t i, tidalDataType_t t, tidalRedOp_t op, int n) {
  int64_t acc = inputValue(0, i, op, t);
  for (int r = 1; r < n; ++r) {
    const int64_t v = inputValue(r, i, op, t);
    switch (op) {
      case tidalSum:
      case tidalAvg:
        acc += v;
        break;
      case tidalProd:
        acc = wrapTo(t, acc * v);
        break;
      case tidalMax:
        acc = std::max(acc, v);
        break;
      case tidalMin:
        acc = std::min(acc, v);
        break;
      default:
        break;
    }
  }
  if (op != tidalAvg) {
    storeValue(out, 0, t, wrapTo(t, acc));
    return;
  }
  // avg: integers truncate; floats divide once in their own precision
  // (float16/bfloat16/fp8 in float32, then rounded once).
  switch (t) {
    case tidalFloat16: {
      uint16_t x = floatToHalfBits(static_cast<float>(acc) / static_cast<float>(n));
      std::memcpy(out, &x, 2);
      break;
    }
    case tidalBfloat16: {
      uint16_t x = floatToBf16Bits(static_cast<float>(acc) / static_cast<float>(n));
      std::memcpy(out, &x, 2);
      break;
    }
    case tidalFloat8e4m3:
      *static_cast<uint8_t*>(out) =
          floatToFp8e4m3Bits(static_cast<float>(acc) / static_cast<float>(n));
      break;
    case tidalFloat8e5m2:
      *static_cast<uint8_t*>(out) =
          floatToFp8e5m2Bits(static_cast<float>(acc) / static_cast<float>(n));
      break;
    case tidalFloat32: {
      float x = static_cast<float>(acc) / static_cast<float>(n);
      std::memcpy(out, &x, 4);
      break;
    }
    case tidalFloat64: {
      double x = static_cast<double>(acc) / static_cast<double>(n);
      std::memcpy(out, &x, 8);
      break;
    }
    default:
      storeValue(out, 0, t, acc / n);
      break;
  }
}

}  // namespace tidal::test
