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

}  // namespace tidal
