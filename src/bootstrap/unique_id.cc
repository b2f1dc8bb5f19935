#include "bootstrap/unique_id.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "net/wire.h"

namespace tidal {

namespace {

// Layout of the 128 opaque bytes (little-endian):
//   0  magic "TDID"         4  format version     6  reserved (0)
//   8  root address (24)   32  secret (16)        48  FNV-1a of bytes 0..47
//  52  zero up to 128
// The checksum and the zero tail let decode() reject a truncated or
// corrupted id instead of dialling a random address.
constexpr uint32_t kUniqueIdMagic = 0x44494454u;  // "TDID"
constexpr uint16_t kUniqueIdVersion = 1;
constexpr size_t kChecksummedBytes = 48;

uint32_t fnv1a(const uint8_t* data, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 16777619u;
  }
  return h;
}

}  // namespace

tidalUniqueId encodeUniqueId(const UniqueId& id) {
  std::vector<uint8_t> v;
  wire::Writer w(v);
  w.u32(kUniqueIdMagic);
  w.u16(kUniqueIdVersion);
  w.u16(0);
  w.address(id.root);
  w.bytes(id.secret.data(), id.secret.size());
  w.u32(fnv1a(v.data(), kChecksummedBytes));
  tidalUniqueId raw{};
  std::memcpy(raw.internal, v.data(), v.size());
  return raw;
}

UniqueId decodeUniqueId(const tidalUniqueId& raw) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(raw.internal);
  wire::Reader r(bytes, sizeof raw.internal, "commId");
  const uint32_t magic = r.u32();
  if (magic != kUniqueIdMagic) {
    fail(tidalInvalidArgument,
         "commId: bad magic 0x{:08x}; it was not made by tidalGetUniqueId or was corrupted in "
         "transit (copy all {} bytes)",
         magic, TIDAL_UNIQUE_ID_BYTES);
  }
  const uint16_t version = r.u16();
  if (version != kUniqueIdVersion) {
    fail(tidalInvalidArgument, "commId: format version {} (this library reads version {})", version,
         kUniqueIdVersion);
  }
  const uint16_t reserved = r.u16();
  UniqueId id;
  id.root = r.address();
  r.bytes(id.secret.data(), id.secret.size());
  const uint32_t checksum = r.u32();
  if (reserved != 0 || checksum != fnv1a(bytes, kChecksummedBytes)) {
    fail(tidalInvalidArgument, "commId: checksum mismatch; the id was corrupted in transit");
  }
  for (size_t i = sizeof raw.internal - r.left(); i < sizeof raw.internal; ++i) {
    if (bytes[i] != 0) {
      fail(tidalInvalidArgument, "commId: unexpected data in the unused tail at byte {}", i);
    }
  }
  if (id.root.port() == 0 || id.root.isWildcard()) {
    fail(tidalInvalidArgument, "commId: root address {} cannot be connected to",
         id.root.toString());
  }
  return id;
}

}  // namespace tidal
