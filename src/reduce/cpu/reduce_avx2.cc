// The AVX2 kernel family (with F16C for float16), chosen at run time.
//
// Only the functions that use AVX2 carry __attribute__((target)); the file is
// compiled for the baseline ISA. That is deliberate: with a per-file -mavx2,
// any inline function or template this file shares with others (element_ops.h,
// half.h, the standard library) could be emitted with AVX2 instructions and
// picked by the linker for the scalar path too, which would then crash on a
// CPU without AVX2. FMA is not enabled at all, so nothing can be contracted.
//
// Each kernel is a scalar head that brings dst to 32-byte alignment (large
// arrays only), a loop over 4 vectors per source per iteration (enough
// independent loads in flight to saturate memory bandwidth), single vectors,
// then a scalar tail; head and tail use element_ops.h, so where the split
// falls never changes a result. Loads stay unaligned: collectives hand us
// chunks at arbitrary element offsets.
#include <cstdint>
#include <type_traits>

#include "reduce/cpu/element_ops.h"
#include "reduce/cpu/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define TIDAL_HAVE_AVX2_KERNELS 1
#else
#define TIDAL_HAVE_AVX2_KERNELS 0
#endif

namespace tidal::cpu {

#if TIDAL_HAVE_AVX2_KERNELS

#define TIDAL_AVX2 __attribute__((target("avx2,f16c")))

namespace {

// ---------------------------------------------------------------------------
// Arithmetic on registers: each must reproduce combine<kOp> in element_ops.h.

// max/min: vmaxps(a, b) is (a > b ? a : b) and vminps(a, b) is (a < b ? a : b),
// exactly the scalar definition for ordered inputs; unordered lanes take a + b.
template <tidalRedOp_t kOp>
TIDAL_AVX2 inline __m256 combinePs(__m256 a, __m256 b) {
  if constexpr (kOp == tidalProd) {
    return _mm256_mul_ps(a, b);
  } else if constexpr (kOp == tidalMax || kOp == tidalMin) {
    const __m256 picked = kOp == tidalMax ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
    const __m256 unordered = _mm256_cmp_ps(a, b, _CMP_UNORD_Q);
    return _mm256_blendv_ps(picked, _mm256_add_ps(a, b), unordered);
  } else {
    return _mm256_add_ps(a, b);
  }
}

template <tidalRedOp_t kOp>
TIDAL_AVX2 inline __m256d combinePd(__m256d a, __m256d b) {
  if constexpr (kOp == tidalProd) {
    return _mm256_mul_pd(a, b);
  } else if constexpr (kOp == tidalMax || kOp == tidalMin) {
    const __m256d picked = kOp == tidalMax ? _mm256_max_pd(a, b) : _mm256_min_pd(a, b);
    const __m256d unordered = _mm256_cmp_pd(a, b, _CMP_UNORD_Q);
    return _mm256_blendv_pd(picked, _mm256_add_pd(a, b), unordered);
  } else {
    return _mm256_add_pd(a, b);
  }
}

// AVX2 has no 8-bit multiply. The low byte of a 16-bit product depends only
// on the low bytes of its factors, so multiply the even bytes in place and
// the odd bytes shifted down, then keep the low byte of each.
TIDAL_AVX2 inline __m256i mulWrapEpi8(__m256i a, __m256i b) {
  const __m256i even = _mm256_mullo_epi16(a, b);
  const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00ff)),
                         _mm256_slli_epi16(odd, 8));
}

// Nor a 64-bit one: (aHi*2^32 + aLo)(bHi*2^32 + bLo) mod 2^64
//   = aLo*bLo + ((aLo*bHi + aHi*bLo) mod 2^32) * 2^32.
TIDAL_AVX2 inline __m256i mulWrapEpi64(__m256i a, __m256i b) {
  const __m256i low = _mm256_mul_epu32(a, b);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)),
                                         _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b));
  return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
}

template <typename T, tidalRedOp_t kOp>
TIDAL_AVX2 inline __m256i combineInt(__m256i a, __m256i b) {
  constexpr size_t kBytes = sizeof(T);
  constexpr bool kSigned = std::is_signed_v<T>;
  static_assert(kBytes == 1 || kBytes == 4 || kBytes == 8);
  if constexpr (kOp == tidalSum) {
    if constexpr (kBytes == 1) return _mm256_add_epi8(a, b);
    if constexpr (kBytes == 4) return _mm256_add_epi32(a, b);
    if constexpr (kBytes == 8) return _mm256_add_epi64(a, b);
  } else if constexpr (kOp == tidalProd) {
    if constexpr (kBytes == 1) return mulWrapEpi8(a, b);
    if constexpr (kBytes == 4) return _mm256_mullo_epi32(a, b);
    if constexpr (kBytes == 8) return mulWrapEpi64(a, b);
  } else if constexpr (kBytes == 8) {
    // No 64-bit min/max either; only a signed compare, so unsigned values are
    // biased by 2^63 first, which maps unsigned order onto signed order.
    __m256i x = a;
    __m256i y = b;
    if constexpr (!kSigned) {
      const __m256i bias = _mm256_set1_epi64x(INT64_MIN);
      x = _mm256_xor_si256(a, bias);
      y = _mm256_xor_si256(b, bias);
    }
    const __m256i aGreater = _mm256_cmpgt_epi64(x, y);
    return kOp == tidalMax ? _mm256_blendv_epi8(b, a, aGreater)
                           : _mm256_blendv_epi8(a, b, aGreater);
  } else if constexpr (kOp == tidalMax) {
    if constexpr (kBytes == 1) return kSigned ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
    if constexpr (kBytes == 4) return kSigned ? _mm256_max_epi32(a, b) : _mm256_max_epu32(a, b);
  } else {
    if constexpr (kBytes == 1) return kSigned ? _mm256_min_epi8(a, b) : _mm256_min_epu8(a, b);
    if constexpr (kBytes == 4) return kSigned ? _mm256_min_epi32(a, b) : _mm256_min_epu32(a, b);
  }
}

// ---------------------------------------------------------------------------
// Formats: how kLanes elements of a type load into and store from a register
// the arithmetic above works on. kDivides says whether the format divides in
// vector form; integer division has no SIMD instruction and stays scalar.

struct Float32Format {
  static constexpr tidalDataType_t kType = tidalFloat32;
  static constexpr size_t kLanes = 8;
  static constexpr bool kDivides = true;
  using Reg = __m256;
  using DivisorReg = __m256;
  TIDAL_AVX2 static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  TIDAL_AVX2 static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  template <tidalRedOp_t kOp>
  TIDAL_AVX2 static Reg combine(Reg a, Reg b) {
    return combinePs<kOp>(a, b);
  }
  TIDAL_AVX2 static Reg divisor(int d) { return _mm256_set1_ps(static_cast<float>(d)); }
  TIDAL_AVX2 static Reg divide(Reg v, Reg d) { return _mm256_div_ps(v, d); }
};

struct Float64Format {
  static constexpr tidalDataType_t kType = tidalFloat64;
  static constexpr size_t kLanes = 4;
  static constexpr bool kDivides = true;
  using Reg = __m256d;
  using DivisorReg = __m256d;
  TIDAL_AVX2 static Reg load(const double* p) { return _mm256_loadu_pd(p); }
  TIDAL_AVX2 static void store(double* p, Reg v) { _mm256_storeu_pd(p, v); }
  template <tidalRedOp_t kOp>
  TIDAL_AVX2 static Reg combine(Reg a, Reg b) {
    return combinePd<kOp>(a, b);
  }
  TIDAL_AVX2 static Reg divisor(int d) { return _mm256_set1_pd(static_cast<double>(d)); }
  TIDAL_AVX2 static Reg divide(Reg v, Reg d) { return _mm256_div_pd(v, d); }
};

// float16 and bfloat16 compute as float; only loading and storing differ.
struct WidenedToFloat {
  static constexpr size_t kLanes = 8;
  static constexpr bool kDivides = true;
  using Reg = __m256;
  using DivisorReg = __m256;
  template <tidalRedOp_t kOp>
  TIDAL_AVX2 static Reg combine(Reg a, Reg b) {
    return combinePs<kOp>(a, b);
  }
  TIDAL_AVX2 static Reg divisor(int d) { return _mm256_set1_ps(static_cast<float>(d)); }
  TIDAL_AVX2 static Reg divide(Reg v, Reg d) { return _mm256_div_ps(v, d); }
};

struct Float16Format : WidenedToFloat {
  static constexpr tidalDataType_t kType = tidalFloat16;
  TIDAL_AVX2 static Reg load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // The immediate rounding mode (nearest-even) overrides MXCSR.
  TIDAL_AVX2 static void store(uint16_t* p, Reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

// bfloat16 moves 16 elements per 256-bit load, as two float registers. The
// unpack on load and the pack on store both work within 128-bit lanes, and
// one undoes the other, so elements come back in their original order
// without a cross-lane permute: lo holds elements 0-3 and 8-11, hi 4-7 and
// 12-15, and packus(lo, hi) restores 0-7 | 8-15.
struct Bfloat16Format {
  static constexpr tidalDataType_t kType = tidalBfloat16;
  static constexpr size_t kLanes = 16;
  static constexpr bool kDivides = true;
  struct Reg {
    __m256 lo, hi;
  };
  using DivisorReg = __m256;

  // A bfloat16 is the top half of a float: interleave zeros below it. A
  // signalling NaN is not quieted here as bf16BitsToFloat does; every op sends
  // NaNs through an arithmetic instruction, which quiets them, so the stored
  // bits agree regardless.
  TIDAL_AVX2 static Reg load(const uint16_t* p) {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, packed)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, packed))};
  }
  TIDAL_AVX2 static void store(uint16_t* p, Reg v) {
    const __m256i packed = _mm256_packus_epi32(roundToTop(v.lo), roundToTop(v.hi));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
  }
  template <tidalRedOp_t kOp>
  TIDAL_AVX2 static Reg combine(Reg a, Reg b) {
    return {combinePs<kOp>(a.lo, b.lo), combinePs<kOp>(a.hi, b.hi)};
  }
  TIDAL_AVX2 static __m256 divisor(int d) { return _mm256_set1_ps(static_cast<float>(d)); }
  TIDAL_AVX2 static Reg divide(Reg v, __m256 d) {
    return {_mm256_div_ps(v.lo, d), _mm256_div_ps(v.hi, d)};
  }

 private:
  // floatToBf16Bits in vector form, leaving each result in the low 16 bits of
  // its 32-bit lane (where packus, which saturates, passes it through intact):
  // add 0x7fff plus the lowest kept bit (round to nearest even), except for
  // NaNs, which keep their top bits and are made quiet.
  TIDAL_AVX2 static __m256i roundToTop(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    const __m256i quietNan = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
    const __m256 isNan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256i chosen = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quietNan), isNan));
    return _mm256_srli_epi32(chosen, 16);
  }
};

template <tidalDataType_t kIntType>
struct IntFormat {
  using T = typename Element<kIntType>::Storage;
  static constexpr tidalDataType_t kType = kIntType;
  static constexpr size_t kLanes = 32 / sizeof(T);
  static constexpr bool kDivides = false;
  using Reg = __m256i;
  using DivisorReg = __m256i;  // unused: integers divide in scalar code
  TIDAL_AVX2 static Reg load(const T* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  TIDAL_AVX2 static void store(T* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  template <tidalRedOp_t kOp>
  TIDAL_AVX2 static Reg combine(Reg a, Reg b) {
    return combineInt<T, kOp>(a, b);
  }
};

template <tidalDataType_t kType>
struct FormatOf {
  using type = IntFormat<kType>;
};
// FP8 is not vectorised: reduceAvx2 / divideAvx2 hand it to the scalar family
// (FormatOf is never instantiated for it; the default would be integer maths).
template <tidalDataType_t kType>
inline constexpr bool kScalarOnly = kType == tidalFloat8e4m3 || kType == tidalFloat8e5m2;
template <>
struct FormatOf<tidalFloat32> {
  using type = Float32Format;
};
template <>
struct FormatOf<tidalFloat64> {
  using type = Float64Format;
};
template <>
struct FormatOf<tidalFloat16> {
  using type = Float16Format;
};
template <>
struct FormatOf<tidalBfloat16> {
  using type = Bfloat16Format;
};

// ---------------------------------------------------------------------------
// Loops.

// How many leading elements to do in scalar code so that dst is 32-byte
// aligned for the vector loop. A store that straddles two cache lines costs
// two, and malloc'd buffers are typically 16 mod 32; the sources usually share
// dst's alignment, so they line up too. Results do not depend on the split.
template <typename S>
size_t alignmentPeel(const S* dst, size_t count, size_t minCount) {
  const size_t misalignment = reinterpret_cast<uintptr_t>(dst) % 32;
  if (count < minCount || misalignment == 0 || misalignment % sizeof(S) != 0) return 0;
  return (32 - misalignment) / sizeof(S);
}

template <class Fmt, tidalRedOp_t kOp, bool kDivide, typename S>
TIDAL_AVX2 inline typename Fmt::Reg combineAt(const S* x, const S* y, size_t i,
                                              typename Fmt::DivisorReg div) {
  typename Fmt::Reg r = Fmt::template combine<kOp>(Fmt::load(x + i), Fmt::load(y + i));
  if constexpr (kDivide) r = Fmt::divide(r, div);
  return r;
}

template <class Fmt, tidalRedOp_t kOp, bool kDivide>
TIDAL_AVX2 void reduceVectors(void* dst, const void* a, const void* b, size_t count, int divisor) {
  using S = typename Element<Fmt::kType>::Storage;
  using Reg = typename Fmt::Reg;
  constexpr size_t kLanes = Fmt::kLanes;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  typename Fmt::DivisorReg div{};
  if constexpr (kDivide) div = Fmt::divisor(divisor);

  size_t i = alignmentPeel<S>(d, count, 8 * kLanes);
  reduceElements<Fmt::kType, kOp, kDivide>(d, x, y, i, divisor);
  for (; i + 4 * kLanes <= count; i += 4 * kLanes) {
    // All loads of this block happen before its stores, which is what makes
    // dst == a or dst == b safe (and costs nothing: the registers are free).
    const Reg r0 = combineAt<Fmt, kOp, kDivide>(x, y, i, div);
    const Reg r1 = combineAt<Fmt, kOp, kDivide>(x, y, i + kLanes, div);
    const Reg r2 = combineAt<Fmt, kOp, kDivide>(x, y, i + 2 * kLanes, div);
    const Reg r3 = combineAt<Fmt, kOp, kDivide>(x, y, i + 3 * kLanes, div);
    Fmt::store(d + i, r0);
    Fmt::store(d + i + kLanes, r1);
    Fmt::store(d + i + 2 * kLanes, r2);
    Fmt::store(d + i + 3 * kLanes, r3);
  }
  for (; i + kLanes <= count; i += kLanes)
    Fmt::store(d + i, combineAt<Fmt, kOp, kDivide>(x, y, i, div));
  reduceElements<Fmt::kType, kOp, kDivide>(d + i, x + i, y + i, count - i, divisor);
}

template <class Fmt>
TIDAL_AVX2 void divideVectors(void* dst, const void* src, size_t count, int divisor) {
  using S = typename Element<Fmt::kType>::Storage;
  using Reg = typename Fmt::Reg;
  constexpr size_t kLanes = Fmt::kLanes;
  auto* d = static_cast<S*>(dst);
  const auto* s = static_cast<const S*>(src);
  const typename Fmt::DivisorReg div = Fmt::divisor(divisor);

  size_t i = alignmentPeel<S>(d, count, 8 * kLanes);
  divideElements<Fmt::kType>(d, s, i, divisor);
  for (; i + 4 * kLanes <= count; i += 4 * kLanes) {
    const Reg r0 = Fmt::divide(Fmt::load(s + i), div);
    const Reg r1 = Fmt::divide(Fmt::load(s + i + kLanes), div);
    const Reg r2 = Fmt::divide(Fmt::load(s + i + 2 * kLanes), div);
    const Reg r3 = Fmt::divide(Fmt::load(s + i + 3 * kLanes), div);
    Fmt::store(d + i, r0);
    Fmt::store(d + i + kLanes, r1);
    Fmt::store(d + i + 2 * kLanes, r2);
    Fmt::store(d + i + 3 * kLanes, r3);
  }
  for (; i + kLanes <= count; i += kLanes) Fmt::store(d + i, Fmt::divide(Fmt::load(s + i), div));
  divideElements<Fmt::kType>(d + i, s + i, count - i, divisor);
}

}  // namespace

bool avx2Supported() {
  __builtin_cpu_init();  // idempotent; needed if we run before libgcc's constructor
  // libgcc reports avx2 only when the OS also saves YMM state (XCR0). Not
  // every compiler knows "f16c" as a feature name, so read CPUID for it.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && f16c;
}

void reduceAvx2(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                tidalRedOp_t op, int divisor) {
  visitType(type, [&](auto typeTag) {
    constexpr tidalDataType_t kType = decltype(typeTag)::value;
    if constexpr (kScalarOnly<kType>) {
      reduceScalar(dst, a, b, count, type, op, divisor);
    } else {
      using Fmt = typename FormatOf<kType>::type;
      visitOp(op, [&](auto opTag) {
        constexpr tidalRedOp_t kOp = decltype(opTag)::value;
        if (divisor == 0) {
          reduceVectors<Fmt, kOp, false>(dst, a, b, count, divisor);
        } else if constexpr (Fmt::kDivides) {
          reduceVectors<Fmt, kOp, true>(dst, a, b, count, divisor);
        } else {
          reduceScalar(dst, a, b, count, type, op, divisor);
        }
      });
    }
  });
}

void divideAvx2(void* dst, const void* src, size_t count, tidalDataType_t type, int divisor) {
  visitType(type, [&](auto typeTag) {
    constexpr tidalDataType_t kType = decltype(typeTag)::value;
    if constexpr (!kScalarOnly<kType>) {
      using Fmt = typename FormatOf<kType>::type;
      if constexpr (Fmt::kDivides) {
        if (divisor != 0) return divideVectors<Fmt>(dst, src, count, divisor);
      }
    }
    divideScalar(dst, src, count, type, divisor);
  });
}

#else  // not x86: the family exists so callers link, but is never selected.

bool avx2Supported() { return false; }

void reduceAvx2(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                tidalRedOp_t op, int divisor) {
  reduceScalar(dst, a, b, count, type, op, divisor);
}

void divideAvx2(void* dst, const void* src, size_t count, tidalDataType_t type, int divisor) {
  divideScalar(dst, src, count, type, divisor);
}

#endif

}  // namespace tidal::cpu
