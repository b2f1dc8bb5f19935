// How the engine waits when a peer shares its CPU: a waiting run publishes
// the CPU it runs on to its connections, and while one of them says its peer
// last waited on that CPU, the spin yields instead of busy-polling
// (Connection::peerOnCpu; shm sees the peer's CPU in the shared segment).
// The "peer" answers after a number of progress() calls, so the run waits
// without a second thread.
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <memory>
#include <vector>

#include "collectives/schedule.h"
#include "engine/engine.h"
#include "scripted_connection.h"

namespace tidal {
namespace {

using test::ScriptedConnection;
using Script = ScriptedConnection::Script;

// This thread on one CPU for the test's lifetime, so that sched_getcpu()
// cannot change between the engine's read and the test's.
class PinnedToOneCpu {
 public:
  PinnedToOneCpu() {
    sched_getaffinity(0, sizeof before_, &before_);
    cpu_ = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu_, &one);
    pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~PinnedToOneCpu() { sched_setaffinity(0, sizeof before_, &before_); }
  int cpu() const { return cpu_; }
  bool pinned() const { return pinned_; }

 private:
  cpu_set_t before_{};
  int cpu_ = -1;
  bool pinned_ = false;
};

struct WaitResult {
  uint64_t yields;
  std::vector<int> published;
};

// One 8-byte receive from rank 1 that arrives after 200 progress() calls,
// with busy-polling on (the ranks "fit" the CPUs) and a spin long enough
// that the whole wait is spent spinning.
WaitResult waitForOneReceive(bool peerOnEveryCpu) {
  auto script = std::make_shared<Script>();
  script->completeUpTo = UINT64_MAX;
  script->progressCallsBeforeAnyCompletes = 200;
  script->peerOnEveryCpu = peerOnEveryCpu;
  ScriptedConnection recv(script, 1);
  EngineOptions options{};
  options.chunkBytes = 1 << 20;
  options.stagingSlots = 2;
  options.spin = std::chrono::seconds(10);
  options.timeout = std::chrono::seconds(30);
  options.busyPoll = true;
  Engine engine(0, options);
  engine.addRecvConnection(1, &recv);
  coll::Schedule schedule;
  schedule.recvs.push_back({1, {coll::Buffer::Recv, 0}, 8, false, {coll::Buffer::Send, 0}, 0});
  std::vector<char> out(8);
  engine.run(schedule, nullptr, out.data(), "Recv", nullptr, nullptr);
  return {engine.yieldsToPeerOnThisCpu(), script->publishedCpus};
}

TEST(EngineSpin, YieldsWhileThePeerLastWaitedOnThisCpu) {
  PinnedToOneCpu pin;
  if (!pin.pinned() || pin.cpu() < 0) GTEST_SKIP() << "cannot pin this thread to one CPU";
  const WaitResult r = waitForOneReceive(/*peerOnEveryCpu=*/true);
  EXPECT_GT(r.yields, 0u);
  ASSERT_FALSE(r.published.empty());
  for (const int cpu : r.published) EXPECT_EQ(cpu, pin.cpu());
}

TEST(EngineSpin, BusyPollsWhenThePeerIsElsewhere) {
  PinnedToOneCpu pin;
  if (!pin.pinned() || pin.cpu() < 0) GTEST_SKIP() << "cannot pin this thread to one CPU";
  const WaitResult r = waitForOneReceive(/*peerOnEveryCpu=*/false);
  EXPECT_EQ(r.yields, 0u);
  // It still tells its peers where it waits.
  ASSERT_FALSE(r.published.empty());
  EXPECT_EQ(r.published.front(), pin.cpu());
}

}  // namespace
}  // namespace tidal
