#include "core/secret.h"

#include <sys/random.h>

#include <cerrno>

#include "core/error.h"

namespace tidal {

namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

Secret deriveSecret(const Secret& parent, std::string_view label, uint64_t counter) {
  uint64_t halves[2] = {0, 0};
  for (size_t i = 0; i < parent.size(); ++i) {
    halves[i / 8] |= static_cast<uint64_t>(parent[i]) << (8 * (i % 8));
  }
  // Absorb the label and counter, then stir both halves into each other.
  uint64_t h = mix64(counter ^ (static_cast<uint64_t>(label.size()) << 56));
  for (char c : label) h = mix64(h ^ static_cast<uint8_t>(c));
  uint64_t a = mix64(halves[0] ^ h), b = mix64(halves[1] ^ mix64(h ^ a));
  for (int round = 0; round < 4; ++round) {
    a = mix64(a ^ b);
    b = mix64(b ^ a ^ halves[round & 1]);
  }
  Secret out{};
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>((i < 8 ? a : b) >> (8 * (i % 8)));
  }
  return out;
}

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

}  // namespace tidal
