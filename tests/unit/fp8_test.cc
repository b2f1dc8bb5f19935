// OCP FP8 conversions (core/fp8.h) against references built from the
// formats' definitions in double arithmetic (ldexp, and a nearest-value search
// over every finite pattern), not from bit manipulation; and the reduction
// kernels on every pair of FP8 values against the same references.
#include "core/fp8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "reduce/cpu/kernels.h"
#include "reduce/reduce.h"

namespace tidal {
namespace {

// Compile-time use is part of the contract.
static_assert(floatToFp8e4m3Bits(1.0f) == 0x38);
static_assert(fp8e4m3BitsToFloat(0xc0) == -2.0f);
static_assert(floatToFp8e5m2Bits(1.0f) == 0x3c);
static_assert(fp8e5m2BitsToFloat(0x7b) == 57344.0f);

struct Spec {
  const char* name;
  tidalDataType_t type;
  int exponentBits, mantissaBits;
  bool ieee;  // all-ones exponent is Inf/NaN (E5M2); else only S.1111.111 is NaN
  double maxFinite;
  uint8_t maxCode;
  float (*widen)(uint8_t);
  uint8_t (*narrow)(float, Fp8Overflow);
};

float widenE4m3(uint8_t b) { return fp8e4m3BitsToFloat(b); }
float widenE5m2(uint8_t b) { return fp8e5m2BitsToFloat(b); }
uint8_t narrowE4m3(float f, Fp8Overflow o) { return floatToFp8e4m3Bits(f, o); }
uint8_t narrowE5m2(float f, Fp8Overflow o) { return floatToFp8e5m2Bits(f, o); }

const Spec kE4m3{"e4m3", tidalFloat8e4m3, 4, 3, false, 448.0, 0x7e, widenE4m3, narrowE4m3};
const Spec kE5m2{"e5m2", tidalFloat8e5m2, 5, 2, true, 57344.0, 0x7b, widenE5m2, narrowE5m2};

class Fp8Test : public ::testing::TestWithParam<Spec> {};

// Value of a pattern from its fields, by definition of the format.
double byDefinition(const Spec& s, uint8_t code) {
  const int bias = (1 << (s.exponentBits - 1)) - 1;
  const int exponent = (code >> s.mantissaBits) & ((1 << s.exponentBits) - 1);
  const int mantissa = code & ((1 << s.mantissaBits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int allOnes = (1 << s.exponentBits) - 1;
  if (s.ieee && exponent == allOnes) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (!s.ieee && exponent == allOnes && mantissa == (1 << s.mantissaBits) - 1) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double fraction = std::ldexp(mantissa, -s.mantissaBits);
  if (exponent == 0) return sign * std::ldexp(fraction, 1 - bias);
  return sign * std::ldexp(1.0 + fraction, exponent - bias);
}

bool isNanCode(const Spec& s, uint8_t code) { return std::isnan(byDefinition(s, code)); }

// Correctly rounded pattern for x (not NaN) by search: the nearest finite
// value, a tie going to the even pattern (even mantissa); beyond max finite,
// kSatFinite gives max finite and kNoSat what rounding onto an extended grid
// gives (E5M2: Inf; E4M3: NaN), except the tie with max finite (even for
// E4M3, so max; odd for E5M2, so Inf).
uint8_t reference(const Spec& s, double x, Fp8Overflow overflow) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double m = std::fabs(x);
  if (m > s.maxFinite) {
    if (overflow == Fp8Overflow::kSatFinite) return sign | s.maxCode;
    const double step = std::ldexp(1.0, std::ilogb(s.maxFinite) - s.mantissaBits);
    const double tie = s.maxFinite + step / 2;
    if (m < tie || (m == tie && !s.ieee)) return sign | s.maxCode;
    return sign | (s.ieee ? 0x7c : 0x7f);
  }
  int best = -1;
  double bestDistance = 0;
  for (int c = 0; c < 0x80; ++c) {
    const double v = byDefinition(s, static_cast<uint8_t>(c));
    if (std::isnan(v) || std::isinf(v)) continue;
    const double d = std::fabs(v - m);
    if (best < 0 || d < bestDistance || (d == bestDistance && (c & 1) == 0)) {
      best = c;
      bestDistance = d;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST_P(Fp8Test, EveryPatternWidensToItsDefinedValue) {
  const Spec& s = GetParam();
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const double want = byDefinition(s, code);
    const float got = s.widen(code);
    if (std::isnan(want)) {
      ++nans;
      EXPECT_TRUE(std::isnan(got)) << std::hex << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << std::hex << c;
      EXPECT_TRUE(std::bit_cast<uint32_t>(got) & 0x00400000u) << "quiet, " << std::hex << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << std::hex << c;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << c;
    }
  }
  EXPECT_EQ(nans, s.ieee ? 6 : 2);
  EXPECT_EQ(s.widen(s.maxCode), s.maxFinite);
}

TEST_P(Fp8Test, EveryPatternRoundTripsThroughFloat) {
  const Spec& s = GetParam();
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float f = s.widen(code);
    for (const Fp8Overflow o : {Fp8Overflow::kSatFinite, Fp8Overflow::kNoSat}) {
      const uint8_t back = s.narrow(f, o);
      if (isNanCode(s, code)) {
        EXPECT_TRUE(isNanCode(s, back)) << std::hex << c << " -> " << int(back);
        EXPECT_EQ(back & 0x80, c & 0x80) << "NaN keeps its sign, " << std::hex << c;
      } else if (std::isinf(f) && o == Fp8Overflow::kSatFinite) {
        EXPECT_EQ(back, (c & 0x80) | s.maxCode) << "Inf saturates, " << std::hex << c;
      } else {
        EXPECT_EQ(back, code) << std::hex << c;
      }
    }
  }
}

// Every float between two neighbouring values is decided by where it lies
// against their midpoint: try the midpoints, their float neighbours, and the
// values themselves, over the whole range, beyond max and below the
// smallest subnormal.
TEST_P(Fp8Test, NarrowingRoundsToNearestEvenAtEveryBoundary) {
  const Spec& s = GetParam();
  std::vector<double> values;
  for (int c = 0; c < 0x80; ++c) {
    const double v = byDefinition(s, static_cast<uint8_t>(c));
    if (!std::isnan(v) && !std::isinf(v)) values.push_back(v);
  }
  const double step = std::ldexp(1.0, std::ilogb(s.maxFinite) - s.mantissaBits);
  values.push_back(s.maxFinite + step);  // the first step beyond max
  values.push_back(s.maxFinite + 2 * step);
  values.push_back(std::ldexp(1.0, 100));
  int checked = 0;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const double mid = (values[i] + values[i + 1]) / 2;
    for (const float base : {static_cast<float>(values[i]), static_cast<float>(mid)}) {
      for (const float x : {base, std::nextafter(base, 0.0f),
                            std::nextafter(base, std::numeric_limits<float>::max())}) {
        for (const float signed_x : {x, -x}) {
          for (const Fp8Overflow o : {Fp8Overflow::kSatFinite, Fp8Overflow::kNoSat}) {
            ASSERT_EQ(s.narrow(signed_x, o), reference(s, signed_x, o))
                << std::hexfloat << signed_x
                << (o == Fp8Overflow::kNoSat ? " nosat" : " satfinite");
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST_P(Fp8Test, NarrowingMatchesTheReferenceOnRandomFloats) {
  const Spec& s = GetParam();
  std::mt19937_64 rng(0xf8 + s.exponentBits);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t r = rng();
    // Exponents from far below the subnormals to far above max.
    const float x =
        std::ldexp(static_cast<float>(r >> 40) / 16777216.0f, static_cast<int>(r % 64) - 32);
    const float signed_x = (r >> 39) & 1 ? -x : x;
    ASSERT_EQ(s.narrow(signed_x, Fp8Overflow::kSatFinite),
              reference(s, signed_x, Fp8Overflow::kSatFinite))
        << std::hexfloat << signed_x;
    ASSERT_EQ(s.narrow(signed_x, Fp8Overflow::kNoSat), reference(s, signed_x, Fp8Overflow::kNoSat))
        << std::hexfloat << signed_x;
  }
}

TEST_P(Fp8Test, NanInfinityAndZeroNarrow) {
  const Spec& s = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const uint8_t quiet = s.ieee ? 0x7e : 0x7f;
  EXPECT_EQ(s.narrow(nan, Fp8Overflow::kSatFinite), quiet);
  EXPECT_EQ(s.narrow(-nan, Fp8Overflow::kSatFinite), 0x80 | quiet);
  EXPECT_EQ(s.narrow(std::bit_cast<float>(0x7f800001u), Fp8Overflow::kNoSat), quiet) << "sNaN";
  EXPECT_EQ(s.narrow(inf, Fp8Overflow::kSatFinite), s.maxCode);
  EXPECT_EQ(s.narrow(-inf, Fp8Overflow::kSatFinite), 0x80 | s.maxCode);
  EXPECT_EQ(s.narrow(inf, Fp8Overflow::kNoSat), s.ieee ? 0x7c : 0x7f);
  EXPECT_EQ(s.narrow(-inf, Fp8Overflow::kNoSat), s.ieee ? 0xfc : 0xff);
  EXPECT_EQ(s.narrow(std::numeric_limits<float>::max(), Fp8Overflow::kSatFinite), s.maxCode);
  EXPECT_EQ(s.narrow(0.0f, Fp8Overflow::kSatFinite), 0x00);
  EXPECT_EQ(s.narrow(-0.0f, Fp8Overflow::kSatFinite), 0x80);
  EXPECT_EQ(s.narrow(std::numeric_limits<float>::denorm_min(), Fp8Overflow::kSatFinite), 0x00);
  EXPECT_EQ(s.narrow(-std::numeric_limits<float>::denorm_min(), Fp8Overflow::kSatFinite), 0x80);
}

// The worked values of the OCP specification's tables, and the edge cases
// named in the issue, as literals.
TEST(Fp8Literals, E4m3) {
  const auto n = [](double x) { return floatToFp8e4m3Bits(static_cast<float>(x)); };
  EXPECT_EQ(n(448), 0x7e);
  EXPECT_EQ(n(-448), 0xfe);
  EXPECT_EQ(n(449), 0x7e);  // just above max
  EXPECT_EQ(n(464), 0x7e);  // the overflow tie
  EXPECT_EQ(n(1e6), 0x7e);  // overflow saturates
  EXPECT_EQ(floatToFp8e4m3Bits(465.0f, Fp8Overflow::kNoSat), 0x7f);
  EXPECT_EQ(floatToFp8e4m3Bits(464.0f, Fp8Overflow::kNoSat), 0x7e);
  EXPECT_EQ(n(447), 0x7e);  // just below max rounds up to it
  EXPECT_EQ(n(432), 0x7e);  // tie 416 / 448 -> even 448
  EXPECT_EQ(n(431), 0x7d);
  EXPECT_EQ(n(17), 0x58);                    // tie 16 / 18 -> even 16
  EXPECT_EQ(n(19), 0x5a);                    // tie 18 / 20 -> even 20
  EXPECT_EQ(n(std::ldexp(1.0, -6)), 0x08);   // smallest normal
  EXPECT_EQ(n(std::ldexp(7.0, -9)), 0x07);   // largest subnormal
  EXPECT_EQ(n(std::ldexp(1.0, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(n(std::ldexp(1.0, -10)), 0x00);  // tie with zero -> 0
  EXPECT_EQ(n(std::ldexp(1.5, -10)), 0x01);
  EXPECT_EQ(n(std::ldexp(3.0, -10)), 0x02);   // tie 1 / 2 -> even 2
  EXPECT_EQ(n(std::ldexp(15.0, -10)), 0x08);  // tie largest subnormal / smallest normal
  EXPECT_EQ(n(-std::ldexp(1.0, -11)), 0x80);
}

TEST(Fp8Literals, E5m2) {
  const auto n = [](double x) { return floatToFp8e5m2Bits(static_cast<float>(x)); };
  EXPECT_EQ(n(57344), 0x7b);
  EXPECT_EQ(n(-57344), 0xfb);
  EXPECT_EQ(n(57345), 0x7b);
  EXPECT_EQ(n(61440), 0x7b);  // the overflow tie, saturated
  EXPECT_EQ(n(1e9), 0x7b);
  EXPECT_EQ(floatToFp8e5m2Bits(61440.0f, Fp8Overflow::kNoSat), 0x7c);  // tie -> even Inf
  EXPECT_EQ(floatToFp8e5m2Bits(61439.0f, Fp8Overflow::kNoSat), 0x7b);
  EXPECT_EQ(n(53248), 0x7a);  // tie 49152 / 57344 -> even 49152
  EXPECT_EQ(n(53249), 0x7b);
  EXPECT_EQ(n(9), 0x48);                     // tie 8 / 10 -> even 8
  EXPECT_EQ(n(11), 0x4a);                    // tie 10 / 12 -> even 12
  EXPECT_EQ(n(std::ldexp(1.0, -14)), 0x04);  // smallest normal
  EXPECT_EQ(n(std::ldexp(1.0, -16)), 0x01);  // smallest subnormal
  EXPECT_EQ(n(std::ldexp(1.0, -17)), 0x00);  // tie with zero -> 0
  EXPECT_EQ(n(std::ldexp(3.0, -17)), 0x02);  // tie 1 / 2 -> even 2
  EXPECT_EQ(n(std::ldexp(7.0, -17)), 0x04);  // tie largest subnormal / smallest normal
  EXPECT_EQ(fp8e5m2BitsToFloat(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8e5m2BitsToFloat(0xfc), -std::numeric_limits<float>::infinity());
}

// Every pair of FP8 values through the reduction kernels (scalar family and
// the dispatched one, AVX2 where the CPU has it, which hands FP8 to scalar
// code) against double arithmetic rounded once: the sum or product of two
// FP8 values is exact in float, so one rounding to FP8 is the whole story.
TEST_P(Fp8Test, ReduceKernelsOnEveryPairMatchTheReference) {
  const Spec& s = GetParam();
  std::vector<uint8_t> a(65536), b(65536);
  for (int i = 0; i < 65536; ++i) {
    a[i] = static_cast<uint8_t>(i >> 8);
    b[i] = static_cast<uint8_t>(i);
  }
  for (const tidalRedOp_t op : {tidalSum, tidalProd, tidalMax, tidalMin, tidalAvg}) {
    const int divisor = op == tidalAvg ? 3 : 0;
    std::vector<uint8_t> scalar(65536), dispatched(65536), avx2(65536);
    cpu::reduceScalar(scalar.data(), a.data(), b.data(), a.size(), s.type, op, divisor);
    reduce(dispatched.data(), a.data(), b.data(), a.size(), s.type, op, divisor);
    if (cpu::avx2Supported()) {
      cpu::reduceAvx2(avx2.data(), a.data(), b.data(), a.size(), s.type, op, divisor);
    } else {
      avx2 = scalar;
    }
    int wrong = 0;
    for (int i = 0; i < 65536 && wrong < 5; ++i) {
      const double x = byDefinition(s, a[i]);
      const double y = byDefinition(s, b[i]);
      double r = 0;
      switch (op) {
        case tidalProd:
          r = x * y;
          break;
        case tidalMax:
          r = std::isnan(x) || std::isnan(y) ? NAN : (x > y ? x : y);
          break;
        case tidalMin:
          r = std::isnan(x) || std::isnan(y) ? NAN : (x < y ? x : y);
          break;
        default:
          r = x + y;
          break;
      }
      if (divisor != 0) r = static_cast<float>(static_cast<float>(r) / static_cast<float>(divisor));
      for (const auto* got : {&scalar, &dispatched, &avx2}) {
        const uint8_t g = (*got)[i];
        const bool ok =
            std::isnan(r) ? isNanCode(s, g) : g == reference(s, r, Fp8Overflow::kSatFinite);
        if (!ok && wrong++ < 5) {
          ADD_FAILURE() << s.name << " op " << op << ": 0x" << std::hex << int(a[i]) << ", 0x"
                        << int(b[i]) << " -> 0x" << int(g) << std::dec << " (want " << r << ")";
        }
      }
    }
  }
}

TEST_P(Fp8Test, DivideByMatchesTheReference) {
  const Spec& s = GetParam();
  std::vector<uint8_t> src(256), out(256);
  for (int c = 0; c < 256; ++c) src[c] = static_cast<uint8_t>(c);
  for (const int divisor : {1, 2, 3, -2, 1000}) {
    divideBy(out.data(), src.data(), src.size(), s.type, divisor);
    for (int c = 0; c < 256; ++c) {
      const float q = s.widen(src[c]) / static_cast<float>(divisor);
      if (std::isnan(q)) {
        EXPECT_TRUE(isNanCode(s, out[c])) << std::hex << c;
      } else {
        EXPECT_EQ(out[c], reference(s, q, Fp8Overflow::kSatFinite))
            << std::hex << c << std::dec << " / " << divisor;
      }
    }
  }
}

std::string formatName(const ::testing::TestParamInfo<Spec>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test, ::testing::Values(kE4m3, kE5m2), formatName);

}  // namespace
}  // namespace tidal
