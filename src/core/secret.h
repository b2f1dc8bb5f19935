// The job's 128-bit secret. Every connection a job makes, bootstrap or data,
// presents it in its hello (net/hello_acceptor.h) and is refused without it;
// it reaches the ranks in the unique id or from the launcher.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tidal {

using Secret = std::array<uint8_t, 16>;

// Fresh secret from the kernel's random source (getrandom).
Secret randomSecret();
// Parses 32 hex digits; throws InvalidArgument naming `what` otherwise.
Secret parseSecret(const std::string& hex, const std::string& what);
std::string secretToHex(const Secret& secret);

// A secret for a communicator made from this one without talking to anyone
// (tidalCommShrink): every survivor derives the same value from the parent's
// secret, a purpose label and a counter, and it differs from the parent's, so
// a connection meant for one rendezvous is refused by the other. The mixing
// is a keyed 64-bit permutation (splitmix64 rounds), not a cryptographic MAC:
// like the secret itself, which travels in clear in every hello, it guards
// against strangers and mix-ups, not against someone who reads the traffic.
Secret deriveSecret(const Secret& parent, std::string_view label, uint64_t counter);

// Constant-time comparison, so a stranger cannot time its way to the secret.
bool secretsEqual(const Secret& a, const Secret& b);

}  // namespace tidal
