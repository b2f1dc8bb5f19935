// One rank of a "killed rank" job: every rank runs AllReduces in a loop; the
// victim SIGKILLs itself a few milliseconds into its fourth call, so it dies
// with a transfer in flight. Survivors must get an error, and within the
// timeout. Shared by the tcp/shm fault tests and the ib ones in the VM.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "tidal/tidal.h"

namespace tidal::test {

// Exit codes of the surviving ranks.
enum SurvivorExit { kGotErrorInTime = 0, kInitFailed = 10, kNeverFailed = 11, kTooLate = 12 };

// `count` floats per AllReduce; the error must come within `timeoutSeconds`.
inline int survivorOrVictim(int rank, int victim, size_t count, int timeoutSeconds) {
  using namespace std::chrono;
  tidalComm_t comm;
  if (tidalCommInitFromEnv(&comm) != tidalSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", rank, tidalGetLastError(nullptr));
    return kInitFailed;
  }
  std::vector<float> buf(count, 1.0f);
  for (int iter = 0; iter < 2000; ++iter) {
    if (rank == victim && iter == 3) {
      // Die while the next AllReduce is in flight, not between calls.
      std::thread([] {
        std::this_thread::sleep_for(milliseconds(3));
        ::raise(SIGKILL);
      }).detach();
    }
    const auto start = steady_clock::now();
    const tidalResult_t r =
        tidalAllReduce(buf.data(), buf.data(), count, tidalFloat32, tidalSum, comm, nullptr);
    if (r != tidalSuccess) {
      const auto took = duration_cast<milliseconds>(steady_clock::now() - start).count();
      std::fprintf(stderr, "rank %d: AllReduce failed after %lld ms as expected: %s\n", rank,
                   static_cast<long long>(took), tidalGetLastError(comm));
      tidalResult_t async = tidalSuccess;
      tidalCommGetAsyncError(comm, &async);
      tidalCommAbort(comm);
      if (async == tidalSuccess) return kNeverFailed;
      return took <= timeoutSeconds * 1000 ? kGotErrorInTime : kTooLate;
    }
    std::fill(buf.begin(), buf.end(), 1.0f);
  }
  return kNeverFailed;
}

// Checks the exit statuses of such a job (as from ForkedJob::wait): the
// victim died of SIGKILL, every other rank exited with kGotErrorInTime.
inline void expectSurvivorsGotTheError(const std::vector<int>& status, int victim) {
  for (int r = 0; r < static_cast<int>(status.size()); ++r) {
    const int st = status[static_cast<size_t>(r)];
    if (r == victim) {
      EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "victim status " << st;
      continue;
    }
    ASSERT_NE(st, -1) << "rank " << r << " hung past the test's own deadline";
    ASSERT_TRUE(WIFEXITED(st)) << "rank " << r << " crashed, status " << st;
    EXPECT_EQ(WEXITSTATUS(st), kGotErrorInTime) << "rank " << r;
  }
}

}  // namespace tidal::test
