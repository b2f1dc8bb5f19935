// Revoke, shrink, grow, suspend/resume and memory statistics, on real forked
// rank processes over tcp and shm: a rank is SIGKILLed in a loop of
// AllReduces and the survivors shrink and go on with exact results; a
// revoke stops a blocked call and the peers' calls; new ranks join through
// tidalCommGrow; and every bad argument is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "job_fork.h"
#include "rank_exits.h"
#include "single_rank.h"
#include "tidal/tidal.h"

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using ::testing::HasSubstr;
using tidal::test::expectEveryRankPassed;
using tidal::test::ForkedJob;

// Exit codes a rank body reports (0: all checks passed).
constexpr int kOk = 0, kInit = 10, kNoError = 11, kShrink = 12, kWrong = 13, kLate = 14;

int report(int code, int rank, const char* what, tidalComm_t comm) {
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, tidalGetLastError(comm));
  return code;
}

// n AllReduces of `count` floats where rank r contributes r + 1 + i; every
// element must be exactly the sum over the ranks in `parentRanks`.
int exactAllReduces(tidalComm_t comm, const std::vector<int>& parentRanks, int parentRank,
                    int iterations, size_t count) {
  std::vector<float> buf(count);
  for (int i = 0; i < iterations; ++i) {
    float expected = 0;
    for (int p : parentRanks) expected += static_cast<float>(p + 1 + i);
    std::fill(buf.begin(), buf.end(), static_cast<float>(parentRank + 1 + i));
    if (tidalAllReduce(buf.data(), buf.data(), count, tidalFloat32, tidalSum, comm, nullptr) !=
        tidalSuccess) {
      return report(kWrong, parentRank, "AllReduce on the new communicator failed", comm);
    }
    for (float v : buf) {
      if (v != expected) {
        std::fprintf(stderr, "rank %d: got %g, expected %g\n", parentRank, v, expected);
        return kWrong;
      }
    }
  }
  return kOk;
}

struct KillCase {
  const char* net;
  int nranks;
  int victim;
  size_t count;
};

class ShrinkAfterKill : public ::testing::TestWithParam<KillCase> {};

// Every rank runs AllReduces; the victim SIGKILLs itself during its fourth.
// The survivors must see the failure, shrink with TIDAL_SHRINK_ABORT, and
// run exact AllReduces and a Send/Recv ring on the survivors' communicator.
TEST_P(ShrinkAfterKill, SurvivorsShrinkAndGoOnWithExactResults) {
  const KillCase k = GetParam();
  ForkedJob job(
      k.nranks,
      [&](int rank) {
        tidalComm_t comm;
        if (tidalCommInitFromEnv(&comm) != tidalSuccess) return report(kInit, rank, "init", comm);
        std::vector<float> buf(k.count);
        bool failed = false;
        for (int iter = 0; iter < 2000 && !failed; ++iter) {
          if (rank == k.victim && iter == 3) {
            std::thread([] {
              std::this_thread::sleep_for(milliseconds(3));
              ::raise(SIGKILL);
            }).detach();
          }
          std::fill(buf.begin(), buf.end(), 1.0f);
          failed = tidalAllReduce(buf.data(), buf.data(), k.count, tidalFloat32, tidalSum, comm,
                                  nullptr) != tidalSuccess;
        }
        if (!failed) return kNoError;
        std::fprintf(stderr, "rank %d: AllReduce failed as expected: %s\n", rank,
                     tidalGetLastError(comm));
        const auto start = steady_clock::now();
        int excluded[] = {k.victim};
        tidalComm_t small = nullptr;
        if (tidalCommShrink(comm, excluded, 1, &small, nullptr, TIDAL_SHRINK_ABORT) !=
            tidalSuccess) {
          return report(kShrink, rank, "shrink failed", comm);
        }
        const auto took =
            std::chrono::duration_cast<milliseconds>(steady_clock::now() - start).count();
        std::fprintf(stderr, "rank %d: shrink took %lld ms\n", rank, static_cast<long long>(took));
        int n = 0, me = -1;
        tidalCommCount(small, &n);
        tidalCommUserRank(small, &me);
        const int expectedRank = rank < k.victim ? rank : rank - 1;
        if (n != k.nranks - 1 || me != expectedRank) {
          std::fprintf(stderr, "rank %d: new comm %d of %d, expected %d of %d\n", rank, me, n,
                       expectedRank, k.nranks - 1);
          return kWrong;
        }
        std::vector<int> survivors;
        for (int r = 0; r < k.nranks; ++r)
          if (r != k.victim) survivors.push_back(r);
        if (int e = exactAllReduces(small, survivors, rank, 20, k.count); e != kOk) return e;
        // A ring shift on the new communicator: any peer is reachable.
        int sendv = rank, recvv = -1;
        tidalGroupStart();
        tidalSend(&sendv, 1, tidalInt32, (me + 1) % n, small, nullptr);
        tidalRecv(&recvv, 1, tidalInt32, (me + n - 1) % n, small, nullptr);
        if (tidalGroupEnd() != tidalSuccess) return report(kWrong, rank, "ring shift", small);
        const int left = survivors[static_cast<size_t>((me + n - 1) % n)];
        if (recvv != left) {
          std::fprintf(stderr, "rank %d: ring shift got %d, expected %d\n", rank, recvv, left);
          return kWrong;
        }
        tidalCommDestroy(small);
        tidalCommAbort(comm);
        return took < 20000 ? kOk : kLate;
      },
      {{"TIDAL_NET", k.net}, {"TIDAL_TIMEOUT", "20"}});
  const std::vector<int> status = job.wait(seconds(120));
  for (int r = 0; r < k.nranks; ++r) {
    const int st = status[static_cast<size_t>(r)];
    if (r == k.victim) {
      EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "victim status " << st;
      continue;
    }
    ASSERT_NE(st, -1) << "rank " << r << " hung";
    ASSERT_TRUE(WIFEXITED(st)) << "rank " << r << " crashed, status " << st;
    EXPECT_EQ(WEXITSTATUS(st), kOk) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Kills, ShrinkAfterKill,
                         ::testing::Values(KillCase{"tcp", 4, 2, 1 << 16},
                                           KillCase{"shm", 4, 2, 1 << 16},
                                           // The first rank dies: the rendezvous moves to rank 1.
                                           KillCase{"tcp", 3, 0, 1024}, KillCase{"shm", 3, 0, 1024},
                                           KillCase{"shm", 5, 4, 7}),
                         [](const auto& test) {
                           return std::string(test.param.net) + "_np" +
                                  std::to_string(test.param.nranks) + "_victim" +
                                  std::to_string(test.param.victim);
                         });

// Survivors told different lists meet (same size, same first survivor, the
// same new ranks) but must not use the result: every one of them is told.
TEST(Shrink, SurvivorsGivenDifferentListsAreEachTold) {
  ForkedJob job(4, [](int rank) {
    tidalComm_t comm;
    if (tidalCommInitFromEnv(&comm) != tidalSuccess) return report(kInit, rank, "init", comm);
    if (rank == 2) {
      // Ranks 0 and 1 exclude rank 3, rank 3 excludes rank 2, which leaves.
      tidalCommDestroy(comm);
      return kOk;
    }
    int excluded[] = {rank == 3 ? 2 : 3};
    tidalComm_t small = nullptr;
    const tidalResult_t r = tidalCommShrink(comm, excluded, 1, &small, nullptr, 0);
    const std::string text = tidalGetLastError(comm);
    std::fprintf(stderr, "rank %d: %s\n", rank, text.c_str());
    if (r != tidalInvalidUsage || small != nullptr ||
        text.find("disagree on excludeRanksList") == std::string::npos) {
      return kWrong;
    }
    tidalCommDestroy(comm);
    return kOk;
  });
  expectEveryRankPassed(job.wait(seconds(60)));
}

// A healthy communicator shrunk with nobody dead: the excluded rank does not
// call shrink (it leaves), and the survivors' new communicator is exact.
TEST(Shrink, HealthyCommunicatorWithoutTheExcludedRank) {
  ForkedJob job(3, [](int rank) {
    tidalComm_t comm;
    if (tidalCommInitFromEnv(&comm) != tidalSuccess) return report(kInit, rank, "init", comm);
    if (rank == 1) {
      tidalCommDestroy(comm);
      return kOk;
    }
    int excluded[] = {1};
    tidalComm_t small = nullptr;
    if (tidalCommShrink(comm, excluded, 1, &small, nullptr, TIDAL_SHRINK_DEFAULT) != tidalSuccess)
      return report(kShrink, rank, "shrink", comm);
    const int e = exactAllReduces(small, {0, 2}, rank, 5, 100);
    tidalCommDestroy(small);
    tidalCommDestroy(comm);
    return e;
  });
  expectEveryRankPassed(job.wait(seconds(60)));
}

// A revoke on rank 0 stops its own blocked call (on another thread) at once,
// makes rank 1's next call fail fast instead of at its timeout, refuses later
// calls by name, reports tidalSuccess as its state, and leaves the
// communicator fit to shrink (with nobody excluded) into a working one.
TEST(Revoke, StopsCallsHereAndThereAndTheCommunicatorCanStillShrink) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  ForkedJob job(
      2,
      [&](int rank) {
        tidalComm_t comm;
        if (tidalCommInitFromEnv(&comm) != tidalSuccess) return report(kInit, rank, "init", comm);
        std::vector<float> buf(1000, 1.0f);
        if (rank == 0) {
          // Blocks: rank 1 joins this AllReduce only after the revoke.
          tidalResult_t blocked = tidalSuccess;
          auto start = steady_clock::now();
          std::thread t([&] {
            blocked =
                tidalAllReduce(buf.data(), buf.data(), 1000, tidalFloat32, tidalSum, comm, nullptr);
          });
          std::this_thread::sleep_for(milliseconds(300));
          if (tidalCommRevoke(comm, TIDAL_REVOKE_DEFAULT) != tidalSuccess)
            return report(kWrong, rank, "revoke", comm);
          t.join();
          const auto took =
              std::chrono::duration_cast<milliseconds>(steady_clock::now() - start).count();
          if (blocked == tidalSuccess || took > 5000) return kNoError;
          if (::write(ready[1], "x", 1) != 1) return kWrong;
          tidalResult_t state = tidalInProgress;
          tidalCommGetAsyncError(comm, &state);
          if (state != tidalSuccess) return kWrong;
          if (tidalAllReduce(buf.data(), buf.data(), 1000, tidalFloat32, tidalSum, comm, nullptr) !=
                  tidalInvalidUsage ||
              std::string(tidalGetLastError(comm)).find("revoked") == std::string::npos) {
            return report(kWrong, rank, "a call after the revoke was not refused by name", comm);
          }
        } else {
          pollfd p{ready[0], POLLIN, 0};
          if (::poll(&p, 1, 20000) != 1) return kWrong;
          // The first call may still complete: rank 0 sent its half of the
          // call it revoked before the revoke. The next one cannot.
          const auto start = steady_clock::now();
          tidalResult_t r = tidalSuccess;
          for (int i = 0; i < 3 && r == tidalSuccess; ++i) {
            r = tidalAllReduce(buf.data(), buf.data(), 1000, tidalFloat32, tidalSum, comm, nullptr);
          }
          const auto took =
              std::chrono::duration_cast<milliseconds>(steady_clock::now() - start).count();
          std::fprintf(stderr, "rank 1: after the peer's revoke: %d in %lld ms: %s\n", r,
                       static_cast<long long>(took), tidalGetLastError(comm));
          if (r == tidalSuccess || took > 5000) return kNoError;
          // Told why by rank 0 (src/comm/failure_notice.cc), not only that
          // its connection was lost.
          if (std::string(tidalGetLastError(comm)).find("rank 0 revoked the communicator") ==
              std::string::npos) {
            return report(kWrong, rank, "the failed call does not say rank 0 revoked", comm);
          }
        }
        tidalComm_t again = nullptr;
        if (tidalCommShrink(comm, nullptr, 0, &again, nullptr, TIDAL_SHRINK_DEFAULT) !=
            tidalSuccess) {
          return report(kShrink, rank, "shrink after revoke", comm);
        }
        const int e = exactAllReduces(again, {0, 1}, rank, 5, 1000);
        tidalCommDestroy(again);
        tidalCommDestroy(comm);
        return e;
      },
      {{"TIDAL_TIMEOUT", "30"}});
  expectEveryRankPassed(job.wait(seconds(90)));
}

// Two members grow to four: the new ranks learn the id through a pipe (as
// they would from a job scheduler), take ranks 2 and 3, and the grown
// communicator gives exact results.
TEST(Grow, NewRanksJoinAndTheGrownCommunicatorIsExact) {
  int idPipe[2];
  ASSERT_EQ(::pipe(idPipe), 0);
  ForkedJob job(4, [&](int rank) {
    tidalComm_t grown = nullptr;
    if (rank < 2) {
      ::setenv("TIDAL_NRANKS", "2", 1);
      tidalComm_t comm;
      if (tidalCommInitFromEnv(&comm) != tidalSuccess) return report(kInit, rank, "init", comm);
      tidalUniqueId id;
      const tidalUniqueId* offered = nullptr;
      if (rank == 0) {
        if (tidalCommGetUniqueId(comm, &id) != tidalSuccess)
          return report(kWrong, rank, "GetUniqueId", comm);
        // A second id before the first is consumed is refused.
        tidalUniqueId another;
        if (tidalCommGetUniqueId(comm, &another) != tidalInvalidUsage) return kWrong;
        for (int i = 0; i < 2; ++i)
          if (::write(idPipe[1], &id, sizeof id) != sizeof id) return kWrong;
        offered = &id;
      }
      if (tidalCommGrow(comm, 4, offered, -1, &grown, nullptr) != tidalSuccess)
        return report(kWrong, rank, "grow (member)", comm);
      tidalCommDestroy(comm);
    } else {
      tidalUniqueId id;
      pollfd p{idPipe[0], POLLIN, 0};
      if (::poll(&p, 1, 20000) != 1 || ::read(idPipe[0], &id, sizeof id) != sizeof id)
        return kWrong;
      if (tidalCommGrow(nullptr, 4, &id, rank, &grown, nullptr) != tidalSuccess)
        return report(kWrong, rank, "grow (new rank)", nullptr);
    }
    int n = 0, me = -1;
    tidalCommCount(grown, &n);
    tidalCommUserRank(grown, &me);
    if (n != 4 || me != rank) return kWrong;
    const int e = exactAllReduces(grown, {0, 1, 2, 3}, rank, 5, 333);
    tidalCommDestroy(grown);
    return e;
  });
  expectEveryRankPassed(job.wait(seconds(60)));
}

// Both members passing an id, or none: each member is told which.
TEST(Grow, ExactlyOneMemberOffersTheId) {
  ForkedJob job(2, [](int rank) {
    tidalComm_t comm;
    if (tidalCommInitFromEnv(&comm) != tidalSuccess) return report(kInit, rank, "init", comm);
    tidalUniqueId id;
    if (tidalCommGetUniqueId(comm, &id) != tidalSuccess) return kWrong;
    tidalComm_t grown = nullptr;
    if (tidalCommGrow(comm, 3, &id, -1, &grown, nullptr) != tidalInvalidUsage) return kWrong;
    const std::string text = tidalGetLastError(comm);
    std::fprintf(stderr, "rank %d: %s\n", rank, text.c_str());
    if (text.find("exactly one member") == std::string::npos ||
        text.find("2 did: ranks [0,1]") == std::string::npos) {
      return kWrong;
    }
    tidalCommDestroy(comm);
    return kOk;
  });
  expectEveryRankPassed(job.wait(seconds(60)));
}

using MembershipArgs = tidal::test::SingleRank;

TEST_F(MembershipArgs, ShrinkRefusesBadListsByName) {
  tidalComm_t out = reinterpret_cast<tidalComm_t>(0x1);
  int self[] = {0};
  EXPECT_EQ(tidalCommShrink(comm_, self, 1, &out, nullptr, 0), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("excludeRanksCount 1 is outside 0..0"));
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(tidalCommShrink(comm_, nullptr, 0, &out, nullptr, 7), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("shrinkFlags 0x7"));
  EXPECT_EQ(tidalCommShrink(comm_, nullptr, -1, &out, nullptr, 0), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("excludeRanksCount -1"));
  EXPECT_EQ(tidalCommShrink(comm_, nullptr, 0, nullptr, nullptr, 0), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("newcomm is NULL"));
  // Nobody excluded on one rank: a working copy.
  ASSERT_EQ(tidalCommShrink(comm_, nullptr, 0, &out, nullptr, 0), tidalSuccess) << last();
  EXPECT_EQ(exactAllReduces(out, {0}, 0, 2, 16), kOk);
  EXPECT_EQ(tidalCommDestroy(out), tidalSuccess);
}

TEST(MembershipArgsMulti, ShrinkNamesOutOfRangeSelfAndDuplicateRanks) {
  tidalComm_t comms[3];
  ASSERT_EQ(tidalCommInitAll(comms, 3, nullptr), tidalSuccess);
  tidalComm_t out = nullptr;
  int outOfRange[] = {5};
  EXPECT_EQ(tidalCommShrink(comms[0], outOfRange, 1, &out, nullptr, 0), tidalInvalidArgument);
  EXPECT_THAT(tidalGetLastError(comms[0]),
              HasSubstr("excludeRanksList[0] = 5 is out of range 0..2"));
  int self[] = {2, 0};
  EXPECT_EQ(tidalCommShrink(comms[0], self, 2, &out, nullptr, 0), tidalInvalidUsage);
  EXPECT_THAT(tidalGetLastError(comms[0]), HasSubstr("excludeRanksList[1] is this rank (0)"));
  int twice[] = {1, 1};
  EXPECT_EQ(tidalCommShrink(comms[0], twice, 2, &out, nullptr, 0), tidalInvalidArgument);
  EXPECT_THAT(tidalGetLastError(comms[0]), HasSubstr("names rank 1 twice"));
  EXPECT_EQ(tidalCommShrink(comms[0], nullptr, 1, &out, nullptr, 0), tidalInvalidArgument);
  EXPECT_THAT(tidalGetLastError(comms[0]), HasSubstr("excludeRanksList is NULL"));
  for (tidalComm_t c : comms) tidalCommDestroy(c);
}

TEST_F(MembershipArgs, RevokeAndGrowRefuseBadArguments) {
  EXPECT_EQ(tidalCommRevoke(comm_, 3), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("revokeFlags 0x3"));
  EXPECT_EQ(tidalCommRevoke(nullptr, 0), tidalInvalidArgument);
  tidalComm_t out = nullptr;
  EXPECT_EQ(tidalCommGrow(comm_, 1, nullptr, -1, &out, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("nRanks 1 must be larger than the communicator's 1 ranks"));
  EXPECT_EQ(tidalCommGrow(comm_, 3, nullptr, 2, &out, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("members pass -1"));
  EXPECT_EQ(tidalCommGrow(nullptr, 3, nullptr, 2, &out, nullptr), tidalInvalidArgument);
  EXPECT_THAT(tidalGetLastError(nullptr), HasSubstr("comm and uniqueId are both NULL"));
  tidalUniqueId id{};
  EXPECT_EQ(tidalCommGrow(nullptr, 3, &id, 3, &out, nullptr), tidalInvalidArgument);
  EXPECT_THAT(tidalGetLastError(nullptr), HasSubstr("rank 3 is out of range 0..2"));
  EXPECT_EQ(tidalCommGetUniqueId(comm_, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("uniqueId is NULL"));
  // The grow id of a one-rank communicator: a second one is refused until consumed.
  EXPECT_EQ(tidalCommGetUniqueId(comm_, &id), tidalSuccess) << last();
  EXPECT_EQ(tidalCommGetUniqueId(comm_, &id), tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("not been consumed"));
}

TEST_F(MembershipArgs, RevokedCommunicatorRefusesCallsButReportsSuccess) {
  ASSERT_EQ(tidalCommRevoke(comm_, 0), tidalSuccess) << last();
  tidalResult_t state = tidalInternalError;
  EXPECT_EQ(tidalCommGetAsyncError(comm_, &state), tidalSuccess);
  EXPECT_EQ(state, tidalSuccess);
  EXPECT_EQ(tidalAllReduce(a_.data(), b_.data(), 16, tidalFloat32, tidalSum, comm_, nullptr),
            tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("revoked by tidalCommRevoke"));
  EXPECT_EQ(tidalCommFinalize(comm_), tidalInvalidUsage);
  // Split still works on a revoked communicator.
  tidalComm_t out = nullptr;
  ASSERT_EQ(tidalCommSplit(comm_, 0, 0, &out, nullptr), tidalSuccess) << last();
  EXPECT_EQ(exactAllReduces(out, {0}, 0, 2, 16), kOk);
  tidalCommDestroy(out);
}

TEST_F(MembershipArgs, SuspendRefusesCallsUntilResumeAndReportsMemory) {
  EXPECT_EQ(tidalCommSuspend(comm_, 0x4), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("flags 0x4"));
  EXPECT_EQ(tidalCommResume(comm_), tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("not suspended"));
  uint64_t v = 99;
  ASSERT_EQ(tidalCommMemStats(comm_, tidalStatGpuMemSuspended, &v), tidalSuccess);
  EXPECT_EQ(v, 0u);
  ASSERT_EQ(tidalCommSuspend(comm_, TIDAL_SUSPEND_MEM), tidalSuccess) << last();
  EXPECT_EQ(tidalCommSuspend(comm_, 0), tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("already suspended"));
  ASSERT_EQ(tidalCommMemStats(comm_, tidalStatGpuMemSuspended, &v), tidalSuccess);
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(tidalAllReduce(a_.data(), b_.data(), 16, tidalFloat32, tidalSum, comm_, nullptr),
            tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("suspended communicator"));
  ASSERT_EQ(tidalCommResume(comm_), tidalSuccess) << last();
  EXPECT_EQ(exactAllReduces(comm_, {0}, 0, 2, 16), kOk);
  // Host buffers only here: no device memory is held.
  ASSERT_EQ(tidalCommMemStats(comm_, tidalStatGpuMemTotal, &v), tidalSuccess);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(tidalCommMemStats(comm_, tidalStatGpuMemTotal, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("value is NULL"));
  tidalCommMemStat_t bad;
  const int seven = 7;
  std::memcpy(&bad, &seven, sizeof bad);
  EXPECT_EQ(tidalCommMemStats(comm_, bad, &v), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("stat 7 is not a tidalCommMemStat_t"));
}

}  // namespace
