// Send/Recv message numbers: each Send's header carries which of the
// sender's Sends to that peer it is, and a checking Recv refuses a header
// whose number is not the one it expects (collectives/p2p.cc). Built with the
// real schedule builders and run by the real engine over a receive
// connection whose delivered bytes the test decides.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "core/error.h"
#include "engine/call_signature.h"
#include "engine/engine.h"
#include "scripted_connection.h"

namespace tidal {
namespace {

using test::ScriptedConnection;
using Script = ScriptedConnection::Script;

constexpr coll::P2pFraming kChecking{1 << 20, /*inlineSmall=*/true, /*checkTypes=*/true};
constexpr coll::P2pFraming kUnchecked{1 << 20, /*inlineSmall=*/true, /*checkTypes=*/false};

// Rank 0 receives two int32 from rank 1 as its Recv number `expected`; rank
// 1's header says it is its Send number `sent` and carries {41, 42} inline.
// Returns the error text, or "" with `out` holding what arrived.
std::string receive(uint64_t expected, uint64_t sent, const coll::P2pFraming& framing,
                    std::vector<int32_t>& out) {
  const int32_t payload[2] = {41, 42};
  const CallSignature header =
      CallSignature::sendHeader(2, tidalInt32, sent, payload, sizeof payload);
  auto script = std::make_shared<Script>();
  script->completeUpTo = UINT64_MAX;
  const char* bytes = reinterpret_cast<const char*>(&header);
  script->deliver.assign(bytes, bytes + sizeof header);
  ScriptedConnection recv(script, 1);
  EngineOptions options{};
  options.chunkBytes = 1 << 20;
  options.stagingSlots = 2;
  options.timeout = std::chrono::seconds(5);
  Engine engine(0, options);
  engine.addRecvConnection(1, &recv);
  const coll::P2pOp op{coll::P2pOp::Kind::Recv, 1, out.data(), out.size() * sizeof(int32_t),
                       tidalInt32};
  const coll::Schedule schedule = coll::p2pSingle(op, framing, nullptr, &expected);
  try {
    engine.run(schedule, nullptr, out.data(), "Recv");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidUsage) << e.what();
    return e.what();
  }
  return "";
}

TEST(P2pNumbering, TheExpectedMessageIsTaken) {
  std::vector<int32_t> out(2, 0);
  EXPECT_EQ(receive(3, 3, kChecking, out), "");
  EXPECT_EQ(out, (std::vector<int32_t>{41, 42}));
}

TEST(P2pNumbering, AnotherMessageNumberIsRefusedNamingBoth) {
  std::vector<int32_t> out(2, 0);
  const std::string text = receive(3, 5, kChecking, out);
  EXPECT_NE(text.find("rank 0: Recv: rank 1 sent its Send #6 to this rank where this rank's Recv "
                      "#4 from it expected its Send #4"),
            std::string::npos)
      << text;
  EXPECT_EQ(out, (std::vector<int32_t>{0, 0})) << "the refused message was delivered";
}

TEST(P2pNumbering, UncheckedReceivesDoNotCompareNumbers) {
  std::vector<int32_t> out(2, 0);
  EXPECT_EQ(receive(3, 5, kUnchecked, out), "");
  EXPECT_EQ(out, (std::vector<int32_t>{41, 42}));
}

// In a group, several messages to one peer carry the numbers the caller
// gave them, each Recv expects its own, and self messages are not numbered.
TEST(P2pNumbering, AGroupCarriesEachMessagesNumber) {
  std::vector<int32_t> a(4, 1), b(4, 2), c(4, 0), d(4, 0);
  using K = coll::P2pOp::Kind;
  std::vector<coll::P2pOp> ops = {{K::Send, 1, a.data(), 16, tidalInt32, 7},
                                  {K::Send, 1, b.data(), 16, tidalInt32, 8},
                                  {K::Recv, 1, c.data(), 16, tidalInt32, 2},
                                  {K::Send, 0, a.data(), 16, tidalInt32, 0},
                                  {K::Recv, 0, d.data(), 16, tidalInt32, 0}};
  std::vector<uint64_t> headers;
  const coll::Schedule s = coll::p2pGroup(0, ops, kChecking, headers);
  // Two headers, then one expected number.
  constexpr size_t kWords = sizeof(CallSignature) / sizeof(uint64_t);
  ASSERT_EQ(headers.size(), 2 * kWords + 1);
  CallSignature first, second;
  std::memcpy(static_cast<void*>(&first), &headers[0], sizeof first);
  std::memcpy(static_cast<void*>(&second), &headers[kWords], sizeof second);
  EXPECT_EQ(first.seq, 7u);
  EXPECT_EQ(second.seq, 8u);
  EXPECT_EQ(headers[2 * kWords], 2u);
  int numbered = 0;
  for (const auto& r : s.recvs) {
    if (!r.numbered) continue;
    ++numbered;
    EXPECT_EQ(reinterpret_cast<const uint64_t*>(r.numberAt.offset), &headers[2 * kWords]);
  }
  EXPECT_EQ(numbered, 1);
}

}  // namespace
}  // namespace tidal
