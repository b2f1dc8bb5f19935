// Checks on the exit statuses of a forked job (ForkedJob::wait, job_fork.h).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <vector>

namespace tidal::test {

// Every rank exited normally (not killed, not hung past the wait) with 0.
inline void expectEveryRankPassed(const std::vector<int>& status) {
  for (size_t r = 0; r < status.size(); ++r) {
    ASSERT_TRUE(status[r] != -1 && WIFEXITED(status[r]))
        << "rank " << r << " hung or crashed, status " << status[r];
    EXPECT_EQ(WEXITSTATUS(status[r]), 0) << "rank " << r;
  }
}

}  // namespace tidal::test
