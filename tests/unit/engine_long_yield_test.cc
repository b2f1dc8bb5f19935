// A yielding wait (more ranks than CPUs) beside a busy process: each yield
// hands the core to the process for a time slice, and once three yields in
// a row kept it away for a millisecond or more while more tasks than the
// host's ranks were runnable, waits sleep instead of yielding for a while
// (Engine, Run::longYield; runnable_tasks.h). The busy process is a real
// forked child pinned to this thread's CPU; the "peer" is a scripted
// connection that answers after a set time.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/runnable_tasks.h"
#include "late_receive.h"
#include "scripted_connection.h"

namespace tidal {
namespace {

using test::ScriptedConnection;
using Script = ScriptedConnection::Script;

// This thread and a busy child on this thread's CPU, for the test's
// lifetime; both undone after.
class BusyNeighbour {
 public:
  BusyNeighbour() {
    sched_getaffinity(0, sizeof before_, &before_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
    child_ = ::fork();
    if (child_ == 0) {
      // The mask is inherited: the child spins on the same CPU.
      for (;;) asm volatile("" ::: "memory");
    }
  }
  ~BusyNeighbour() {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
    sched_setaffinity(0, sizeof before_, &before_);
  }
  bool ready() const { return pinned_ && child_ > 0; }

 private:
  cpu_set_t before_{};
  bool pinned_ = false;
  pid_t child_ = -1;
};

// One 8-byte receive that arrives 300 ms after the run starts, in a wait
// that yields (busyPoll off) for all of it.
uint64_t sleepWindowsInOneWait(int ranksOnThisHost) {
  EngineOptions options = test::longSpinOptions(/*busyPoll=*/false);
  options.ranksOnThisHost = ranksOnThisHost;
  Engine engine(0, options);
  test::runLateReceive(engine, std::make_shared<Script>(), std::chrono::milliseconds(300));
  return engine.sleepWindows();
}

TEST(RunnableTasks, CountsAtLeastThisThread) {
  const int n = runnableTasksOnHost();
  EXPECT_GE(n, 1);
}

TEST(EngineLongYield, ABusyProcessOnTheCoreMakesWaitsSleep) {
  BusyNeighbour busy;
  ASSERT_TRUE(busy.ready());
  // One rank on this host: this thread and the child make two runnable.
  EXPECT_GE(sleepWindowsInOneWait(/*ranksOnThisHost=*/1), 1u);
}

TEST(EngineLongYield, LongYieldsAmongTheJobsOwnRanksDoNotCount) {
  BusyNeighbour busy;
  ASSERT_TRUE(busy.ready());
  // As many ranks on this host as could ever be runnable here: the task
  // that takes the core may be one of them, so waits go on yielding.
  EXPECT_EQ(sleepWindowsInOneWait(/*ranksOnThisHost=*/4096), 0u);
}

}  // namespace
}  // namespace tidal
