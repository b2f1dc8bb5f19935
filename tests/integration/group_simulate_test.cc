// tidalGroupSimulateEnd: a group's predicted time, with nothing run.
//
// Bad input and nesting on one rank; then real forked ranks over a link
// model file with round numbers, where the prediction for a recursive
// doubling AllReduce can be worked out by hand, and where the ranks must
// still be in step (their calls counted alike) after a simulation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "job_fork.h"
#include "rank_exits.h"
#include "single_rank.h"
#include "tidal/tidal.h"

namespace {

using ::testing::HasSubstr;
using tidal::test::ForkedJob;

using GroupSimulate = tidal::test::SingleRank;

std::string lastError() { return tidalGetLastError(nullptr); }

TEST_F(GroupSimulate, OutsideAGroupIsAUsageError) {
  tidalSimInfo_t sim = TIDAL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(tidalGroupSimulateEnd(&sim), tidalInvalidUsage);
  EXPECT_THAT(lastError(), HasSubstr("tidalGroupSimulateEnd: no group is open"));
  EXPECT_EQ(sim.estimatedTime, TIDAL_UNDEF_FLOAT);
}

TEST_F(GroupSimulate, BadSimInfoIsRefusedAndTheGroupStaysOpen) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  ASSERT_EQ(tidalAllReduce(a_.data(), b_.data(), 16, tidalFloat32, tidalSum, comm_, nullptr),
            tidalSuccess);
  EXPECT_EQ(tidalGroupSimulateEnd(nullptr), tidalInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("simInfo is NULL"));
  tidalSimInfo_t sim = TIDAL_SIM_INFO_INITIALIZER;
  sim.size = 4;
  EXPECT_EQ(tidalGroupSimulateEnd(&sim), tidalInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("simInfo has size 4"));
  sim = TIDAL_SIM_INFO_INITIALIZER;
  sim.magic = 0x1234;
  EXPECT_EQ(tidalGroupSimulateEnd(&sim), tidalInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("magic 0x1234"));
  // Still open: tidalGroupEnd runs the AllReduce.
  EXPECT_EQ(b_[0], 0.0f);
  ASSERT_EQ(tidalGroupEnd(), tidalSuccess) << last();
  EXPECT_EQ(b_[0], 1.0f);
}

TEST_F(GroupSimulate, AnInnerLevelOnlyClosesItAndTheOutermostRunsNothing) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  ASSERT_EQ(tidalAllReduce(a_.data(), b_.data(), 16, tidalFloat32, tidalSum, comm_, nullptr),
            tidalSuccess);
  tidalSimInfo_t inner = TIDAL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(tidalGroupSimulateEnd(&inner), tidalSuccess) << lastError();
  EXPECT_EQ(inner.estimatedTime, TIDAL_UNDEF_FLOAT);
  tidalSimInfo_t outer = TIDAL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(tidalGroupSimulateEnd(&outer), tidalSuccess) << lastError();
  // One rank, out of place: the one copy of 64 bytes is all it does.
  EXPECT_GT(outer.estimatedTime, 0.0f);
  EXPECT_LT(outer.estimatedTime, 1.0f);
  EXPECT_EQ(b_[0], 0.0f) << "a simulated group ran its AllReduce";
  // The group is over: a plain call runs.
  ASSERT_EQ(tidalAllReduce(a_.data(), b_.data(), 16, tidalFloat32, tidalSum, comm_, nullptr),
            tidalSuccess);
  EXPECT_EQ(b_[0], 1.0f);
}

TEST_F(GroupSimulate, AnEmptyGroupTakesNoTime) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  tidalSimInfo_t sim = TIDAL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(tidalGroupSimulateEnd(&sim), tidalSuccess) << lastError();
  EXPECT_EQ(sim.estimatedTime, 0.0f);
}

TEST_F(GroupSimulate, AFailedCallFailsTheSimulation) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  EXPECT_EQ(tidalRecv(b_.data(), 4, tidalFloat32, 7, comm_, nullptr), tidalInvalidArgument);
  tidalSimInfo_t sim = TIDAL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(tidalGroupSimulateEnd(&sim), tidalInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("nothing in the group ran"));
  EXPECT_THAT(lastError(), HasSubstr("peer 7"));
  EXPECT_EQ(sim.estimatedTime, TIDAL_UNDEF_FLOAT);
}

TEST_F(GroupSimulate, AnUnpairedSelfSendIsRefusedAsGroupEndWouldRefuseIt) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  ASSERT_EQ(tidalSend(a_.data(), 4, tidalFloat32, 0, comm_, nullptr), tidalSuccess);
  tidalSimInfo_t sim = TIDAL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(tidalGroupSimulateEnd(&sim), tidalInvalidUsage);
  EXPECT_EQ(sim.estimatedTime, TIDAL_UNDEF_FLOAT);
}

// A link model with round numbers (tidalGroupSimulateEnd reads TIDAL_TUNER_FILE):
// every message 100 us plus 1 us per 1000 bytes; reductions and copies free
// for practical purposes.
std::string writeModelFile() {
  const std::string path =
      ::testing::TempDir() + "group_simulate_model_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << "same_host_alpha_us 100\nsame_host_mb_per_s 1000\n"
                      << "network_alpha_us 100\nnetwork_mb_per_s 1000\n"
                      << "reduce_mb_per_s 1e12\ncopy_mb_per_s 1e12\n";
  return path;
}

// Exit codes of a rank, so that the parent names what went wrong.
enum RankExit { kOk = 0, kInit = 10, kCall = 11, kWrongTime = 12, kRan = 13, kOutOfStep = 14 };

int simulatingRank(int rank) {
  tidalComm_t comm = nullptr;
  if (tidalCommInitFromEnv(&comm) != tidalSuccess) return kInit;
  constexpr size_t kCount = 1000;  // 4000 bytes of float32
  std::vector<float> mine(kCount, static_cast<float>(rank + 1)), sums(kCount, -7.0f);
  const auto fails = [&](tidalResult_t r) {
    if (r == tidalSuccess) return false;
    std::fprintf(stderr, "rank %d: %s\n", rank, tidalGetLastError(comm));
    return true;
  };
  const auto simulate = [&](int allReduces, bool sendRecv, float* micros) {
    if (fails(tidalGroupStart())) return false;
    for (int i = 0; i < allReduces; ++i) {
      if (fails(tidalAllReduce(mine.data(), sums.data(), kCount, tidalFloat32, tidalSum, comm,
                               nullptr)))
        return false;
    }
    if (sendRecv) {
      // A swap with the other rank: 4000 bytes each way.
      if (fails(tidalSend(mine.data(), kCount, tidalFloat32, 1 - rank, comm, nullptr)) ||
          fails(tidalRecv(sums.data(), kCount, tidalFloat32, 1 - rank, comm, nullptr)))
        return false;
    }
    tidalSimInfo_t sim = TIDAL_SIM_INFO_INITIALIZER;
    if (fails(tidalGroupSimulateEnd(&sim))) return false;
    *micros = sim.estimatedTime;
    return true;
  };
  float one = 0, two = 0, swap = 0;
  if (!simulate(1, false, &one) || !simulate(2, false, &two) || !simulate(0, true, &swap))
    return kCall;
  // Recursive doubling at 2 ranks: one exchange of the 4000 bytes, which
  // flow for 4 us and land 100 us later; the reduction is free.
  if (std::fabs(one - 104.0f) > 0.01f || std::fabs(two - 2 * one) > 0.01f) {
    std::fprintf(stderr, "rank %d: predicted %g us for one AllReduce, %g for two\n", rank,
                 static_cast<double>(one), static_cast<double>(two));
    return kWrongTime;
  }
  // The swap: a message of at least the 4000 bytes each way (its header may
  // travel as a message of its own), each 100 us plus its bytes.
  if (swap < 104.0f || swap > 210.0f) {
    std::fprintf(stderr, "rank %d: predicted %g us for the swap\n", rank,
                 static_cast<double>(swap));
    return kWrongTime;
  }
  for (const float v : sums) {
    if (v != -7.0f) return kRan;
  }
  // Checked calls are numbered: had a simulation counted one on some rank,
  // this AllReduce would be refused as a mismatch.
  if (fails(
          tidalAllReduce(mine.data(), sums.data(), kCount, tidalFloat32, tidalSum, comm, nullptr)))
    return kOutOfStep;
  for (const float v : sums) {
    if (v != 3.0f) return kOutOfStep;
  }
  // Send/Recv messages are numbered per pair: had a simulated swap counted
  // its messages, this real swap, which only rank 0 simulated first, would
  // be refused ("Send #2 ... Recv #1").
  float ignored = 0;
  if (rank == 0 && !simulate(0, true, &ignored)) return kCall;
  if (fails(tidalGroupStart()) ||
      fails(tidalSend(mine.data(), kCount, tidalFloat32, 1 - rank, comm, nullptr)) ||
      fails(tidalRecv(sums.data(), kCount, tidalFloat32, 1 - rank, comm, nullptr)) ||
      fails(tidalGroupEnd()))
    return kOutOfStep;
  for (const float v : sums) {
    if (v != static_cast<float>(2 - rank)) return kOutOfStep;
  }
  tidalCommDestroy(comm);
  return kOk;
}

class GroupSimulateJob : public ::testing::TestWithParam<const char*> {};

TEST_P(GroupSimulateJob, PredictsByTheModelAndRunsNothing) {
  const std::string model = writeModelFile();
  ForkedJob job(2, simulatingRank,
                {{"TIDAL_NET", GetParam()},
                 {"TIDAL_TUNER_FILE", model},
                 {"TIDAL_ALLREDUCE_ALGO", "rd"},
                 {"TIDAL_TIMEOUT", "60"}});
  tidal::test::expectEveryRankPassed(job.wait(std::chrono::seconds(120)));
  std::remove(model.c_str());
}

INSTANTIATE_TEST_SUITE_P(Transports, GroupSimulateJob, ::testing::Values("tcp", "shm"));

}  // namespace
