// tidal::reduce / divideBy and each CPU kernel family, against a reference
// written here: wide-integer arithmetic for integers, double arithmetic
// rounded to the element's precision for floating types.
#include "reduce/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/fp8.h"
#include "core/half.h"
#include "reduce/cpu/kernels.h"

namespace tidal {
namespace {

// ---------------------------------------------------------------------------
// Kernel families under test.

using ReduceFn = void (*)(void*, const void*, const void*, size_t, tidalDataType_t, tidalRedOp_t,
                          int);
using DivideFn = void (*)(void*, const void*, size_t, tidalDataType_t, int);

struct Family {
  const char* name;
  ReduceFn reduce;
  DivideFn divide;
  bool needsAvx2;
};

void PrintTo(const Family& family, std::ostream* os) { *os << family.name; }

void dispatchedReduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                      tidalRedOp_t op, int divisor) {
  reduce(dst, a, b, count, type, op, divisor);
}

const Family kFamilies[] = {
    {"scalar", cpu::reduceScalar, cpu::divideScalar, false},
    {"avx2", cpu::reduceAvx2, cpu::divideAvx2, true},
    {"dispatch", dispatchedReduce, divideBy, false},
};

const tidalDataType_t kTypes[] = {tidalInt8,    tidalUint8,    tidalInt32,      tidalUint32,
                                  tidalInt64,   tidalUint64,   tidalFloat16,    tidalFloat32,
                                  tidalFloat64, tidalBfloat16, tidalFloat8e4m3, tidalFloat8e5m2};
const tidalRedOp_t kOps[] = {tidalSum, tidalProd, tidalMax, tidalMin, tidalAvg};
const size_t kCounts[] = {0, 1, 7, 31, 33, 1000, 4099};

void skipWithoutAvx2(const Family& family) {
  if (family.needsAvx2 && !cpu::avx2Supported()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
}

// ---------------------------------------------------------------------------
// Element types as the test sees them.

enum class Kind { kInt, kFloat, kHalf, kBf16, kE4m3, kE5m2 };

template <typename S, Kind K>
struct Desc {
  using Storage = S;
  static constexpr Kind kKind = K;
};

template <typename F>
void withType(tidalDataType_t type, F&& f) {
  switch (type) {
    case tidalInt8:
      return f(Desc<int8_t, Kind::kInt>{});
    case tidalUint8:
      return f(Desc<uint8_t, Kind::kInt>{});
    case tidalInt32:
      return f(Desc<int32_t, Kind::kInt>{});
    case tidalUint32:
      return f(Desc<uint32_t, Kind::kInt>{});
    case tidalInt64:
      return f(Desc<int64_t, Kind::kInt>{});
    case tidalUint64:
      return f(Desc<uint64_t, Kind::kInt>{});
    case tidalFloat16:
      return f(Desc<uint16_t, Kind::kHalf>{});
    case tidalFloat32:
      return f(Desc<float, Kind::kFloat>{});
    case tidalFloat64:
      return f(Desc<double, Kind::kFloat>{});
    case tidalBfloat16:
      return f(Desc<uint16_t, Kind::kBf16>{});
    case tidalFloat8e4m3:
      return f(Desc<uint8_t, Kind::kE4m3>{});
    case tidalFloat8e5m2:
      return f(Desc<uint8_t, Kind::kE5m2>{});
    default:
      FAIL() << "unknown type " << int(type);
  }
}

template <class D>
uint64_t bitsOf(typename D::Storage s) {
  uint64_t bits = 0;
  std::memcpy(&bits, &s, sizeof(s));
  return bits;
}

template <class D>
double toDouble(typename D::Storage s) {
  if constexpr (D::kKind == Kind::kHalf) return halfBitsToFloat(s);
  if constexpr (D::kKind == Kind::kBf16) return bf16BitsToFloat(s);
  if constexpr (D::kKind == Kind::kE4m3) return fp8e4m3BitsToFloat(s);
  if constexpr (D::kKind == Kind::kE5m2) return fp8e5m2BitsToFloat(s);
  return static_cast<double>(s);
}

// x rounded once to the precision the type computes in (float for float32,
// float16, bfloat16 and fp8; double for float64).
template <class D>
double roundToMath(double x) {
  if constexpr (std::is_same_v<typename D::Storage, double>) return x;
  return static_cast<float>(x);
}

template <class D>
typename D::Storage fromMath(double x) {
  if constexpr (D::kKind == Kind::kHalf) return floatToHalfBits(static_cast<float>(x));
  if constexpr (D::kKind == Kind::kBf16) return floatToBf16Bits(static_cast<float>(x));
  if constexpr (D::kKind == Kind::kE4m3) return floatToFp8e4m3Bits(static_cast<float>(x));
  if constexpr (D::kKind == Kind::kE5m2) return floatToFp8e5m2Bits(static_cast<float>(x));
  return static_cast<typename D::Storage>(x);
}

template <class D>
bool isQuietNan(typename D::Storage s) {
  const uint64_t bits = bitsOf<D>(s);
  if constexpr (D::kKind == Kind::kHalf) return (bits & 0x7e00) == 0x7e00;
  if constexpr (D::kKind == Kind::kBf16) return (bits & 0x7fc0) == 0x7fc0;
  if constexpr (D::kKind == Kind::kE4m3) return (bits & 0x7f) == 0x7f;
  if constexpr (D::kKind == Kind::kE5m2) return (bits & 0x7e) == 0x7e;
  if constexpr (sizeof(s) == 4) return (bits & 0x7fc00000u) == 0x7fc00000u;
  return (bits & 0x7ff8000000000000ull) == 0x7ff8000000000000ull;
}

// ---------------------------------------------------------------------------
// The reference.

template <class D>
typename D::Storage referenceElement(typename D::Storage a, typename D::Storage b, tidalRedOp_t op,
                                     int divisor) {
  using S = typename D::Storage;
  if constexpr (D::kKind == Kind::kInt) {
    // Exact in 128 bits, then wrapped by the conversion back to S.
    __extension__ using Wide = std::conditional_t<std::is_signed_v<S>, __int128, unsigned __int128>;
    const Wide x = a;
    const Wide y = b;
    Wide r = 0;
    switch (op) {
      case tidalProd:
        r = x * y;
        break;
      case tidalMax:
        r = x > y ? x : y;
        break;
      case tidalMin:
        r = x < y ? x : y;
        break;
      default:
        r = x + y;
        break;
    }
    if (divisor != 0) r = Wide{static_cast<S>(r)} / static_cast<Wide>(divisor);
    return static_cast<S>(r);
  } else {
    const double x = toDouble<D>(a);
    const double y = toDouble<D>(b);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    double r = 0;
    switch (op) {
      case tidalProd:
        r = x * y;
        break;
      case tidalMax:
        r = std::isnan(x) || std::isnan(y) ? nan : std::max(x, y);
        break;
      case tidalMin:
        r = std::isnan(x) || std::isnan(y) ? nan : std::min(x, y);
        break;
      default:
        r = x + y;
        break;
    }
    // Double rounding through double is harmless here: double has more than
    // twice the precision (+2) of float, which has more than twice that of
    // half and bfloat16, so each result equals the correctly rounded one.
    r = roundToMath<D>(r);
    if (divisor != 0) r = roundToMath<D>(r / divisor);
    return fromMath<D>(r);
  }
}

// Whether `actual` is an acceptable result where the reference gave
// `expected`: identical bits, except that any quiet NaN matches a NaN, and
// min/max of +0 and -0 may return either zero.
template <class D>
bool matchesReference(typename D::Storage expected, typename D::Storage actual, tidalRedOp_t op) {
  if constexpr (D::kKind != Kind::kInt) {
    const double e = toDouble<D>(expected);
    if (std::isnan(e)) return isQuietNan<D>(actual);
    if ((op == tidalMax || op == tidalMin) && e == 0) return toDouble<D>(actual) == 0;
  }
  return bitsOf<D>(expected) == bitsOf<D>(actual);
}

// Between two kernel families: identical bits; only NaN payloads may differ.
template <class D>
bool sameBits(typename D::Storage x, typename D::Storage y) {
  if constexpr (D::kKind != Kind::kInt) {
    if (std::isnan(toDouble<D>(x)) && std::isnan(toDouble<D>(y))) return true;
  }
  return bitsOf<D>(x) == bitsOf<D>(y);
}

// ---------------------------------------------------------------------------
// Inputs.

template <class D>
typename D::Storage randomValue(std::mt19937_64& rng) {
  using S = typename D::Storage;
  const uint64_t r = rng();
  if constexpr (D::kKind == Kind::kInt || D::kKind == Kind::kE4m3 || D::kKind == Kind::kE5m2) {
    return static_cast<S>(r);  // fp8: every pattern equally (NaN, Inf, subnormals, max)
  } else if constexpr (D::kKind == Kind::kHalf || D::kKind == Kind::kBf16) {
    if (r % 8 == 0) return static_cast<S>(r >> 8);  // any pattern: NaN, Inf, subnormal
    // Otherwise moderate magnitudes, where sums need rounding and hit ties.
    const bool half = D::kKind == Kind::kHalf;
    const uint64_t exponent = (half ? 8 : 120) + (r >> 8) % 14;
    const uint64_t mantissa = (r >> 16) & (half ? 0x3ff : 0x7f);
    return static_cast<S>(((r >> 32) & 1) << 15 | exponent << (half ? 10 : 7) | mantissa);
  } else {
    using Bits = std::conditional_t<sizeof(S) == 4, uint32_t, uint64_t>;
    if (r % 8 == 0) return std::bit_cast<S>(static_cast<Bits>(rng()));
    return static_cast<S>(std::ldexp(static_cast<double>(r >> 11) / 9007199254740992.0 - 0.5,
                                     static_cast<int>(r % 40) - 20));
  }
}

template <class D>
std::vector<typename D::Storage> randomVector(size_t count, std::mt19937_64& rng) {
  std::vector<typename D::Storage> values(count);
  for (auto& v : values) v = randomValue<D>(rng);
  return values;
}

// ---------------------------------------------------------------------------
// One reduce call against the reference, with guard elements around dst.

enum class Alias { kNone, kDstIsA, kDstIsB, kAllSame };

struct Placement {
  size_t dstOffset, aOffset, bOffset;  // in elements, to break vector alignment
  Alias alias;
};

constexpr size_t kGuard = 16;

template <class D>
void checkReduce(const Family& family, tidalDataType_t type, tidalRedOp_t op, int divisor,
                 size_t count, const Placement& placement, std::mt19937_64& rng) {
  using S = typename D::Storage;
  const std::vector<S> aValues = randomVector<D>(count, rng);
  const std::vector<S> bValues =
      placement.alias == Alias::kAllSame ? aValues : randomVector<D>(count, rng);

  std::vector<S> dstBuf = randomVector<D>(count + 2 * kGuard + 8, rng);
  std::vector<S> aBuf(count + 2 * kGuard + 8);
  std::vector<S> bBuf(count + 2 * kGuard + 8);
  S* dst = dstBuf.data() + kGuard + placement.dstOffset;
  S* a = aBuf.data() + kGuard + placement.aOffset;
  S* b = bBuf.data() + kGuard + placement.bOffset;
  if (placement.alias == Alias::kDstIsA || placement.alias == Alias::kAllSame) a = dst;
  if (placement.alias == Alias::kDstIsB || placement.alias == Alias::kAllSame) b = dst;
  std::copy(aValues.begin(), aValues.end(), a);
  std::copy(bValues.begin(), bValues.end(), b);
  const std::vector<S> dstBefore = dstBuf;

  family.reduce(dst, a, b, count, type, op, divisor);

  int failures = 0;
  for (size_t i = 0; i < count && failures < 5; ++i) {
    const S expected = referenceElement<D>(aValues[i], bValues[i], op, divisor);
    if (!matchesReference<D>(expected, dst[i], op)) {
      ++failures;
      ADD_FAILURE() << "element " << i << " of " << count << ": a=0x" << std::hex
                    << bitsOf<D>(aValues[i]) << " b=0x" << bitsOf<D>(bValues[i]) << " expected 0x"
                    << bitsOf<D>(expected) << " got 0x" << bitsOf<D>(dst[i]) << std::dec
                    << " (divisor " << divisor << ", dst offset " << placement.dstOffset << ")";
    }
  }
  const size_t begin = static_cast<size_t>(dst - dstBuf.data());
  for (size_t i = 0; i < dstBuf.size(); ++i) {
    if (i >= begin && i < begin + count) continue;
    ASSERT_EQ(bitsOf<D>(dstBuf[i]), bitsOf<D>(dstBefore[i])) << "wrote outside dst at " << i;
  }
}

// ---------------------------------------------------------------------------
// Every family x type x op.

class ReduceFamilyTest
    : public ::testing::TestWithParam<std::tuple<Family, tidalDataType_t, tidalRedOp_t>> {
 protected:
  void SetUp() override { skipWithoutAvx2(family()); }
  const Family& family() const { return std::get<0>(GetParam()); }
  tidalDataType_t type() const { return std::get<1>(GetParam()); }
  tidalRedOp_t op() const { return std::get<2>(GetParam()); }
  bool acceptsNegativeDivisor() const {
    return type() == tidalInt8 || type() == tidalInt32 || type() == tidalInt64 ||
           type() == tidalFloat16 || type() == tidalFloat32 || type() == tidalFloat64 ||
           type() == tidalBfloat16 || type() == tidalFloat8e4m3 || type() == tidalFloat8e5m2;
  }
};

TEST_P(ReduceFamilyTest, MatchesReferenceForAllCountsOffsetsAndAliasing) {
  std::mt19937_64 rng(0x7ea1 + 131 * type() + op());
  const Placement placements[] = {{0, 0, 0, Alias::kNone},   {1, 3, 2, Alias::kNone},
                                  {3, 1, 0, Alias::kNone},   {1, 0, 2, Alias::kDstIsA},
                                  {2, 1, 0, Alias::kDstIsB}, {3, 0, 0, Alias::kAllSame}};
  for (const int divisor : {0, 3}) {
    for (const size_t count : kCounts) {
      for (const Placement& placement : placements) {
        SCOPED_TRACE("count " + std::to_string(count) + ", divisor " + std::to_string(divisor) +
                     ", alias " + std::to_string(static_cast<int>(placement.alias)));
        withType(type(), [&](auto desc) {
          checkReduce<decltype(desc)>(family(), type(), op(), divisor, count, placement, rng);
        });
        if (HasFatalFailure() || HasNonfatalFailure()) return;
      }
    }
  }
}

// The families must agree bit for bit, not just both be "close enough".
TEST_P(ReduceFamilyTest, BitIdenticalToScalarFamily) {
  std::mt19937_64 rng(0xb17 + 131 * type() + op());
  std::vector<int> divisors = {0, 1, 3, 7, 1000};
  if (acceptsNegativeDivisor()) divisors.push_back(-2);
  withType(type(), [&](auto desc) {
    using D = decltype(desc);
    using S = typename D::Storage;
    const size_t count = 4099;
    for (const int divisor : divisors) {
      const std::vector<S> a = randomVector<D>(count + 1, rng);
      const std::vector<S> b = randomVector<D>(count + 1, rng);
      std::vector<S> viaFamily(count + 1);
      std::vector<S> viaScalar(count + 1);
      family().reduce(viaFamily.data() + 1, a.data() + 1, b.data(), count, type(), op(), divisor);
      cpu::reduceScalar(viaScalar.data() + 1, a.data() + 1, b.data(), count, type(), op(), divisor);
      for (size_t i = 1; i <= count; ++i) {
        ASSERT_TRUE(sameBits<D>(viaFamily[i], viaScalar[i]))
            << "element " << i << " divisor " << divisor << ": 0x" << std::hex
            << bitsOf<D>(viaFamily[i]) << " vs scalar 0x" << bitsOf<D>(viaScalar[i]);
      }
    }
  });
}

std::string paramName(
    const ::testing::TestParamInfo<std::tuple<Family, tidalDataType_t, tidalRedOp_t>>& info) {
  static const char* const kTypeNames[] = {"int8",   "uint8",    "int32",  "uint32",
                                           "int64",  "uint64",   "half",   "float",
                                           "double", "bfloat16", "f8e4m3", "f8e5m2"};
  static const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg"};
  return std::string(std::get<0>(info.param).name) + "_" + kTypeNames[std::get<1>(info.param)] +
         "_" + kOpNames[std::get<2>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceFamilyTest,
                         ::testing::Combine(::testing::ValuesIn(kFamilies),
                                            ::testing::ValuesIn(kTypes), ::testing::ValuesIn(kOps)),
                         paramName);

// ---------------------------------------------------------------------------
// Hand-picked cases, per family, with expectations written as literals.

class ReduceCasesTest : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override { skipWithoutAvx2(GetParam()); }

  // Runs `a op b` over 37 copies (4-way vector body, single vectors and the
  // scalar tail all see it) and returns the results.
  template <typename S>
  std::vector<S> run(S a, S b, tidalDataType_t type, tidalRedOp_t op, int divisor = 0) {
    const std::vector<S> as(37, a);
    const std::vector<S> bs(37, b);
    std::vector<S> out(37);
    GetParam().reduce(out.data(), as.data(), bs.data(), out.size(), type, op, divisor);
    return out;
  }

  template <typename S>
  void expectAll(const std::vector<S>& values, S expected, const char* what) {
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(values[i], expected) << what << ", element " << i;
    }
  }
};

// Special values in every floating type, given as doubles and encoded exactly.
template <class D>
void checkSpecialFloats(const Family& family, tidalDataType_t type, double maxFinite) {
  using S = typename D::Storage;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    double a, b;
    tidalRedOp_t op;
    double expected;  // NaN: any quiet NaN
  };
  const Case cases[] = {
      {inf, -inf, tidalSum, nan},
      {inf, 1, tidalSum, inf},
      {-inf, -2, tidalSum, -inf},
      {nan, 1, tidalSum, nan},
      {1, nan, tidalProd, nan},
      {0, inf, tidalProd, nan},
      {-inf, -1, tidalProd, inf},
      {nan, 1, tidalMax, nan},
      {1, nan, tidalMax, nan},
      {nan, 1, tidalMin, nan},
      {1, nan, tidalMin, nan},
      {inf, nan, tidalMax, nan},
      {-inf, 5, tidalMax, 5},
      {-inf, 5, tidalMin, -inf},
      {inf, -inf, tidalMax, inf},
      {maxFinite, maxFinite, tidalSum, inf},
      {-maxFinite, -maxFinite, tidalSum, -inf},
      {maxFinite, 2, tidalProd, inf},
  };
  for (const Case& c : cases) {
    const std::vector<S> as(37, fromMath<D>(c.a));
    const std::vector<S> bs(37, fromMath<D>(c.b));
    std::vector<S> out(37);
    family.reduce(out.data(), as.data(), bs.data(), out.size(), type, c.op, 0);
    for (size_t i = 0; i < out.size(); ++i) {
      const double got = toDouble<D>(out[i]);
      if (std::isnan(c.expected)) {
        ASSERT_TRUE(isQuietNan<D>(out[i])) << c.a << " op" << c.op << " " << c.b << " -> " << got;
      } else {
        ASSERT_EQ(got, c.expected) << c.a << " op" << c.op << " " << c.b << " at " << i;
      }
    }
  }
}

TEST_P(ReduceCasesTest, NanAndInfinityInEveryFloatingType) {
  checkSpecialFloats<Desc<float, Kind::kFloat>>(GetParam(), tidalFloat32,
                                                std::numeric_limits<float>::max());
  checkSpecialFloats<Desc<double, Kind::kFloat>>(GetParam(), tidalFloat64,
                                                 std::numeric_limits<double>::max());
  checkSpecialFloats<Desc<uint16_t, Kind::kHalf>>(GetParam(), tidalFloat16, 65504.0);
  checkSpecialFloats<Desc<uint16_t, Kind::kBf16>>(GetParam(), tidalBfloat16,
                                                  std::ldexp(255.0, 120));  // 0x7f7f
}

TEST_P(ReduceCasesTest, SignallingNanInputsComeOutQuiet) {
  for (const uint16_t sNan : {uint16_t{0x7d00}, uint16_t{0xfc01}}) {  // half
    for (const tidalRedOp_t op : kOps) {
      for (const uint16_t r : run<uint16_t>(sNan, 0x3c00, tidalFloat16, op)) {
        ASSERT_EQ(r & 0x7e00, 0x7e00) << "op " << op;
      }
    }
  }
  for (const uint16_t sNan : {uint16_t{0x7f81}, uint16_t{0xffa0}}) {  // bfloat16
    for (const tidalRedOp_t op : kOps) {
      for (const uint16_t r : run<uint16_t>(0x3f80, sNan, tidalBfloat16, op)) {
        ASSERT_EQ(r & 0x7fc0, 0x7fc0) << "op " << op;
      }
    }
  }
}

TEST_P(ReduceCasesTest, Float16SumsRoundTiesToEven) {
  // 2048 + 1 = 2049 lies halfway between halves 2048 and 2050 (ulp 2): the
  // even one, 2048 (0x6800), wins. 2048 + 3 = 2051 -> 2052 (0x6802).
  expectAll<uint16_t>(run<uint16_t>(0x6800, 0x3c00, tidalFloat16, tidalSum), 0x6800, "2048+1");
  expectAll<uint16_t>(run<uint16_t>(0x6800, 0x4200, tidalFloat16, tidalSum), 0x6802, "2048+3");
  // 1 + 2^-11 -> 1 (0x3c00); 1 + 3 * 2^-11 -> 1 + 2^-9 (0x3c02).
  expectAll<uint16_t>(run<uint16_t>(0x3c00, 0x1000, tidalFloat16, tidalSum), 0x3c00, "1+2^-11");
  expectAll<uint16_t>(run<uint16_t>(0x3c00, 0x1600, tidalFloat16, tidalSum), 0x3c02, "1+3*2^-11");
  // 65504 + 16 = 65520, the tie between the largest half and 2^16: Inf.
  expectAll<uint16_t>(run<uint16_t>(0x7bff, 0x4c00, tidalFloat16, tidalSum), 0x7c00, "65504+16");
}

TEST_P(ReduceCasesTest, Bfloat16SumsRoundTiesToEven) {
  // 256 + 1 = 257, halfway between 256 and 258: even 256 (0x4380) wins;
  // 256 + 3 = 259 -> 260 (0x4382).
  expectAll<uint16_t>(run<uint16_t>(0x4380, 0x3f80, tidalBfloat16, tidalSum), 0x4380, "256+1");
  expectAll<uint16_t>(run<uint16_t>(0x4380, 0x4040, tidalBfloat16, tidalSum), 0x4382, "256+3");
}

// FP8: one rounding (nearest-even) from float, saturating to max finite.
TEST_P(ReduceCasesTest, Fp8E4m3RoundsOnceAndSaturates) {
  const auto e4 = [&](uint8_t a, uint8_t b, tidalRedOp_t op, int divisor = 0) {
    return run<uint8_t>(a, b, tidalFloat8e4m3, op, divisor);
  };
  expectAll<uint8_t>(e4(0x38, 0x38, tidalSum), 0x40, "1+1");
  expectAll<uint8_t>(e4(0x58, 0x38, tidalSum), 0x58, "16+1 = 17, tie -> 16");
  expectAll<uint8_t>(e4(0x58, 0x40, tidalSum), 0x59, "16+2");
  expectAll<uint8_t>(e4(0x58, 0x48, tidalSum), 0x5a, "16+4 = 20");
  expectAll<uint8_t>(e4(0x59, 0x38, tidalSum), 0x5a, "18+1 = 19, tie -> 20");
  expectAll<uint8_t>(e4(0x7e, 0x7e, tidalSum), 0x7e, "448+448 saturates");
  expectAll<uint8_t>(e4(0xfe, 0xfe, tidalSum), 0xfe, "-448-448 saturates");
  expectAll<uint8_t>(e4(0x7e, 0x40, tidalProd), 0x7e, "448*2 saturates");
  expectAll<uint8_t>(e4(0x7d, 0x58, tidalSum), 0x7e, "416+16 = 432, tie -> 448");
  expectAll<uint8_t>(e4(0x7d, 0x30, tidalSum), 0x7d, "416+0.5 -> 416");
  expectAll<uint8_t>(e4(0x7e, 0x58, tidalSum), 0x7e, "448+16 = 464 saturates");
  expectAll<uint8_t>(e4(0x01, 0x01, tidalSum), 0x02, "subnormal 2^-9 + 2^-9");
  expectAll<uint8_t>(e4(0x07, 0x01, tidalSum), 0x08, "largest subnormal + smallest = min normal");
  expectAll<uint8_t>(e4(0x01, 0x00, tidalSum, 2), 0x00, "2^-10: tie with 0 -> 0");
  expectAll<uint8_t>(e4(0x03, 0x00, tidalSum, 2), 0x02, "1.5 * 2^-9: tie -> 2 * 2^-9");
  expectAll<uint8_t>(e4(0x80, 0x80, tidalSum), 0x80, "-0 + -0");
  expectAll<uint8_t>(e4(0x38, 0x38, tidalAvg, 3), 0x33, "2/3 -> 0.6875");
  for (const tidalRedOp_t op : kOps) {
    for (const uint8_t r : e4(0x7f, 0x38, op)) ASSERT_EQ(r & 0x7f, 0x7f) << "NaN, op " << op;
    for (const uint8_t r : e4(0x38, 0xff, op)) ASSERT_EQ(r & 0x7f, 0x7f) << "NaN, op " << op;
  }
  expectAll<uint8_t>(e4(0xb8, 0x38, tidalMax), 0x38, "max(-1, 1)");
  expectAll<uint8_t>(e4(0xb8, 0x38, tidalMin), 0xb8, "min(-1, 1)");
}

TEST_P(ReduceCasesTest, Fp8E5m2RoundsOnceAndSaturates) {
  const auto e5 = [&](uint8_t a, uint8_t b, tidalRedOp_t op, int divisor = 0) {
    return run<uint8_t>(a, b, tidalFloat8e5m2, op, divisor);
  };
  expectAll<uint8_t>(e5(0x3c, 0x3c, tidalSum), 0x40, "1+1");
  expectAll<uint8_t>(e5(0x48, 0x3c, tidalSum), 0x48, "8+1 = 9, tie -> 8");
  expectAll<uint8_t>(e5(0x49, 0x3c, tidalSum), 0x4a, "10+1 = 11, tie -> 12");
  expectAll<uint8_t>(e5(0x7b, 0x7b, tidalSum), 0x7b, "57344+57344 saturates");
  expectAll<uint8_t>(e5(0xfb, 0xfb, tidalSum), 0xfb, "negative saturates");
  expectAll<uint8_t>(e5(0x7c, 0x3c, tidalSum), 0x7b, "Inf + 1 saturates to max finite");
  expectAll<uint8_t>(e5(0xfc, 0x3c, tidalMin), 0xfb, "min(-Inf, 1) saturates");
  expectAll<uint8_t>(e5(0x01, 0x01, tidalSum), 0x02, "subnormal 2^-16 + 2^-16");
  expectAll<uint8_t>(e5(0x03, 0x01, tidalSum), 0x04, "largest subnormal + smallest = min normal");
  expectAll<uint8_t>(e5(0x01, 0x00, tidalSum, 2), 0x00, "2^-17: tie with 0 -> 0");
  expectAll<uint8_t>(e5(0x80, 0x80, tidalSum), 0x80, "-0 + -0");
  for (const tidalRedOp_t op : kOps) {
    for (const uint8_t r : e5(0x7d, 0x3c, op)) ASSERT_EQ(r & 0x7e, 0x7e) << "NaN, op " << op;
    for (const uint8_t r : e5(0x3c, 0xff, op)) ASSERT_EQ(r & 0x7e, 0x7e) << "NaN, op " << op;
  }
  for (const uint8_t r : e5(0x7c, 0xfc, tidalSum)) ASSERT_EQ(r & 0x7e, 0x7e) << "Inf - Inf";
}

TEST_P(ReduceCasesTest, IntegerProductsWrap) {
  expectAll<int8_t>(run<int8_t>(100, 3, tidalInt8, tidalProd), 44, "100*3 = 300 - 256");
  expectAll<int8_t>(run<int8_t>(-128, -1, tidalInt8, tidalProd), -128, "-128*-1");
  expectAll<int8_t>(run<int8_t>(16, 16, tidalInt8, tidalProd), 0, "16*16");
  expectAll<int8_t>(run<int8_t>(-7, 50, tidalInt8, tidalProd), -94, "-350 + 256");
  expectAll<uint8_t>(run<uint8_t>(200, 2, tidalUint8, tidalProd), 144, "400 - 256");
  expectAll<int32_t>(run<int32_t>(65536, 65536, tidalInt32, tidalProd), 0, "2^32");
  expectAll<uint32_t>(run<uint32_t>(0xffffffffu, 0xffffffffu, tidalUint32, tidalProd), 1u,
                      "(2^32-1)^2 mod 2^32");
  expectAll<int64_t>(run<int64_t>(INT64_MAX, 2, tidalInt64, tidalProd), int64_t{-2},
                     "(2^63-1)*2 mod 2^64");
  expectAll<uint64_t>(run<uint64_t>(0x100000001ull, 0x100000001ull, tidalUint64, tidalProd),
                      0x200000001ull, "(2^32+1)^2 mod 2^64");
  expectAll<int8_t>(run<int8_t>(127, 1, tidalInt8, tidalSum), -128, "127+1");
  expectAll<uint64_t>(run<uint64_t>(UINT64_MAX, 2, tidalUint64, tidalSum), 1ull, "max+2");
}

TEST_P(ReduceCasesTest, UnsignedAndSigned64BitMinMaxUseTheRightOrder) {
  expectAll<uint64_t>(run<uint64_t>(1ull << 63, 1, tidalUint64, tidalMax), 1ull << 63, "umax");
  expectAll<uint64_t>(run<uint64_t>(1ull << 63, 1, tidalUint64, tidalMin), 1ull, "umin");
  expectAll<int64_t>(run<int64_t>(INT64_MIN, 1, tidalInt64, tidalMax), int64_t{1}, "smax");
  expectAll<int64_t>(run<int64_t>(INT64_MIN, 1, tidalInt64, tidalMin), INT64_MIN, "smin");
  expectAll<uint8_t>(run<uint8_t>(200, 100, tidalUint8, tidalMax), 200, "u8max");
  expectAll<int8_t>(run<int8_t>(-56, 100, tidalInt8, tidalMax), 100, "s8max");
}

TEST_P(ReduceCasesTest, AverageDividesAfterTheSum) {
  // Integers: wrap first, then truncate toward zero.
  expectAll<int32_t>(run<int32_t>(7, 8, tidalInt32, tidalAvg, 2), 7, "15/2");
  expectAll<int32_t>(run<int32_t>(-7, -8, tidalInt32, tidalSum, 2), -7, "-15/2");
  expectAll<int8_t>(run<int8_t>(100, 100, tidalInt8, tidalAvg, 2), -28, "(200-256)/2");
  expectAll<uint8_t>(run<uint8_t>(200, 100, tidalUint8, tidalAvg, 2), 22, "(300-256)/2");
  expectAll<int64_t>(run<int64_t>(INT64_MIN, 0, tidalInt64, tidalSum, -1), INT64_MIN,
                     "INT64_MIN/-1 wraps");
  expectAll<uint64_t>(run<uint64_t>(10, 1, tidalUint64, tidalAvg, 4), 2ull, "11/4");
  // avg with divisor 0 is a plain sum.
  expectAll<int32_t>(run<int32_t>(7, 8, tidalInt32, tidalAvg, 0), 15, "avg, no divisor");
  // Floats divide in their own precision: 2/3 as a float, not as a double.
  expectAll<float>(run<float>(1.0f, 1.0f, tidalFloat32, tidalAvg, 3), 2.0f / 3.0f, "2/3");
  expectAll<double>(run<double>(1.0, 1.0, tidalFloat64, tidalSum, 3), 2.0 / 3.0, "2/3");
  expectAll<float>(run<float>(1.5f, 2.5f, tidalFloat32, tidalAvg, 8), 0.5f, "4/8");
  // half: (1 + 1) / 3 = 0.6667 -> nearest half 0x3955 (0.66650390625).
  expectAll<uint16_t>(run<uint16_t>(0x3c00, 0x3c00, tidalFloat16, tidalAvg, 3), 0x3955, "h 2/3");
  // bfloat16: 2/3 -> 0x3f2b (0.66796875).
  expectAll<uint16_t>(run<uint16_t>(0x3f80, 0x3f80, tidalBfloat16, tidalAvg, 3), 0x3f2b, "b 2/3");
}

TEST_P(ReduceCasesTest, DivideByMatchesReference) {
  for (const tidalDataType_t type : kTypes) {
    withType(type, [&](auto desc) {
      using D = decltype(desc);
      using S = typename D::Storage;
      std::mt19937_64 rng(77 + type);
      const bool isUnsigned = type == tidalUint8 || type == tidalUint32 || type == tidalUint64;
      std::vector<int> divisors = {1, 2, 3, 1000};
      if (!isUnsigned) divisors.insert(divisors.end(), {-1, -2});
      for (const int divisor : divisors) {
        for (const size_t count : kCounts) {
          const std::vector<S> src = randomVector<D>(count + 3, rng);
          std::vector<S> out(count + 3);
          std::vector<S> inPlace = src;
          GetParam().divide(out.data() + 1, src.data() + 3, count, type, divisor);
          GetParam().divide(inPlace.data() + 2, inPlace.data() + 2, count, type, divisor);
          for (size_t i = 0; i < count; ++i) {
            // x / d is (x + 0) / d for every type, and x + 0 == x except for
            // -0 (which divides to a zero of the same value) and NaNs.
            const S zero{};
            const S expected = referenceElement<D>(src[i + 3], zero, tidalSum, divisor);
            ASSERT_TRUE(matchesReference<D>(expected, out[i + 1], tidalMax))
                << "type " << type << " divisor " << divisor << " element " << i;
            const S expectedInPlace = referenceElement<D>(src[i + 2], zero, tidalSum, divisor);
            ASSERT_TRUE(matchesReference<D>(expectedInPlace, inPlace[i + 2], tidalMax))
                << "in place, type " << type << " divisor " << divisor << " element " << i;
          }
        }
      }
    });
  }
}

TEST_P(ReduceCasesTest, DivideByZeroCopies) {
  const std::vector<uint16_t> src = {0x7c01, 0x8000, 0x1234, 0xffff, 0x0001};  // sNaN, -0, ...
  std::vector<uint16_t> out(src.size());
  GetParam().divide(out.data(), src.data(), src.size(), tidalFloat16, 0);
  EXPECT_EQ(out, src);
}

std::string familyName(const ::testing::TestParamInfo<Family>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Families, ReduceCasesTest, ::testing::ValuesIn(kFamilies), familyName);

// ---------------------------------------------------------------------------
// The public entry points themselves.

TEST(Reduce, ChoosesAvx2ExactlyWhenTheCpuHasIt) {
  EXPECT_STREQ(reduceKernelName(), cpu::avx2Supported() ? "avx2" : "scalar");
}

TEST(Reduce, ZeroCountTouchesNothing) {
  reduce(nullptr, nullptr, nullptr, 0, tidalFloat32, tidalSum, 0);
  divideBy(nullptr, nullptr, 0, tidalInt8, 3);
}

TEST(Reduce, RejectsInvalidTypeAndOp) {
  float x = 1;
  EXPECT_THROW(reduce(&x, &x, &x, 1, static_cast<tidalDataType_t>(tidalNumTypes), tidalSum), Error);
  EXPECT_THROW(reduce(&x, &x, &x, 1, tidalFloat32, static_cast<tidalRedOp_t>(tidalNumOps)), Error);
  EXPECT_THROW(divideBy(&x, &x, 1, static_cast<tidalDataType_t>(15), 2), Error);
  EXPECT_EQ(x, 1.0f);
}

}  // namespace
}  // namespace tidal
