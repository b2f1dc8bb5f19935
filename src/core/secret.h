// The job's 128-bit secret. Every connection a job makes, bootstrap or data,
// presents it in its hello (net/hello_acceptor.h) and is refused without it;
// it reaches the ranks in the unique id or from the launcher.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tidal {

using Secret = std::array<uint8_t, 16>;

// Fresh secret from the kernel's random source (getrandom).
Secret randomSecret();
// Parses 32 hex digits; throws InvalidArgument naming `what` otherwise.
Secret parseSecret(const std::string& hex, const std::string& what);
std::string secretToHex(const Secret& secret);

// Constant-time comparison, so a stranger cannot time its way to the secret.
bool secretsEqual(const Secret& a, const Secret& b);

}  // namespace tidal
