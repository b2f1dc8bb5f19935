// The unique id's encoding, its rejection of garbage, and secret handling.
#include "bootstrap/unique_id.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"

namespace tidal {
namespace {

UniqueId sampleId(const char* hostPort) {
  UniqueId id;
  id.root = SocketAddress::parse(hostPort);
  for (size_t i = 0; i < id.secret.size(); ++i) id.secret[i] = static_cast<uint8_t>(0xa0 + i);
  return id;
}

void expectRejected(const tidalUniqueId& raw, const std::string& why) {
  try {
    decodeUniqueId(raw);
    FAIL() << "decode accepted " << why;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument) << why;
    EXPECT_EQ(std::string(e.what()).rfind("commId", 0), 0u) << why << ": " << e.what();
  }
}

TEST(UniqueId, RoundTripIpv4) {
  const UniqueId id = sampleId("10.1.2.3:4312");
  const UniqueId back = decodeUniqueId(encodeUniqueId(id));
  EXPECT_EQ(back.root.toString(), "10.1.2.3:4312");
  EXPECT_TRUE(back.root == id.root);
  EXPECT_EQ(back.secret, id.secret);
}

TEST(UniqueId, RoundTripIpv6) {
  const UniqueId id = sampleId("[fd00::2]:65535");
  const UniqueId back = decodeUniqueId(encodeUniqueId(id));
  EXPECT_EQ(back.root.toString(), "[fd00::2]:65535");
  EXPECT_EQ(back.secret, id.secret);
}

TEST(UniqueId, RejectsZerosAndRandomBytes) {
  tidalUniqueId raw{};
  expectRejected(raw, "all zeros");
  std::mt19937 rng(42);
  for (int trial = 0; trial < 100; ++trial) {
    for (auto& c : raw.internal) c = static_cast<char>(rng());
    expectRejected(raw, "random bytes");
  }
}

TEST(UniqueId, RejectsEverySingleBitFlip) {
  const tidalUniqueId good = encodeUniqueId(sampleId("192.168.7.9:29500"));
  for (size_t byte = 0; byte < sizeof good.internal; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      tidalUniqueId bad = good;
      bad.internal[byte] = static_cast<char>(bad.internal[byte] ^ (1 << bit));
      expectRejected(bad, "bit " + std::to_string(bit) + " of byte " + std::to_string(byte));
    }
  }
}

TEST(UniqueId, RejectsAnUnconnectableRoot) {
  UniqueId id = sampleId("10.0.0.1:1");
  id.root.setPort(0);
  expectRejected(encodeUniqueId(id), "port 0");
  expectRejected(encodeUniqueId(sampleId("0.0.0.0:99")), "wildcard root");
}

TEST(Secret, HexRoundTrip) {
  const Secret s = randomSecret();
  const std::string hex = secretToHex(s);
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_EQ(parseSecret(hex, "test"), s);
  EXPECT_EQ(secretToHex(parseSecret("00112233445566778899AABBCCDDEEFF", "test")),
            "00112233445566778899aabbccddeeff");
}

TEST(Secret, ParseRejectsBadHexNamingTheSource) {
  for (const char* bad :
       {"", "abc", "00112233445566778899aabbccddeef", "00112233445566778899aabbccddeeff0",
        "00112233445566778899aabbccddeefg", "0x112233445566778899aabbccddeeff"}) {
    try {
      parseSecret(bad, "TIDAL_SECRET");
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("TIDAL_SECRET"), std::string::npos);
    }
  }
}

TEST(Secret, RandomSecretsDifferAndCompare) {
  const Secret a = randomSecret(), b = randomSecret();
  EXPECT_NE(a, b);
  EXPECT_NE(a, Secret{});
  EXPECT_TRUE(secretsEqual(a, a));
  EXPECT_FALSE(secretsEqual(a, b));
  Secret c = a;
  c[15] ^= 1;
  EXPECT_FALSE(secretsEqual(a, c));
}

}  // namespace
}  // namespace tidal

namespace tidal {
namespace {

// Every survivor of a shrink must derive the same secret without talking,
// and it must differ from the parent's and from every other shrink's.
TEST(DerivedSecret, SameInputsSameSecretAndEveryInputMatters) {
  const Secret parent = randomSecret();
  const Secret a = deriveSecret(parent, "tidalCommShrink", 1);
  EXPECT_TRUE(secretsEqual(a, deriveSecret(parent, "tidalCommShrink", 1)));
  EXPECT_FALSE(secretsEqual(a, parent));
  EXPECT_FALSE(secretsEqual(a, deriveSecret(parent, "tidalCommShrink", 2)));
  EXPECT_FALSE(secretsEqual(a, deriveSecret(parent, "tidalCommGrow", 1)));
  Secret other = parent;
  other[15] ^= 1;
  EXPECT_FALSE(secretsEqual(a, deriveSecret(other, "tidalCommShrink", 1)));
  // Both halves depend on every parent byte (no byte passes through unmixed).
  for (size_t i = 0; i < parent.size(); ++i) {
    Secret flipped = parent;
    flipped[i] ^= 0x80;
    const Secret d = deriveSecret(flipped, "tidalCommShrink", 1);
    int sameBytes = 0;
    for (size_t j = 0; j < d.size(); ++j) sameBytes += d[j] == a[j];
    EXPECT_LT(sameBytes, 6) << "flipping byte " << i;
  }
}

}  // namespace
}  // namespace tidal
