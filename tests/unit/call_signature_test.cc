// The text a mismatch produces: both calls, each rank's call number, and
// what differs; a record that is not a signature is named as such.
#include "engine/call_signature.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace tidal {
namespace {

TEST(CallSignature, StartsWithItsMarker) {
  const auto s =
      CallSignature::make(CallKind::AllReduce, 0, 1, tidalFloat32, tidalSum, CallSignature::kNone);
  uint64_t first = 0;
  std::memcpy(&first, &s, sizeof first);
  EXPECT_EQ(first, CallSignature::kMagic);
  // "TIDALSIG" in memory, so a dump of the stream shows it.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&s), 8), "TIDALSIG");
}

// The data a record carries for the link's first transfer is not part of
// the call: two ranks of one AllReduce send each other different inputs.
TEST(CallSignature, InlineDataIsNotPartOfTheCall) {
  auto a =
      CallSignature::make(CallKind::AllReduce, 3, 2, tidalFloat32, tidalSum, CallSignature::kNone);
  auto b = a;
  a.inlineBytes = 8;
  a.inlineData[0] = 1;
  b.inlineBytes = 8;
  b.inlineData[0] = 2;
  EXPECT_EQ(a.differences(b), "");
  EXPECT_FALSE(signatureMismatch(0, a, 1, b).has_value());
  b.count = 4;
  EXPECT_EQ(a.differences(b), "count");
}

// Where the buffers are is part of the call: a rank that passes host
// buffers where its peer passes device buffers is named as such.
TEST(CallSignature, HostAgainstDeviceBuffersIsAMismatch) {
  auto host =
      CallSignature::make(CallKind::AllReduce, 0, 8, tidalFloat32, tidalSum, CallSignature::kNone);
  auto device = host;
  device.memory = CallSignature::kDeviceMemory;
  EXPECT_EQ(host.describe(), "AllReduce(count 8, float, sum)");
  EXPECT_EQ(device.describe(), "AllReduce(count 8, float, sum, device buffers)");
  const auto text = signatureMismatch(0, host, 1, device);
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("rank 1 called AllReduce(count 8, float, sum, device buffers)"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("differ in: host or device buffers"), std::string::npos) << *text;
}

TEST(CallSignature, MatchingCallsAreNotAMismatch) {
  const auto a =
      CallSignature::make(CallKind::Broadcast, 16, 100, tidalFloat32, CallSignature::kNone, 1);
  EXPECT_FALSE(signatureMismatch(0, a, 1, a).has_value());
}

TEST(CallSignature, ACountMismatchNamesBothCallsAndTheirNumbers) {
  const auto mine = CallSignature::make(CallKind::AllReduce, 16, 100, tidalFloat32, tidalSum,
                                        CallSignature::kNone);
  const auto theirs = CallSignature::make(CallKind::AllReduce, 16, 200, tidalFloat32, tidalSum,
                                          CallSignature::kNone);
  const auto text = signatureMismatch(0, mine, 1, theirs);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text,
            "mismatched collective: rank 1 called AllReduce(count 200, float, sum) as call #17; "
            "rank 0 called AllReduce(count 100, float, sum) as call #17 (they differ in: count)");
}

TEST(CallSignature, EveryDifferingFieldIsListed) {
  const auto mine = CallSignature::make(CallKind::Reduce, 3, 10, tidalFloat32, tidalSum, 0);
  const auto theirs =
      CallSignature::make(CallKind::Broadcast, 4, 10, tidalInt32, CallSignature::kNone, 2);
  const auto text = signatureMismatch(2, mine, 3, theirs);
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("rank 3 called Broadcast(count 10, int32, root 2) as call #5"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("rank 2 called Reduce(count 10, float, sum, root 0) as call #4"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("collective, call number, datatype, op, root"), std::string::npos) << *text;
}

TEST(CallSignature, BytesThatAreNotASignatureAreNamedAsSuch) {
  const auto mine = CallSignature::make(CallKind::Barrier, 0, 0, CallSignature::kNone,
                                        CallSignature::kNone, CallSignature::kNone);
  CallSignature garbage{};
  garbage.magic = 0x3f800000;  // a float 1.0 where the record should be
  const auto text = signatureMismatch(1, mine, 0, garbage);
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("rank 1 called Barrier() as call #1"), std::string::npos) << *text;
  EXPECT_NE(text->find("not a collective's signature"), std::string::npos) << *text;
}

TEST(CallSignature, ValuesOffTheWireAreNamedEvenWhenInvalid) {
  auto theirs = CallSignature::make(CallKind::AllReduce, 0, 1, 99, -7, CallSignature::kNone);
  EXPECT_EQ(theirs.describe(), "AllReduce(count 1, datatype 99, op -7)");
  theirs.kind = 234;
  EXPECT_EQ(theirs.describe(), "an unknown collective(count 1, datatype 99, op -7)");
}

}  // namespace
}  // namespace tidal
