// float16 / bfloat16 conversions (core/half.h) against references built from
// double arithmetic (ldexp / frexp / nearbyint), not from bit manipulation.
#include "core/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tidal {
namespace {

// Compile-time use is part of the contract ("constexpr-friendly").
static_assert(floatToHalfBits(1.0f) == 0x3c00);
static_assert(halfBitsToFloat(0xc000) == -2.0f);
static_assert(floatToBf16Bits(1.0f) == 0x3f80);
static_assert(bf16BitsToFloat(0x4049) == 3.140625f);

uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }
float floatFromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

// A binary floating-point format with `digits` significand bits (implicit
// bit included), smallest normal exponent minExp (value 2^minExp), and
// values >= overflow rounding to infinity.
struct Format {
  int digits;
  int minExp;
  double overflow;
};
// Largest finite half is 65504 = (2 - 2^-10) * 2^15; rounding reaches 2^16.
constexpr Format kHalf{11, -14, 65536.0};
// bfloat16 has float's exponent range and 8 significand bits.
const Format kBf16{8, -126, std::ldexp(1.0, 128)};

// Correctly rounded (nearest, ties to even) value of x in the format, as a
// double; +-Inf on overflow. x must not be NaN.
double roundTo(const Format& format, double x) {
  if (x == 0 || std::isinf(x)) return x;
  int exponent = 0;
  std::frexp(std::fabs(x), &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const int quantumExp = std::max(exponent - 1, format.minExp) - (format.digits - 1);
  const double scaled = std::ldexp(std::fabs(x), -quantumExp);  // exact
  const double rounded = std::ldexp(std::nearbyint(scaled), quantumExp);
  const double magnitude =
      rounded >= format.overflow ? std::numeric_limits<double>::infinity() : rounded;
  return std::copysign(magnitude, x);
}

// Value of a half from its fields, by definition of the format.
double halfValueByDefinition(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double bf16ValueByDefinition(uint16_t h) {
  const int exponent = (h >> 7) & 0xff;
  const int mantissa = h & 0x7f;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0xff) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);
  return sign * std::ldexp(128 + mantissa, exponent - 134);
}

bool sameValueAndSign(double expected, float actual) {
  return expected == static_cast<double>(actual) && std::signbit(expected) == std::signbit(actual);
}

TEST(Half, DecodesEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const double expected = halfValueByDefinition(static_cast<uint16_t>(h));
    const float actual = halfBitsToFloat(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(actual)) << std::hex << h;
      ASSERT_TRUE(floatBits(actual) & 0x00400000u) << "NaN not quiet, half 0x" << std::hex << h;
      ASSERT_EQ(std::signbit(actual), (h & 0x8000) != 0) << std::hex << h;
    } else {
      ASSERT_TRUE(sameValueAndSign(expected, actual)) << std::hex << h << " -> " << actual;
    }
  }
}

TEST(Half, RoundTripsEveryNonNanHalf) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN
    ASSERT_EQ(floatToHalfBits(halfBitsToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

// Every midpoint between two adjacent finite halves is an exact float; it
// must go to the neighbour with the even bit pattern, and one float ulp
// either side must go to the nearer neighbour. Covers subnormals, the
// subnormal/normal boundary, exponent carries and 65520 -> Inf.
TEST(Half, RoundsEveryTieToEvenAndNeighboursToNearest) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double low = halfValueByDefinition(static_cast<uint16_t>(h));
    const double high = h + 1 == 0x7c00 ? 65536.0 : halfValueByDefinition(h + 1);
    const float mid = static_cast<float>((low + high) / 2);
    ASSERT_EQ(static_cast<double>(mid), (low + high) / 2) << "midpoint not exact";
    const uint16_t even = static_cast<uint16_t>((h & 1) ? h + 1 : h);
    for (const float sign : {1.0f, -1.0f}) {
      const uint16_t signBit = sign < 0 ? 0x8000 : 0;
      ASSERT_EQ(floatToHalfBits(sign * mid), even | signBit)
          << "tie above half 0x" << std::hex << h;
      const float above = std::nextafter(mid, std::numeric_limits<float>::infinity());
      const float below = std::nextafter(mid, 0.0f);
      ASSERT_EQ(floatToHalfBits(sign * above), (h + 1) | signBit) << std::hex << h;
      ASSERT_EQ(floatToHalfBits(sign * below), h | signBit) << std::hex << h;
    }
  }
}

TEST(Half, EncodesSampledFloatsLikeTheReference) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  // A prime stride visits every exponent and many mantissa patterns.
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 1021) {
    const float f = floatFromBits(static_cast<uint32_t>(bits));
    const uint16_t h = floatToHalfBits(f);
    if (std::isnan(f)) {
      ASSERT_EQ(h & 0x7e00, 0x7e00) << "NaN must stay a quiet NaN: " << std::hex << bits;
      ASSERT_EQ((h & 0x8000) != 0, std::signbit(f));
      continue;
    }
    const double expected = roundTo(kHalf, f);
    ASSERT_TRUE(sameValueAndSign(expected, halfBitsToFloat(h)))
        << std::hex << bits << " (" << f << ") -> 0x" << h << ", expected " << expected;
  }
}

TEST(Half, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToHalfBits(inf), 0x7c00);
  EXPECT_EQ(floatToHalfBits(-inf), 0xfc00);
  EXPECT_EQ(floatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(floatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalfBits(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalfBits(-std::numeric_limits<float>::max()), 0xfc00);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0 -> even
  EXPECT_EQ(floatToHalfBits(std::ldexp(3.0f, -25)), 0x0002);  // tie 1.5 units -> 2
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(floatToHalfBits(std::numeric_limits<float>::denorm_min()), 0x0000);
  // NaNs: quiet, sign kept, even when the payload bits that survive are zero.
  const uint16_t fromQuiet = floatToHalfBits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(fromQuiet & 0x7e00, 0x7e00);
  const uint16_t fromSignalling = floatToHalfBits(floatFromBits(0xff800001u));
  EXPECT_EQ(fromSignalling & 0xfe00, 0xfe00);
  EXPECT_TRUE(std::isnan(halfBitsToFloat(0x7c01)));  // signalling half
  EXPECT_TRUE(floatBits(halfBitsToFloat(0x7c01)) & 0x00400000u);
}

TEST(Bf16, DecodesEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const double expected = bf16ValueByDefinition(static_cast<uint16_t>(h));
    const float actual = bf16BitsToFloat(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(actual)) << std::hex << h;
      ASSERT_TRUE(floatBits(actual) & 0x00400000u) << "NaN not quiet, bf16 0x" << std::hex << h;
      ASSERT_EQ(std::signbit(actual), (h & 0x8000) != 0) << std::hex << h;
    } else {
      ASSERT_TRUE(sameValueAndSign(expected, actual)) << std::hex << h << " -> " << actual;
    }
  }
}

TEST(Bf16, RoundsEveryTieToEvenAndNeighboursToNearest) {
  for (uint32_t h = 0; h < 0x7f80; ++h) {
    const double low = bf16ValueByDefinition(static_cast<uint16_t>(h));
    const double high = h + 1 == 0x7f80 ? std::ldexp(1.0, 128) : bf16ValueByDefinition(h + 1);
    const float mid = static_cast<float>((low + high) / 2);
    ASSERT_EQ(static_cast<double>(mid), (low + high) / 2) << "midpoint not exact";
    const uint16_t even = static_cast<uint16_t>((h & 1) ? h + 1 : h);
    for (const float sign : {1.0f, -1.0f}) {
      const uint16_t signBit = sign < 0 ? 0x8000 : 0;
      ASSERT_EQ(floatToBf16Bits(sign * mid), even | signBit) << "tie above 0x" << std::hex << h;
      const float above = std::nextafter(mid, std::numeric_limits<float>::infinity());
      const float below = std::nextafter(mid, 0.0f);
      ASSERT_EQ(floatToBf16Bits(sign * above), (h + 1) | signBit) << std::hex << h;
      ASSERT_EQ(floatToBf16Bits(sign * below), h | signBit) << std::hex << h;
    }
  }
}

TEST(Bf16, EncodesSampledFloatsLikeTheReference) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 1021) {
    const float f = floatFromBits(static_cast<uint32_t>(bits));
    const uint16_t h = floatToBf16Bits(f);
    if (std::isnan(f)) {
      ASSERT_EQ(h & 0x7fc0, 0x7fc0) << "NaN must stay a quiet NaN: " << std::hex << bits;
      ASSERT_EQ((h & 0x8000) != 0, std::signbit(f));
      continue;
    }
    const double expected = roundTo(kBf16, f);
    ASSERT_TRUE(sameValueAndSign(expected, bf16BitsToFloat(h)))
        << std::hex << bits << " (" << f << ") -> 0x" << h << ", expected " << expected;
  }
}

TEST(Bf16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBf16Bits(inf), 0x7f80);
  EXPECT_EQ(floatToBf16Bits(-inf), 0xff80);
  EXPECT_EQ(floatToBf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(floatToBf16Bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x7f7f7fffu)), 0x7f7f);         // just below the tie
  EXPECT_EQ(floatToBf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);        // tie -> even
  EXPECT_EQ(floatToBf16Bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);        // tie -> even (up)
  EXPECT_EQ(floatToBf16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x00018000u)), 0x0002);  // subnormal tie -> even
  // A signalling NaN whose payload lives only in the dropped bits stays NaN.
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x7f800001u)) & 0x7fc0, 0x7fc0);
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0xffc00000u)), 0xffc0);
  EXPECT_TRUE(floatBits(bf16BitsToFloat(0x7f81)) & 0x00400000u);
}

}  // namespace
}  // namespace tidal
