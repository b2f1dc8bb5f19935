// The content of a tidalUniqueId: format version, the rendezvous root's
// address and the job's 128-bit random secret. Every connection a job makes,
// bootstrap or data, presents the secret and is refused without it.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/socket.h"
#include "tidal/tidal.h"

namespace tidal {

using Secret = std::array<uint8_t, 16>;

struct UniqueId {
  SocketAddress root;
  Secret secret{};
};

// Fresh secret from the kernel's random source (getrandom).
Secret randomSecret();
// Parses 32 hex digits; throws InvalidArgument naming `what` otherwise.
Secret parseSecret(const std::string& hex, const std::string& what);
std::string secretToHex(const Secret& secret);

// Serialisation into the opaque 128 bytes. decode() validates magic, version
// and address family and throws InvalidArgument ("commId ...") on garbage.
tidalUniqueId encodeUniqueId(const UniqueId& id);
UniqueId decodeUniqueId(const tidalUniqueId& raw);

// Constant-time comparison, so a stranger cannot time its way to the secret.
bool secretsEqual(const Secret& a, const Secret& b);

}  // namespace tidal
