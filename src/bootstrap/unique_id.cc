#include "bootstrap/unique_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "bootstrap/wire.h"
#include "core/error.h"

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

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Secret randomSecret() {
  Secret s{};
  size_t filled = 0;
  while (filled < s.size()) {
    const ssize_t n = ::getrandom(s.data() + filled, s.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(tidalSystemError, "getrandom failed: {}", errnoText(errno));
    }
    filled += static_cast<size_t>(n);
  }
  return s;
}

Secret parseSecret(const std::string& hex, const std::string& what) {
  Secret s{};
  if (hex.size() != 2 * s.size()) {
    fail(tidalInvalidArgument, "{}: secret must be {} hex digits, got {} characters", what,
         2 * s.size(), hex.size());
  }
  for (size_t i = 0; i < s.size(); ++i) {
    const int hi = hexValue(hex[2 * i]), lo = hexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      fail(tidalInvalidArgument, "{}: secret has a non-hex character at position {}", what,
           hi < 0 ? 2 * i : 2 * i + 1);
    }
    s[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return s;
}

std::string secretToHex(const Secret& secret) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : secret) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

bool secretsEqual(const Secret& a, const Secret& b) {
  // Accumulate every difference; no early exit, so timing reveals nothing.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

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
