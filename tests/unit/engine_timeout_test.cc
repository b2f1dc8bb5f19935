// What the engine's timeout says it waited for, for a checked call whose
// only transfers are the call signatures on its ring links (a Reduce of
// count 0 at 2 ranks), over connections whose completions the test decides.
// udp;ofi_rxd under loss was seen delivering a signature without ever
// completing its send; the timeout must say that, not blame the peer nor a
// GPU. And how a stalled wait ends before its timeout when another rank has
// told that its call failed (FailureNotices).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
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

// A link to rank 1 whose posts complete at once, or never.
std::shared_ptr<Script> link(bool completes, const CallSignature* deliver = nullptr) {
  auto script = std::make_shared<Script>();
  script->completeUpTo = completes ? UINT64_MAX : 0;
  if (deliver) {
    const char* bytes = reinterpret_cast<const char*>(deliver);
    script->deliver.assign(bytes, bytes + sizeof(CallSignature));
  }
  return script;
}

// Another rank's notice, as the communicator's bootstrap ring would report it.
class ToldBy final : public FailureNotices {
 public:
  explicit ToldBy(int teller) : teller_(teller) {}
  int toldBy() override {
    ++asked;
    return teller_;
  }
  int asked = 0;

 private:
  int teller_;
};

// Runs rank 0's empty schedule of a Reduce(count 0) checked against rank 1
// over the two links; returns the error, or none if the run succeeded.
std::optional<Error> runAgainst(std::shared_ptr<Script> toPeer, std::shared_ptr<Script> fromPeer,
                                const CallCheck& check, std::chrono::seconds timeout,
                                FailureNotices* notices) {
  ScriptedConnection send(std::move(toPeer), 1), recv(std::move(fromPeer), 1);
  EngineOptions options{};
  options.chunkBytes = 1 << 20;
  options.stagingSlots = 2;
  options.spin = std::chrono::microseconds(100);
  options.timeout = timeout;
  Engine engine(0, options);
  engine.addSendConnection(1, &send);
  engine.addRecvConnection(1, &recv);
  engine.setFailureNotices(notices);
  coll::Schedule schedule;
  try {
    engine.run(schedule, nullptr, nullptr, "Reduce", nullptr, &check);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// As above with a 1 s timeout and no notices: the timeout's text, or "".
std::string runAgainst(std::shared_ptr<Script> toPeer, std::shared_ptr<Script> fromPeer,
                       const CallCheck& check) {
  const auto e =
      runAgainst(std::move(toPeer), std::move(fromPeer), check, std::chrono::seconds(1), nullptr);
  if (!e) return "";
  EXPECT_EQ(e->code(), tidalTimeout) << e->what();
  return e->what();
}

CallCheck reduceOfNothing() {
  CallCheck check;
  check.signature = CallSignature::make(CallKind::Reduce, 0, 0, tidalFloat32, tidalSum, 1);
  check.ringNext = 1;
  check.ringPrev = 1;
  return check;
}

TEST(EngineTimeout, NamesOurSignatureTheTransportNeverCompleted) {
  const CallCheck check = reduceOfNothing();
  const std::string text =
      runAgainst(link(/*completes=*/false), link(/*completes=*/true, &check.signature), check);
  EXPECT_NE(text.find("rank 0: Reduce made no progress for TIDAL_TIMEOUT=1 s, waiting for the "
                      "transport to complete this rank's call signature to rank 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("GPU"), std::string::npos) << text;
}

TEST(EngineTimeout, NamesThePeerWhoseSignatureNeverCame) {
  const CallCheck check = reduceOfNothing();
  const std::string text = runAgainst(link(/*completes=*/true), link(/*completes=*/false), check);
  EXPECT_NE(text.find("waiting for rank 1 to call Reduce(count 0"), std::string::npos) << text;
}

TEST(EngineTimeout, SucceedsWhenBothSignaturesComplete) {
  const CallCheck check = reduceOfNothing();
  EXPECT_EQ(runAgainst(link(true), link(true, &check.signature), check), "");
}

// rank 1 never calls, and the ring says a rank's call failed: the wait ends
// long before its 60 s timeout, naming what it waited for and who told.
TEST(EngineTimeout, AStalledWaitEndsWhenAnotherRankToldItsCallFailed) {
  const CallCheck check = reduceOfNothing();
  ToldBy told(1);
  const auto e = runAgainst(link(true), link(false), check, std::chrono::seconds(60), &told);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), tidalRemoteError) << e->what();
  const std::string text = e->what();
  EXPECT_NE(text.find("rank 0: Reduce stopped waiting for rank 1 to call Reduce(count 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 1 told that a call of this communicator failed"), std::string::npos)
      << text;
  EXPECT_GE(told.asked, 1);
}

// Nobody told: the stalled wait keeps asking and ends at its timeout.
TEST(EngineTimeout, WithoutANoticeAStalledWaitEndsAtItsTimeout) {
  const CallCheck check = reduceOfNothing();
  ToldBy silent(-1);
  const auto e = runAgainst(link(true), link(false), check, std::chrono::seconds(1), &silent);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), tidalTimeout) << e->what();
  EXPECT_GE(silent.asked, 2);  // from 200 ms, every 100 ms, for 1 s
}

// A call that does not stall never asks, so a notice cannot fail it.
TEST(EngineTimeout, ACallThatMovesIsNotFailedByANotice) {
  const CallCheck check = reduceOfNothing();
  ToldBy told(1);
  const auto e =
      runAgainst(link(true), link(true, &check.signature), check, std::chrono::seconds(60), &told);
  EXPECT_FALSE(e.has_value()) << e->what();
  EXPECT_EQ(told.asked, 0);
}

}  // namespace
}  // namespace tidal
