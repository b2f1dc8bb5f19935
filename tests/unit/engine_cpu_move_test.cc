// A busy-polling wait that finds a peer waiting on its own CPU moves the
// thread to another CPU of its mask and leaves the mask as it was (Engine,
// "moving off a shared CPU"; cpu_move.h). The "peer" is a scripted
// connection that answers after a set time and says where it waits, so the
// run waits without a second thread; the moves are real sched_setaffinity
// calls on this thread.
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <memory>
#include <vector>

#include "engine/cpu_move.h"
#include "engine/engine.h"
#include "late_receive.h"
#include "scripted_connection.h"

namespace tidal {
namespace {

using test::ScriptedConnection;
using Script = ScriptedConnection::Script;

cpu_set_t currentMask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  sched_getaffinity(0, sizeof mask, &mask);
  return mask;
}

// This thread's mask for the test's lifetime, put back after.
class MaskForTest {
 public:
  explicit MaskForTest(const cpu_set_t& mask) : before_(currentMask()) {
    set_ = sched_setaffinity(0, sizeof mask, &mask) == 0;
  }
  ~MaskForTest() { sched_setaffinity(0, sizeof before_, &before_); }
  bool set() const { return set_; }

 private:
  cpu_set_t before_;
  bool set_ = false;
};

// The first two CPUs this thread may run on, or fewer.
std::vector<int> twoCpus() {
  const cpu_set_t mask = currentMask();
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

cpu_set_t maskOf(const std::vector<int>& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : cpus) CPU_SET(c, &mask);
  return mask;
}

struct WaitResult {
  uint64_t moves;
  CpuMove last;
  std::vector<int> published;
};

// One 8-byte receive that arrives 20 ms after the run starts, spent
// spinning.
WaitResult waitForOneReceive(bool peerWaitsOnEveryCpu, bool busyPoll, bool moveOffSharedCpu) {
  auto script = std::make_shared<Script>();
  script->peerWaitsOnEveryCpu = peerWaitsOnEveryCpu;
  EngineOptions options = test::longSpinOptions(busyPoll);
  options.moveOffSharedCpu = moveOffSharedCpu;
  Engine engine(0, options);
  test::runLateReceive(engine, script, std::chrono::milliseconds(20));
  return {engine.cpuMoves(), engine.lastCpuMove(), script->publishedCpus};
}

bool sameMask(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b); }

// Two CPUs this thread may run on, set as its mask by the caller's
// MaskForTest; GTEST_SKIP from the caller when there are fewer.
#define TWO_CPU_MASK_OR_SKIP(mask, guard)                                     \
  const std::vector<int> cpus = twoCpus();                                    \
  if (cpus.size() < 2) GTEST_SKIP() << "this thread may run on one CPU only"; \
  const cpu_set_t mask = maskOf(cpus);                                        \
  MaskForTest guard(mask);                                                    \
  ASSERT_TRUE(guard.set())

TEST(CpuMove, LeavesTheCpuAndKeepsTheMask) {
  TWO_CPU_MASK_OR_SKIP(mask, m);
  for (int round = 0; round < 4; ++round) {
    const int here = sched_getcpu();
    const CpuMove move = moveOffCpu(here);
    EXPECT_EQ(move.from, here);
    EXPECT_NE(move.to, here);
    EXPECT_TRUE(CPU_ISSET(move.to, &mask)) << move.to;
    EXPECT_TRUE(sameMask(currentMask(), mask));
  }
}

TEST(CpuMove, NoMoveWithoutAnotherCpu) {
  const std::vector<int> cpus = twoCpus();
  ASSERT_FALSE(cpus.empty());
  const cpu_set_t one = maskOf({cpus.front()});
  MaskForTest m(one);
  ASSERT_TRUE(m.set());
  const CpuMove move = moveOffCpu(cpus.front());
  EXPECT_EQ(move.from, -1);
  EXPECT_EQ(sched_getcpu(), cpus.front());
  EXPECT_TRUE(sameMask(currentMask(), one));
}

TEST(EngineCpuMove, MovesOffTheCpuItsPeerWaitsOn) {
  TWO_CPU_MASK_OR_SKIP(mask, m);
  const WaitResult r = waitForOneReceive(/*peerWaitsOnEveryCpu=*/true, true, true);
  // 20 ms of waiting, at most one move a millisecond.
  EXPECT_GE(r.moves, 1u);
  EXPECT_LE(r.moves, 21u);
  EXPECT_NE(r.last.from, r.last.to);
  EXPECT_TRUE(CPU_ISSET(r.last.from, &mask)) << r.last.from;
  EXPECT_TRUE(CPU_ISSET(r.last.to, &mask)) << r.last.to;
  EXPECT_TRUE(sameMask(currentMask(), mask));
  // It told the peer where it waits, the CPU it moved to among them, and
  // that it no longer waits once the receive came.
  ASSERT_GE(r.published.size(), 2u);
  bool publishedTheNewCpu = false;
  for (int c : r.published) publishedTheNewCpu = publishedTheNewCpu || c == r.last.to;
  EXPECT_TRUE(publishedTheNewCpu);
  EXPECT_EQ(r.published.back(), -1);
}

TEST(EngineCpuMove, StaysWhenThePeerWaitsElsewhere) {
  const WaitResult r = waitForOneReceive(/*peerWaitsOnEveryCpu=*/false, true, true);
  EXPECT_EQ(r.moves, 0u);
  // It still tells its peers where it waits, and when it stops.
  ASSERT_GE(r.published.size(), 2u);
  EXPECT_GE(r.published.front(), 0);
  EXPECT_EQ(r.published.back(), -1);
}

TEST(EngineCpuMove, StaysWhenTurnedOffOrYielding) {
  const WaitResult off = waitForOneReceive(true, /*busyPoll=*/true, /*moveOffSharedCpu=*/false);
  EXPECT_EQ(off.moves, 0u);
  // Ranks that do not fit their CPUs yield: sharing one is expected, and
  // nothing is published.
  const WaitResult yielding = waitForOneReceive(true, /*busyPoll=*/false, true);
  EXPECT_EQ(yielding.moves, 0u);
  EXPECT_TRUE(yielding.published.empty());
}

}  // namespace
}  // namespace tidal
