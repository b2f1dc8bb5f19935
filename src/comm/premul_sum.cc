#include "comm/premul_sum.h"

#include <cstring>
#include <set>

#include "core/error.h"
#include "core/fp8.h"
#include "core/half.h"

namespace tidal {

namespace {

struct LiveIds {
  std::mutex mutex;
  std::set<int> ids;
  int next = tidalNumOps;
};

LiveIds& liveIds() {
  static LiveIds* ids = new LiveIds;  // never destroyed: tables may outlive statics
  return *ids;
}

template <typename T>
void scaleAs(void* dst, const void* src, size_t count, const unsigned char* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof s);
  auto* out = static_cast<T*>(dst);
  const auto* in = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      out[i] = static_cast<T>(static_cast<U>(static_cast<U>(in[i]) * static_cast<U>(s)));
    } else {
      out[i] = in[i] * s;
    }
  }
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void scale16(void* dst, const void* src, size_t count, const unsigned char* scalar) {
  uint16_t bits;
  std::memcpy(&bits, scalar, sizeof bits);
  const float s = Widen(bits);
  auto* out = static_cast<uint16_t*>(dst);
  const auto* in = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < count; ++i) out[i] = Narrow(Widen(in[i]) * s);
}

// FP8: the scalar is one FP8 element too; the product is taken in float and
// rounded once (nearest-even, saturating to max finite, core/fp8.h).
template <float (*Widen)(uint8_t), uint8_t (*Narrow)(float)>
void scale8(void* dst, const void* src, size_t count, const unsigned char* scalar) {
  const float s = Widen(scalar[0]);
  auto* out = static_cast<uint8_t*>(dst);
  const auto* in = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < count; ++i) out[i] = Narrow(Widen(in[i]) * s);
}

float widenE4m3(uint8_t b) { return fp8e4m3BitsToFloat(b); }
uint8_t narrowE4m3(float f) { return floatToFp8e4m3Bits(f); }
float widenE5m2(uint8_t b) { return fp8e5m2BitsToFloat(b); }
uint8_t narrowE5m2(float f) { return floatToFp8e5m2Bits(f); }

float widenHalf(uint16_t b) { return halfBitsToFloat(b); }
uint16_t narrowHalf(float f) { return floatToHalfBits(f); }
float widenBf16(uint16_t b) { return bf16BitsToFloat(b); }
uint16_t narrowBf16(float f) { return floatToBf16Bits(f); }

}  // namespace

RedOpTable::~RedOpTable() {
  LiveIds& live = liveIds();
  std::scoped_lock lock(mutex_, live.mutex);
  for (const auto& [id, op] : ops_) live.ids.erase(id);
}

tidalRedOp_t RedOpTable::add(const PreMulSumOp& op) {
  LiveIds& live = liveIds();
  std::scoped_lock lock(mutex_, live.mutex);
  if (live.next >= static_cast<int>(tidalMaxRedOp)) {
    fail(tidalInvalidUsage, "all {} custom reduction operator ids of this process are used",
         static_cast<int>(tidalMaxRedOp) - tidalNumOps);
  }
  const int id = live.next++;
  live.ids.insert(id);
  ops_.emplace(id, op);
  return static_cast<tidalRedOp_t>(id);
}

std::optional<PreMulSumOp> RedOpTable::find(tidalRedOp_t op) const {
  std::scoped_lock lock(mutex_);
  const auto it = ops_.find(static_cast<int>(op));
  if (it == ops_.end()) return std::nullopt;
  return it->second;
}

bool RedOpTable::remove(tidalRedOp_t op) {
  LiveIds& live = liveIds();
  std::scoped_lock lock(mutex_, live.mutex);
  if (ops_.erase(static_cast<int>(op)) == 0) return false;
  live.ids.erase(static_cast<int>(op));
  return true;
}

bool redOpLiveElsewhere(tidalRedOp_t op) {
  LiveIds& live = liveIds();
  std::scoped_lock lock(live.mutex);
  return live.ids.count(static_cast<int>(op)) > 0;
}

void scaleHost(void* dst, const void* src, size_t count, tidalDataType_t type,
               const unsigned char* scalar) {
  switch (type) {
    case tidalInt8:
      return scaleAs<int8_t>(dst, src, count, scalar);
    case tidalUint8:
      return scaleAs<uint8_t>(dst, src, count, scalar);
    case tidalInt32:
      return scaleAs<int32_t>(dst, src, count, scalar);
    case tidalUint32:
      return scaleAs<uint32_t>(dst, src, count, scalar);
    case tidalInt64:
      return scaleAs<int64_t>(dst, src, count, scalar);
    case tidalUint64:
      return scaleAs<uint64_t>(dst, src, count, scalar);
    case tidalFloat16:
      return scale16<widenHalf, narrowHalf>(dst, src, count, scalar);
    case tidalFloat32:
      return scaleAs<float>(dst, src, count, scalar);
    case tidalFloat64:
      return scaleAs<double>(dst, src, count, scalar);
    case tidalBfloat16:
      return scale16<widenBf16, narrowBf16>(dst, src, count, scalar);
    case tidalFloat8e4m3:
      return scale8<widenE4m3, narrowE4m3>(dst, src, count, scalar);
    case tidalFloat8e5m2:
      return scale8<widenE5m2, narrowE5m2>(dst, src, count, scalar);
    default:
      fail(tidalInternalError, "scaleHost: datatype {} has no scaling", static_cast<int>(type));
  }
}

}  // namespace tidal
