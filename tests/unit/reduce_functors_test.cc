// The CUDA kernels' per-element arithmetic (reduce/cuda/reduce_functors.h),
// compiled for the host: it must give the bits of the CPU kernels for every
// type, op and divisor. And the claim that lets the GPU use native half2 /
// bfloat162 sum and product: rounding the float32 result of one such
// operation to 16 bits gives the correctly rounded 16-bit result. That is
// checked here against an exact reference (double holds every sum and
// product of two 16-bit floats exactly), over random pairs and the edges.
#include "reduce/cuda/reduce_functors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "reduce/cpu/element_ops.h"
#include "reduce/cpu/kernels.h"

namespace tidal {
namespace {

const tidalDataType_t kTypes[] = {tidalInt8,    tidalUint8,    tidalInt32,      tidalUint32,
                                  tidalInt64,   tidalUint64,   tidalFloat16,    tidalFloat32,
                                  tidalFloat64, tidalBfloat16, tidalFloat8e4m3, tidalFloat8e5m2};
const tidalRedOp_t kOps[] = {tidalSum, tidalProd, tidalMax, tidalMin, tidalAvg};
const int kDivisors[] = {0, 1, 3, 8, -1, -7};

// Random bit patterns, with the values that break arithmetic mixed in.
std::vector<uint8_t> randomElements(tidalDataType_t type, size_t count, std::mt19937_64& rng) {
  const size_t ts = typeSize(type);
  std::vector<uint8_t> bytes(count * ts);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  auto put = [&](size_t i, auto value) { std::memcpy(&bytes[i * ts], &value, ts); };
  const size_t n = count;
  switch (type) {
    case tidalFloat32: {
      const float special[] = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max()};
      for (size_t i = 0; i < n && i < std::size(special) * 2; ++i) put(i, special[i % 10]);
      break;
    }
    case tidalFloat64: {
      const double special[] = {0.0,
                                -0.0,
                                1.0,
                                std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::max()};
      for (size_t i = 0; i < n && i < std::size(special) * 2; ++i) put(i, special[i % 7]);
      break;
    }
    case tidalFloat16:
    case tidalBfloat16: {
      const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x7c00, 0xfc00, 0x7bff,
                                  0x7f80, 0xff80, 0x7f7f, 0x3c00, 0x7e00, 0x3f80};
      for (size_t i = 0; i < n && i < std::size(special) * 2; ++i) put(i, special[i % 13]);
      break;
    }
    case tidalFloat8e4m3:
    case tidalFloat8e5m2: {
      // zeros, subnormals, max finite, NaNs, E5M2's infinities, 1.0 in each.
      const uint8_t special[] = {0x00, 0x80, 0x01, 0x81, 0x7e, 0xfe, 0x7f, 0xff,
                                 0x7b, 0xfb, 0x7c, 0xfc, 0x38, 0x3c, 0x07, 0x03};
      for (size_t i = 0; i < n && i < std::size(special) * 2; ++i) put(i, special[i % 16]);
      break;
    }
    case tidalInt8:
      put(0, int8_t{-128});
      put(1, int8_t{127});
      break;
    case tidalInt32:
      put(0, std::numeric_limits<int32_t>::min());
      put(1, int32_t{-1});
      break;
    case tidalInt64:
      put(0, std::numeric_limits<int64_t>::min());
      put(1, int64_t{-1});
      break;
    default:
      break;
  }
  return bytes;
}

// The functors over a buffer, as the kernel's element-by-element path uses them.
void functorReduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                   tidalRedOp_t op, int divisor) {
  cpu::visitType(type, [&](auto typeTag) {
    constexpr tidalDataType_t kType = decltype(typeTag)::value;
    using S = typename gpu::Element<kType>::Storage;
    cpu::visitOp(op, [&](auto opTag) {
      constexpr tidalRedOp_t kOp = decltype(opTag)::value;
      auto run = [&](auto functor) {
        for (size_t i = 0; i < count; ++i) {
          static_cast<S*>(dst)[i] =
              functor(static_cast<const S*>(a)[i], static_cast<const S*>(b)[i], divisor);
        }
      };
      if (divisor == 0) {
        run(gpu::ElementFunctor<kType, kOp, false>{});
      } else {
        run(gpu::ElementFunctor<kType, kOp, true>{});
      }
    });
  });
}

// Whether the element at p is a NaN (never for integer types).
bool isNan(tidalDataType_t type, const uint8_t* p) {
  return cpu::visitType(type, [&](auto typeTag) {
    using E = gpu::Element<decltype(typeTag)::value>;
    typename E::Storage bits;
    std::memcpy(&bits, p, sizeof bits);
    const auto value = E::load(bits);
    return value != value;
  });
}

TEST(ReduceFunctors, MatchTheCpuKernelsBitForBit) {
  std::mt19937_64 rng(42);
  constexpr size_t kCount = 4099;
  for (tidalDataType_t type : kTypes) {
    const auto a = randomElements(type, kCount, rng);
    const auto b = randomElements(type, kCount, rng);
    for (tidalRedOp_t op : kOps) {
      for (int divisor : kDivisors) {
        std::vector<uint8_t> want(a.size()), got(a.size());
        cpu::reduceScalar(want.data(), a.data(), b.data(), kCount, type, op, divisor);
        functorReduce(got.data(), a.data(), b.data(), kCount, type, op, divisor);
        const size_t ts = typeSize(type);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < kCount; ++i) {
          // Which operand's NaN an addition returns is the compiler's choice
          // (it may commute a + b), so two NaNs match whatever their payloads.
          const bool same = std::memcmp(&want[i * ts], &got[i * ts], ts) == 0 ||
                            (isNan(type, &want[i * ts]) && isNan(type, &got[i * ts]));
          if (!same && wrong++ == 0) first = i;
        }
        EXPECT_EQ(wrong, 0u) << typeName(type) << " " << opName(op) << " divisor " << divisor
                             << ": first at " << first;
      }
    }
  }
}

TEST(ReduceFunctors, InPlaceGivesTheSameBits) {
  std::mt19937_64 rng(7);
  for (tidalDataType_t type : kTypes) {
    auto a = randomElements(type, 257, rng);
    const auto b = randomElements(type, 257, rng);
    std::vector<uint8_t> want(a.size());
    cpu::reduceScalar(want.data(), a.data(), b.data(), 257, type, tidalSum, 0);
    functorReduce(a.data(), a.data(), b.data(), 257, type, tidalSum, 0);
    EXPECT_EQ(a, want) << typeName(type);
  }
}

template <tidalDataType_t kType>
bool isNanBits(uint16_t bits) {
  const float v = gpu::Element<kType>::load(bits);
  return v != v;
}
template <tidalDataType_t kType>
bool bothNan(uint16_t a, uint16_t b) {
  return isNanBits<kType>(a) && isNanBits<kType>(b);
}

template <tidalDataType_t kType, tidalRedOp_t kOp>
void checkPair(std::mt19937_64& rng) {
  const gpu::PairFunctor<kType, kOp> pair;
  const gpu::ElementFunctor<kType, kOp, false> one;
  for (int i = 0; i < 200000; ++i) {
    const auto a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng());
    const uint32_t want =
        one(static_cast<uint16_t>(a), static_cast<uint16_t>(b), 0) |
        (uint32_t{one(static_cast<uint16_t>(a >> 16), static_cast<uint16_t>(b >> 16), 0)} << 16);
    const uint32_t got = pair(a, b);
    for (int lane = 0; lane < 2; ++lane) {
      const auto g = static_cast<uint16_t>(got >> (16 * lane));
      const auto w = static_cast<uint16_t>(want >> (16 * lane));
      const auto x = static_cast<uint16_t>(a >> (16 * lane));
      const auto y = static_cast<uint16_t>(b >> (16 * lane));
      // reduce.h: when both inputs are NaN only the NaN's payload may differ
      // (the compiler may evaluate a + b as b + a).
      if (bothNan<kType>(x, y)) {
        ASSERT_TRUE(isNanBits<kType>(g)) << std::hex << x << " " << y;
      } else {
        ASSERT_EQ(g, w) << std::hex << "lane " << lane << ": " << x << " " << y;
      }
    }
  }
}

TEST(ReduceFunctors, PairFunctorIsTwoElements) {
  std::mt19937_64 rng(3);
  checkPair<tidalFloat16, tidalSum>(rng);
  checkPair<tidalFloat16, tidalProd>(rng);
  checkPair<tidalFloat16, tidalMax>(rng);
  checkPair<tidalFloat16, tidalMin>(rng);
  checkPair<tidalBfloat16, tidalSum>(rng);
  checkPair<tidalBfloat16, tidalProd>(rng);
  checkPair<tidalBfloat16, tidalMax>(rng);
  checkPair<tidalBfloat16, tidalMin>(rng);
  static_assert(gpu::kNativePair<tidalFloat16, tidalSum> &&
                gpu::kNativePair<tidalBfloat16, tidalProd>);
  static_assert(!gpu::kNativePair<tidalFloat16, tidalMax> &&
                !gpu::kNativePair<tidalFloat32, tidalSum>);
}

// ---------------------------------------------------------------------------
// The double-rounding argument behind native half2 / bfloat162 arithmetic.

struct Format {
  int mantissaBits;  // stored bits (10 for half, 7 for bfloat16)
  int exponentBits;  // 5, 8
  double (*toDouble)(uint16_t);
};

double halfToDouble(uint16_t h) { return halfBitsToFloat(h); }
double bf16ToDouble(uint16_t h) { return bf16BitsToFloat(h); }
const Format kHalf{10, 5, halfToDouble};
const Format kBf16{7, 8, bf16ToDouble};

bool isNan(const Format& f, uint16_t bits) {
  const uint16_t expMask = static_cast<uint16_t>(((1u << f.exponentBits) - 1) << f.mantissaBits);
  return (bits & expMask) == expMask && (bits & ((1u << f.mantissaBits) - 1)) != 0;
}

// x rounded to the format, to nearest, ties to even, computed exactly: the
// candidates are the representable neighbours of x, compared in double
// (exact here: x and every candidate have few significant bits).
uint16_t roundExactly(const Format& f, double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double m = std::fabs(x);
  const uint16_t infBits =
      static_cast<uint16_t>(((1u << f.exponentBits) - 1) << f.mantissaBits);  // +Inf
  if (std::isinf(m)) return sign | infBits;
  // Positive finite patterns are ordered like their values: binary search the
  // largest pattern <= m among 0 .. infBits (Inf stands for "overflow").
  uint16_t lo = 0, hi = infBits;
  while (lo < hi) {
    const auto mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (f.toDouble(mid) <= m) {
      lo = mid;
    } else {
      hi = static_cast<uint16_t>(mid - 1);
    }
  }
  if (lo == infBits) return sign | infBits;
  const double below = f.toDouble(lo);
  if (below == m) return sign | lo;
  // The next value up; past the largest finite one, the "next" is the value
  // an exponent step further (2^(emax+1)), where rounding to it means Inf.
  const auto up = static_cast<uint16_t>(lo + 1);
  const double above =
      up == infBits ? below + (below - f.toDouble(static_cast<uint16_t>(lo - 1))) : f.toDouble(up);
  const double dBelow = m - below, dAbove = above - m;
  uint16_t chosen = lo;
  if (dAbove < dBelow || (dAbove == dBelow && (lo & 1u))) chosen = up;
  return sign | chosen;
}

template <tidalDataType_t kType, tidalRedOp_t kOp>
void checkCorrectlyRounded(const Format& f, uint16_t a, uint16_t b) {
  if (isNan(f, a) || isNan(f, b)) return;  // NaN payloads are not the claim
  const double x = f.toDouble(a), y = f.toDouble(b);
  if constexpr (kOp == tidalSum) {
    if (std::isinf(x) && std::isinf(y) && x != y) return;  // Inf - Inf: NaN either way
  } else {
    if ((std::isinf(x) && y == 0) || (std::isinf(y) && x == 0)) return;
  }
  const double exact = kOp == tidalSum ? x + y : x * y;
  uint16_t want = roundExactly(f, exact);
  if (exact == 0) {
    // Sign of an exact zero: IEEE sum gives +0 unless both are -0.
    want = std::signbit(exact) ? 0x8000 : 0;
  }
  const uint16_t got = gpu::ElementFunctor<kType, kOp, false>{}(a, b, 0);
  ASSERT_EQ(got, want) << std::hex << "a=" << a << " b=" << b << " exact=" << exact;
}

// Random pairs, then every pattern against partners that stress
// subnormals, ties and overflow.
template <tidalDataType_t kType>
void checkFormat(const Format& f, uint64_t seed, std::initializer_list<uint16_t> partners) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1000000; ++i) {
    const auto a = static_cast<uint16_t>(rng()), b = static_cast<uint16_t>(rng());
    checkCorrectlyRounded<kType, tidalSum>(f, a, b);
    checkCorrectlyRounded<kType, tidalProd>(f, a, b);
  }
  for (uint32_t a = 0; a < 0x10000; ++a) {
    for (uint16_t b : partners) {
      checkCorrectlyRounded<kType, tidalSum>(f, static_cast<uint16_t>(a), b);
      checkCorrectlyRounded<kType, tidalProd>(f, static_cast<uint16_t>(a), b);
    }
  }
}

TEST(ReduceFunctors, FloatThenRoundIsCorrectlyRoundedHalfArithmetic) {
  checkFormat<tidalFloat16>(
      kHalf, 11, {0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x3c01, 0x7bff, 0xfbff, 0x1400});
}

TEST(ReduceFunctors, FloatThenRoundIsCorrectlyRoundedBfloat16Arithmetic) {
  checkFormat<tidalBfloat16>(
      kBf16, 13, {0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0x3f81, 0x7f7f, 0xff7f, 0x0100});
}

// The reference rounding itself, on values whose rounding is known.
TEST(ReduceFunctors, ExactReferenceRoundsLikeTheHardwareWould) {
  EXPECT_EQ(roundExactly(kHalf, 1.0), 0x3c00);
  EXPECT_EQ(roundExactly(kHalf, 1.0 + std::ldexp(1.0, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(roundExactly(kHalf, 1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);  // tie -> even
  EXPECT_EQ(roundExactly(kHalf, 65504.0), 0x7bff);
  EXPECT_EQ(roundExactly(kHalf, 65519.0), 0x7bff);
  EXPECT_EQ(roundExactly(kHalf, 65520.0), 0x7c00);               // the tie goes to Inf (even)
  EXPECT_EQ(roundExactly(kHalf, std::ldexp(1.0, -25)), 0x0000);  // tie with 0 -> 0
  EXPECT_EQ(roundExactly(kHalf, std::ldexp(1.5, -25)), 0x0001);
  EXPECT_EQ(roundExactly(kBf16, 1.0 + std::ldexp(1.0, -8)), 0x3f80);
  EXPECT_EQ(roundExactly(kBf16, -(1.0 + 3 * std::ldexp(1.0, -8))), 0xbf82);
}

}  // namespace
}  // namespace tidal
