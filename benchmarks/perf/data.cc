#include "data.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/fp8.h"
#include "core/half.h"

namespace tidal::perf {
namespace {

constexpr unsigned char kSentinelByte = 0xa5;

// Ranges each type holds exactly, and how far the patterns may go in them.
struct Limits {
  double sumLimit;  // largest total a kBoundedSum element may reach
  double wideLow;   // kWide values lie in [wideLow, wideHigh]
  double wideHigh;
  int maxPow2;  // largest product exponent for kPowersOfTwo
};

Limits limitsFor(tidalDataType_t type) {
  constexpr double k2p20 = 1 << 20, k2p21 = 1 << 21, k2p24 = 1 << 24;
  constexpr double k2p40 = static_cast<double>(uint64_t{1} << 40);
  switch (type) {
    case tidalInt8:
      return {127, -128, 127, 6};
    case tidalUint8:
      return {255, 0, 255, 7};
    case tidalInt32:
      return {k2p24, -k2p20, k2p20, 30};
    case tidalUint32:
      return {k2p24, 0, k2p21, 31};
    case tidalInt64:
      return {k2p40, -k2p40, k2p40, 62};
    case tidalUint64:
      return {k2p40, 0, 2 * k2p40, 63};
    case tidalFloat16:
      return {2048, -2048, 2048, 15};  // 11 significant bits, max 65504
    case tidalFloat32:
      return {k2p24, -k2p24, k2p24, 30};
    case tidalFloat64:
      return {k2p40, -k2p40, k2p40, 30};
    case tidalBfloat16:
      return {256, -256, 256, 30};  // 8 significant bits
    case tidalFloat8e4m3:
      return {16, -16, 16, 8};  // 4 significant bits, max 448
    case tidalFloat8e5m2:
      return {8, -8, 8, 15};  // 3 significant bits, max 57344
    default:
      return {0, 0, 0, 0};
  }
}

// A cheap, well-mixed hash of (index, rank, seed) (splitmix64 finaliser).
inline uint64_t mix(uint64_t index, uint64_t rank, uint64_t seed) {
  uint64_t x = index * 0x9e3779b97f4a7c15ull ^ (rank * 0xbf58476d1ce4e5b9ull + seed);
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return x;
}

// The input formula of one pattern, evaluated in double (every value and
// every reduction of values is an integer well inside double's 2^53).
class Generator {
 public:
  explicit Generator(const Pattern& p) : p_(p), limits_(limitsFor(p.type)) {
    const double perRank = limits_.sumLimit / std::max(p.nranks, 1);
    // Values 0 .. sumRange-1: nranks of them never exceed sumLimit. Capped so
    // large integer types still get a spread that exercises carries.
    sumRange_ = static_cast<uint64_t>(std::min(perRank, 65536.0)) + 1;
    wideSpan_ = static_cast<uint64_t>(limits_.wideHigh - limits_.wideLow) + 1;
  }

  double value(int rank, size_t index) const {
    switch (p_.kind) {
      case PatternKind::kBoundedSum:
        return static_cast<double>(mix(index, rank, p_.seed) % sumRange_);
      case PatternKind::kPowersOfTwo:
        // Exactly twos(index) ranks contribute a 2, the others a 1, so the
        // product is 2^twos whatever the order; which ranks rotates with index.
        return (static_cast<uint64_t>(rank) + index) % p_.nranks < twos(index) ? 2.0 : 1.0;
      case PatternKind::kWide:
        return limits_.wideLow + static_cast<double>(mix(index, rank, p_.seed) % wideSpan_);
    }
    return 0;
  }

  // op over all ranks, before any avg division.
  double reduced(size_t index) const {
    double acc = value(0, index);
    for (int r = 1; r < p_.nranks; ++r) {
      const double v = value(r, index);
      switch (p_.op) {
        case tidalSum:
        case tidalAvg:
          acc += v;
          break;
        case tidalProd:
          acc *= v;
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
    return acc;
  }

 private:
  uint64_t twos(size_t index) const {
    const uint64_t k = mix(index, 0, p_.seed) % (static_cast<uint64_t>(limits_.maxPow2) + 1);
    return std::min<uint64_t>(k, static_cast<uint64_t>(p_.nranks));
  }

  Pattern p_;
  Limits limits_;
  uint64_t sumRange_;
  uint64_t wideSpan_;
};

// How each type stores a value, and how the library rounds avg for it.
template <typename S>
struct IntCodec {
  using Storage = S;
  // Through the 64-bit type of the same signedness: 2^63 (a uint64 product)
  // does not fit int64_t.
  using Wide = std::conditional_t<std::is_signed_v<S>, int64_t, uint64_t>;
  static S encode(double v) { return static_cast<S>(static_cast<Wide>(v)); }
  static S average(double sum, int n) {
    return static_cast<S>(static_cast<Wide>(sum) / static_cast<Wide>(n));
  }
};

template <typename F>
struct FloatCodec {
  using Storage = F;
  static F encode(double v) { return static_cast<F>(v); }
  // The sum is exact, so converting it loses nothing; the division rounds once.
  static F average(double sum, int n) { return static_cast<F>(sum) / static_cast<F>(n); }
};

struct HalfCodec {
  using Storage = uint16_t;
  static uint16_t encode(double v) { return floatToHalfBits(static_cast<float>(v)); }
  static uint16_t average(double sum, int n) {
    return floatToHalfBits(static_cast<float>(sum) / static_cast<float>(n));
  }
};

struct Bf16Codec {
  using Storage = uint16_t;
  static uint16_t encode(double v) { return floatToBf16Bits(static_cast<float>(v)); }
  static uint16_t average(double sum, int n) {
    return floatToBf16Bits(static_cast<float>(sum) / static_cast<float>(n));
  }
};

template <uint8_t (*Narrow)(float)>
struct Fp8Codec {
  using Storage = uint8_t;
  static uint8_t encode(double v) { return Narrow(static_cast<float>(v)); }
  static uint8_t average(double sum, int n) {
    return Narrow(static_cast<float>(sum) / static_cast<float>(n));
  }
};

// Function pointers for the template arguments (the conversions are constexpr
// and __host__ __device__ under nvcc).
inline uint8_t narrowE4m3(float v) { return floatToFp8e4m3Bits(v); }
inline uint8_t narrowE5m2(float v) { return floatToFp8e5m2Bits(v); }

template <typename Fn>
auto withCodec(tidalDataType_t type, Fn&& fn) {
  switch (type) {
    case tidalInt8:
      return fn(IntCodec<int8_t>{});
    case tidalUint8:
      return fn(IntCodec<uint8_t>{});
    case tidalInt32:
      return fn(IntCodec<int32_t>{});
    case tidalUint32:
      return fn(IntCodec<uint32_t>{});
    case tidalInt64:
      return fn(IntCodec<int64_t>{});
    case tidalUint64:
      return fn(IntCodec<uint64_t>{});
    case tidalFloat16:
      return fn(HalfCodec{});
    case tidalFloat32:
      return fn(FloatCodec<float>{});
    case tidalFloat64:
      return fn(FloatCodec<double>{});
    case tidalBfloat16:
      return fn(Bf16Codec{});
    case tidalFloat8e4m3:
      return fn(Fp8Codec<narrowE4m3>{});
    case tidalFloat8e5m2:
      return fn(Fp8Codec<narrowE5m2>{});
    default:
      return fn(IntCodec<uint8_t>{});  // unreachable: types come from the option table
  }
}

// Bitwise equality: 0.0 vs -0.0 or two NaNs with different payloads differ.
template <typename S>
bool sameBits(const S& a, const S& b) {
  return std::memcmp(&a, &b, sizeof(S)) == 0;
}

}  // namespace

PatternKind patternFor(tidalRedOp_t op) {
  switch (op) {
    case tidalProd:
      return PatternKind::kPowersOfTwo;
    case tidalMax:
    case tidalMin:
      return PatternKind::kWide;
    default:
      return PatternKind::kBoundedSum;  // sum, avg
  }
}

void fillInput(void* buf, size_t count, const Pattern& p, int rank, size_t firstIndex) {
  const Generator gen(p);
  withCodec(p.type, [&](auto codec) {
    using C = decltype(codec);
    auto* out = static_cast<typename C::Storage*>(buf);
    for (size_t k = 0; k < count; ++k) out[k] = C::encode(gen.value(rank, firstIndex + k));
  });
}

int64_t countWrongInput(const void* buf, size_t count, const Pattern& p, int rank,
                        size_t firstIndex) {
  const Generator gen(p);
  return withCodec(p.type, [&](auto codec) {
    using C = decltype(codec);
    const auto* got = static_cast<const typename C::Storage*>(buf);
    int64_t wrong = 0;
    for (size_t k = 0; k < count; ++k) {
      wrong += !sameBits(got[k], C::encode(gen.value(rank, firstIndex + k)));
    }
    return wrong;
  });
}

int64_t countWrongReduced(const void* buf, size_t count, const Pattern& p, size_t firstIndex) {
  const Generator gen(p);
  return withCodec(p.type, [&](auto codec) {
    using C = decltype(codec);
    const auto* got = static_cast<const typename C::Storage*>(buf);
    int64_t wrong = 0;
    for (size_t k = 0; k < count; ++k) {
      const double r = gen.reduced(firstIndex + k);
      const auto want = p.op == tidalAvg ? C::average(r, p.nranks) : C::encode(r);
      wrong += !sameBits(got[k], want);
    }
    return wrong;
  });
}

void fillSentinel(void* buf, size_t bytes) { std::memset(buf, kSentinelByte, bytes); }

int64_t countWrongSentinel(const void* buf, size_t count, size_t elemSize) {
  const auto* bytes = static_cast<const unsigned char*>(buf);
  int64_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    const unsigned char* e = bytes + k * elemSize;
    wrong += std::any_of(e, e + elemSize, [](unsigned char b) { return b != kSentinelByte; });
  }
  return wrong;
}

}  // namespace tidal::perf
