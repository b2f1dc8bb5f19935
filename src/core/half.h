// IEEE binary16 (float16) and bfloat16 <-> float32 conversions, bit-exact.
//
// Narrowing rounds to nearest, ties to even, whatever the FPU rounding mode:
// the reduction kernels must give the same bits on every machine and on the
// scalar and SIMD paths (F16C's vcvtps2ph with imm 0 and the bf16 integer
// rounding in reduce/cpu/reduce_avx2.cc produce exactly these results).
//
//  - NaN stays NaN with its sign and top payload bits, and is always returned
//    quiet (a signalling NaN would trap or be quieted by the next operation
//    anyway; quieting here keeps both paths identical).
//  - Finite values too large for the narrow format become +-Inf.
//  - Subnormals are produced and consumed exactly (no flush to zero).
//
// Pure integer code on purpose: no dependence on MXCSR (FTZ/DAZ) or on the
// compiler's floating-point flags, and usable in constexpr contexts with
// std::bit_cast (C++20).
#pragma once

#include <bit>
#include <cstdint>

namespace tidal {

constexpr uint16_t floatToHalfBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude >= 0x7f800000u) {  // Inf or NaN
    if (magnitude == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x03ffu));
  }
  // 0x477ff000 is 65520, halfway between the largest half (65504) and 2^16;
  // the tie goes to the even neighbour, which is Inf.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);

  if (magnitude >= 0x38800000u) {  // normal half (>= 2^-14)
    // Rebias the exponent (127 -> 15) in place, then round away the 13 low
    // mantissa bits. A carry out of the mantissa correctly bumps the exponent.
    const uint32_t rebased = magnitude - 0x38000000u;
    const uint32_t odd = (rebased >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((rebased + 0x0fffu + odd) >> 13));
  }
  // At or below 2^-25 (half of the smallest subnormal, a tie to even) -> zero.
  if (magnitude <= 0x33000000u) return static_cast<uint16_t>(sign);

  // Subnormal half: value = significand * 2^(exp - 150) and one half-subnormal
  // unit is 2^-24, so the result is significand >> (126 - exp), rounded.
  const uint32_t exponent = magnitude >> 23;  // 102..112 here
  const uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  uint32_t result = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);  // may round up to 0x0400, the smallest normal
}

constexpr float halfBitsToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x03ffu;

  if (exponent == 0x1fu) {  // Inf, or NaN returned quiet
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal half: normalise; every one is a normal float.
  uint32_t floatExponent = 113;  // 2^-14 biased by 127, before normalising
  while ((mantissa & 0x0400u) == 0) {
    mantissa <<= 1;
    --floatExponent;
  }
  return std::bit_cast<float>(sign | (floatExponent << 23) | ((mantissa & 0x03ffu) << 13));
}

constexpr uint16_t floatToBf16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and top payload, force quiet
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // bfloat16 is the top half of a float, so rounding is an add on the raw
  // bits; overflow carries into the exponent and ends at Inf as it should.
  const uint32_t odd = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + odd) >> 16);
}

constexpr float bf16BitsToFloat(uint16_t bf16) {
  uint32_t bits = static_cast<uint32_t>(bf16) << 16;
  if ((bits & 0x7fffffffu) > 0x7f800000u) bits |= 0x00400000u;  // NaN returned quiet
  return std::bit_cast<float>(bits);
}

}  // namespace tidal
