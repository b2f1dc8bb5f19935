// OCP 8-bit floating point (OFP8) <-> float32 conversions, bit-exact, for
// tidalFloat8e4m3 and tidalFloat8e5m2.
//
//  - E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities; the
//    only NaNs are S.1111.111 (0x7f / 0xff). Largest finite value 448.
//  - E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like: an
//    all-ones exponent is +-Inf (mantissa 0) or NaN. Largest finite 57344.
//
// Widening is exact for all 256 patterns of each format (NaN stays NaN, its
// sign kept, returned quiet; E5M2 infinities stay infinite), so narrowing a
// widened value gives the pattern back, except that NaNs come back as the
// quiet NaN and, when saturating, E5M2's +-Inf as +-57344. Narrowing:
//  - rounds to nearest, ties to even, in integer code (no dependence on the
//    FPU rounding mode, FTZ/DAZ or the compiler's floating-point flags);
//  - by default saturates (Fp8Overflow::kSatFinite): a finite value above
//    the largest finite one, and +-Inf, become +-max finite (448 / 57344),
//    never Inf or NaN. This is the "satfinite" rule NCCL reduces FP8 with,
//    and the one every reduction here uses; see docs/api.md.
//    Fp8Overflow::kNoSat is plain IEEE-style rounding instead: E5M2 rounds to
//    +-Inf from 61440 up (the tie above 57344 goes to the even Inf) and keeps
//    Inf; E4M3, which has no Inf, gives NaN above 464 (464 itself ties to
//    448) and for +-Inf. With kNoSat all 256 patterns round-trip;
//  - NaN becomes the format's quiet NaN with the sign kept (0x7f for E4M3,
//    0x7e for E5M2, | 0x80 when negative);
//  - subnormals are produced and consumed exactly (no flush to zero), and
//    -0 stays -0.
//
// The same code runs on the host and in the CUDA kernels (__host__ __device__
// under nvcc), so the CPU and GPU reductions give identical bits.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define TIDAL_FP8_HD __host__ __device__
#else
#define TIDAL_FP8_HD
#endif

namespace tidal {

enum class Fp8Overflow { kSatFinite, kNoSat };

namespace fp8_detail {

// std::bit_cast is constexpr, so nvcc (--expt-relaxed-constexpr) runs it in
// device code too, and these stay usable in constant expressions everywhere.
TIDAL_FP8_HD constexpr uint32_t floatBits(float value) { return std::bit_cast<uint32_t>(value); }
TIDAL_FP8_HD constexpr float bitsFloat(uint32_t bits) { return std::bit_cast<float>(bits); }

// A format with kExp exponent bits (bias 2^(kExp-1) - 1) and kMan mantissa
// bits. kIeee: an all-ones exponent is Inf/NaN (E5M2); otherwise only the
// all-ones pattern is NaN and the exponent's top value holds normals (E4M3).
template <int kExp, int kMan, bool kIeee>
struct Format {
  static constexpr uint32_t kBias = (1u << (kExp - 1)) - 1u;
  static constexpr uint32_t kExpMask = (1u << kExp) - 1u;
  static constexpr uint32_t kManMask = (1u << kMan) - 1u;
  // Largest finite magnitude, as an fp8 code and as float bits.
  static constexpr uint32_t kMaxCode = kIeee ? ((kExpMask - 1u) << kMan) | kManMask   // 0x7b
                                             : (kExpMask << kMan) | (kManMask - 1u);  // 0x7e
  static constexpr uint32_t kMaxFloatBits =
      (((kMaxCode >> kMan) + 127u - kBias) << 23) | ((kMaxCode & kManMask) << (23 - kMan));
  static constexpr uint32_t kQuietNan = kIeee ? (kExpMask << kMan) | (1u << (kMan - 1)) : 0x7fu;
  // Float bits of the smallest normal, and of half the smallest subnormal.
  static constexpr uint32_t kMinNormalFloatBits = (127u + 1u - kBias) << 23;
  static constexpr uint32_t kHalfSubnormalFloatBits = (127u - kBias - kMan) << 23;
  // Float bits of the tie between max finite and the next step up (which is
  // Inf for E5M2 and NaN for E4M3); kNoSat only.
  static constexpr uint32_t kOverflowTieFloatBits = kMaxFloatBits + (1u << (22 - kMan));

  static TIDAL_FP8_HD constexpr uint8_t fromFloat(float value, Fp8Overflow overflow) {
    const uint32_t bits = floatBits(value);
    const uint32_t sign = (bits >> 24) & 0x80u;
    const uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return static_cast<uint8_t>(sign | kQuietNan);
    if (overflow == Fp8Overflow::kNoSat && magnitude > kMaxFloatBits) {
      // The tie goes to the even neighbour: Inf for E5M2 (max 0x7b is odd),
      // max finite for E4M3 (0x7e is even; the odd step up is NaN).
      const bool up =
          kIeee ? magnitude >= kOverflowTieFloatBits : magnitude > kOverflowTieFloatBits;
      if (up) return static_cast<uint8_t>(sign | (kIeee ? kExpMask << kMan : 0x7fu));
      return static_cast<uint8_t>(sign | kMaxCode);
    }
    // Saturate to finite: everything above the largest finite value (Inf
    // included) becomes it.
    if (magnitude >= kMaxFloatBits) return static_cast<uint8_t>(sign | kMaxCode);
    if (magnitude >= kMinNormalFloatBits) {
      // Rebias the exponent in place, then round away the low mantissa bits;
      // a carry out of the mantissa bumps the exponent, and cannot pass the
      // largest finite code because the value is below it.
      constexpr uint32_t kShift = 23u - kMan;
      const uint32_t rebased = magnitude - ((127u - kBias) << 23);
      const uint32_t odd = (rebased >> kShift) & 1u;
      return static_cast<uint8_t>(sign | ((rebased + (1u << (kShift - 1u)) - 1u + odd) >> kShift));
    }
    // At or below half the smallest subnormal (a tie goes to even: zero).
    if (magnitude <= kHalfSubnormalFloatBits) return static_cast<uint8_t>(sign);
    // Subnormal: value = significand * 2^(exponent - 150) and one subnormal
    // unit is 2^(1 - bias - kMan), so the code is significand >> shift, rounded.
    const uint32_t exponent = magnitude >> 23;
    const uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
    const uint32_t shift = 151u - kBias - kMan - exponent;  // 24 - kMan .. 24
    uint32_t result = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint8_t>(sign | result);  // may round up to the smallest normal
  }

  static TIDAL_FP8_HD constexpr float toFloat(uint8_t code) {
    const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
    const uint32_t exponent = (code >> kMan) & kExpMask;
    uint32_t mantissa = code & kManMask;
    if (kIeee && exponent == kExpMask) {  // Inf, or NaN returned quiet
      if (mantissa == 0) return bitsFloat(sign | 0x7f800000u);
      return bitsFloat(sign | 0x7fc00000u | (mantissa << (23 - kMan)));
    }
    if (!kIeee && exponent == kExpMask && mantissa == kManMask) {
      return bitsFloat(sign | 0x7fc00000u);
    }
    if (exponent != 0) {
      return bitsFloat(sign | ((exponent + 127u - kBias) << 23) | (mantissa << (23 - kMan)));
    }
    if (mantissa == 0) return bitsFloat(sign);
    // Subnormal: normalise; every one is a normal float.
    uint32_t floatExponent = 127u + 1u - kBias;
    while ((mantissa & (1u << kMan)) == 0) {
      mantissa <<= 1;
      --floatExponent;
    }
    return bitsFloat(sign | (floatExponent << 23) | ((mantissa & kManMask) << (23 - kMan)));
  }
};

using E4M3 = Format<4, 3, false>;
using E5M2 = Format<5, 2, true>;

}  // namespace fp8_detail

inline constexpr float kFp8e4m3Max = 448.0f;
inline constexpr float kFp8e5m2Max = 57344.0f;

TIDAL_FP8_HD constexpr uint8_t floatToFp8e4m3Bits(float value,
                                                  Fp8Overflow overflow = Fp8Overflow::kSatFinite) {
  return fp8_detail::E4M3::fromFloat(value, overflow);
}
TIDAL_FP8_HD constexpr float fp8e4m3BitsToFloat(uint8_t bits) {
  return fp8_detail::E4M3::toFloat(bits);
}
TIDAL_FP8_HD constexpr uint8_t floatToFp8e5m2Bits(float value,
                                                  Fp8Overflow overflow = Fp8Overflow::kSatFinite) {
  return fp8_detail::E5M2::fromFloat(value, overflow);
}
TIDAL_FP8_HD constexpr float fp8e5m2BitsToFloat(uint8_t bits) {
  return fp8_detail::E5M2::toFloat(bits);
}

static_assert(fp8_detail::E4M3::kMaxCode == 0x7e && fp8_detail::E5M2::kMaxCode == 0x7b);
static_assert(fp8_detail::E4M3::kQuietNan == 0x7f && fp8_detail::E5M2::kQuietNan == 0x7e);
static_assert(fp8e4m3BitsToFloat(0x7e) == kFp8e4m3Max && fp8e5m2BitsToFloat(0x7b) == kFp8e5m2Max);

}  // namespace tidal
