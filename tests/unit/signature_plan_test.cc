// The engine keeps the call-signature links it worked out for a kept
// schedule (Schedule::stableId) and reuses them when the next run is the same
// schedule. What changes per run must not be kept with them: each run compares
// the peer's new record, takes the data that rides in it, and a failed run
// leaves nothing behind. A real 2-rank recursive-doubling AllReduce schedule,
// run by the real engine, against a peer played by scripted connections.
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

class SignaturePlan : public ::testing::Test {
 protected:
  SignaturePlan() : send_(toPeer_, 1), recv_(fromPeer_, 1), engine_(0, options()) {
    toPeer_->completeUpTo = UINT64_MAX;
    fromPeer_->completeUpTo = UINT64_MAX;
    engine_.addSendConnection(1, &send_);
    engine_.addRecvConnection(1, &recv_);
    schedule_ = coll::recursiveDoublingAllReduce(
        {0, 2, 2, tidalFloat32, tidalSum, 0, size_t{1} << 20, false});
    schedule_.stableId = 777;  // as ScheduleCache marks a kept schedule
  }

  static EngineOptions options() {
    EngineOptions o{};
    o.chunkBytes = 1 << 20;
    o.stagingSlots = 2;
    o.timeout = std::chrono::seconds(5);
    return o;
  }

  // Call number `seq` of AllReduce(count 2, float, sum) with input {1, 2};
  // the peer's record says `op` and carries {a, b}. Returns the error text
  // ("" on success); `out` holds what the call left in its output.
  // With `inlined` false the peer's data follows its record as a transfer
  // of its own (as when the peer's first send could not ride along).
  std::string call(uint64_t seq, tidalRedOp_t peerOp, float a, float b, std::vector<float>& out,
                   bool inlined = true) {
    CallSignature theirs =
        CallSignature::make(kind_, seq, 2, tidalFloat32, peerOp, CallSignature::kNone);
    const float data[2] = {a, b};
    fromPeer_->deliverBySize.clear();
    if (inlined) {
      std::memcpy(theirs.inlineData, data, sizeof data);
      theirs.inlineBytes = sizeof data;
    } else {
      const char* d = reinterpret_cast<const char*>(data);
      fromPeer_->deliverBySize[sizeof data].assign(d, d + sizeof data);
    }
    const char* bytes = reinterpret_cast<const char*>(&theirs);
    fromPeer_->deliver.assign(bytes, bytes + sizeof theirs);
    CallCheck check;
    check.signature =
        CallSignature::make(kind_, seq, 2, tidalFloat32, tidalSum, CallSignature::kNone);
    const float in[2] = {1, 2};
    out.assign(kind_ == CallKind::AllGather ? 4 : 2, 7.0f);
    try {
      engine_.run(schedule_, in, out.data(), callKindName(kind_), nullptr, &check);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  // A 2-rank ring AllGather of 2 floats per rank: receives that land the
  // peer's bytes as they are, without a reduction after them.
  void useAllGather() {
    schedule_ = coll::ringAllGather({0, 2, 2, tidalFloat32, tidalSum, 0, size_t{1} << 20, false});
    schedule_.stableId = 778;
    kind_ = CallKind::AllGather;
  }

  CallKind kind_ = CallKind::AllReduce;
  std::shared_ptr<Script> toPeer_ = std::make_shared<Script>();
  std::shared_ptr<Script> fromPeer_ = std::make_shared<Script>();
  ScriptedConnection send_, recv_;
  Engine engine_;
  coll::Schedule schedule_;
};

TEST_F(SignaturePlan, EachRunTakesItsOwnPeersDataAndComparesItsOwnRecord) {
  std::vector<float> out;
  ASSERT_EQ(call(0, tidalSum, 10, 20, out), "");
  EXPECT_EQ(out, (std::vector<float>{11, 22}));
  // The same kept schedule again: the links are reused, the data is new.
  ASSERT_EQ(call(1, tidalSum, 100, 200, out), "");
  EXPECT_EQ(out, (std::vector<float>{101, 202}));
  // The peer now calls max: compared again, refused, nothing delivered.
  const std::string text = call(2, tidalMax, 1000, 2000, out);
  EXPECT_NE(text.find("they differ in: op"), std::string::npos) << text;
  EXPECT_EQ(out, (std::vector<float>{7, 7})) << "the mismatched call's data was delivered";
  // After the failure a matching call starts over and is exact.
  ASSERT_EQ(call(3, tidalSum, 5, 6, out), "");
  EXPECT_EQ(out, (std::vector<float>{6, 8}));
  // Every run sent our record ahead of its data (4 records, data inline).
  size_t records = 0;
  for (const auto& post : toPeer_->posts) records += post.second == sizeof(CallSignature);
  EXPECT_EQ(records, 4u);
}

// Whether the peer's data rode inside its record is the peer's choice, per
// run: a run whose data comes apart from the record must take that data,
// not what an earlier run's record carried.
TEST_F(SignaturePlan, DataInsideOrApartFromTheRecordIsDecidedPerRun) {
  std::vector<float> out;
  ASSERT_EQ(call(0, tidalSum, 10, 20, out, /*inlined=*/true), "");
  EXPECT_EQ(out, (std::vector<float>{11, 22}));
  ASSERT_EQ(call(1, tidalSum, 30, 40, out, /*inlined=*/false), "");
  EXPECT_EQ(out, (std::vector<float>{31, 42}));
  ASSERT_EQ(call(2, tidalSum, 50, 60, out, /*inlined=*/true), "");
  EXPECT_EQ(out, (std::vector<float>{51, 62}));
}

TEST_F(SignaturePlan, DataInsideOrApartFromTheRecordIsDecidedPerRunWithoutReduction) {
  useAllGather();
  std::vector<float> out;
  ASSERT_EQ(call(0, tidalSum, 10, 20, out, /*inlined=*/true), "");
  EXPECT_EQ(out, (std::vector<float>{1, 2, 10, 20}));
  ASSERT_EQ(call(1, tidalSum, 30, 40, out, /*inlined=*/false), "");
  EXPECT_EQ(out, (std::vector<float>{1, 2, 30, 40}));
}

// A schedule that is not kept (stableId 0, built per call) never reuses the
// links, even at the same address with other contents.
TEST_F(SignaturePlan, UnkeptSchedulesAreWorkedOutEveryRun) {
  schedule_.stableId = 0;
  std::vector<float> out;
  ASSERT_EQ(call(0, tidalSum, 10, 20, out), "");
  const std::string text = call(1, tidalMin, 1, 1, out);
  EXPECT_NE(text.find("they differ in: op"), std::string::npos) << text;
}

}  // namespace
}  // namespace tidal
