// Bad input gets an error code and a message naming the argument, its value
// and the rank; it never crashes, hangs or breaks the communicator.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "single_rank.h"
#include "tidal/tidal.h"

namespace {

using ::testing::HasSubstr;

using tidal::test::SingleRank;

TEST_F(SingleRank, NullBuffersAreNamed) {
  EXPECT_EQ(tidalAllReduce(nullptr, b_.data(), 4, tidalFloat32, tidalSum, comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("rank 0"));
  EXPECT_THAT(last(), HasSubstr("sendbuff is NULL"));
  EXPECT_EQ(tidalAllGather(a_.data(), nullptr, 4, tidalFloat32, comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("recvbuff is NULL"));
}

TEST_F(SingleRank, ZeroCountAcceptsNullBuffers) {
  EXPECT_EQ(tidalAllReduce(nullptr, nullptr, 0, tidalFloat32, tidalSum, comm_, nullptr),
            tidalSuccess);
}

TEST_F(SingleRank, OverflowingCountIsRefused) {
  EXPECT_EQ(
      tidalAllReduce(a_.data(), b_.data(), SIZE_MAX / 2, tidalFloat32, tidalSum, comm_, nullptr),
      tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("overflows"));
  EXPECT_THAT(last(), HasSubstr(std::to_string(SIZE_MAX / 2)));
}

TEST_F(SingleRank, UnknownTypeAndOpAreNamed) {
  EXPECT_EQ(tidalAllReduce(a_.data(), b_.data(), 4, static_cast<tidalDataType_t>(42), tidalSum,
                           comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("datatype 42"));
  EXPECT_EQ(tidalReduce(a_.data(), b_.data(), 4, tidalFloat32, static_cast<tidalRedOp_t>(-3), 0,
                        comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("op -3"));
}

TEST_F(SingleRank, RootOutOfRange) {
  EXPECT_EQ(tidalBroadcast(a_.data(), b_.data(), 4, tidalFloat32, 5, comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("root 5"));
  EXPECT_EQ(tidalReduce(a_.data(), b_.data(), 4, tidalFloat32, tidalSum, -1, comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("root -1"));
}

TEST_F(SingleRank, PartialOverlapIsRefused) {
  EXPECT_EQ(tidalAllReduce(a_.data(), a_.data() + 1, 8, tidalFloat32, tidalSum, comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("overlap"));
}

TEST_F(SingleRank, StreamWithoutCudaIsRefused) {
  int fakeStream = 0;
  EXPECT_EQ(tidalAllReduce(a_.data(), b_.data(), 4, tidalFloat32, tidalSum, comm_, &fakeStream),
            tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("stream"));
}

TEST_F(SingleRank, ErrorsDoNotBreakTheCommunicator) {
  EXPECT_NE(tidalAllReduce(nullptr, b_.data(), 4, tidalFloat32, tidalSum, comm_, nullptr),
            tidalSuccess);
  EXPECT_EQ(tidalAllReduce(a_.data(), b_.data(), 16, tidalFloat32, tidalAvg, comm_, nullptr),
            tidalSuccess);
  EXPECT_EQ(b_[15], 1.0f);
  tidalResult_t async = tidalInternalError;
  EXPECT_EQ(tidalCommGetAsyncError(comm_, &async), tidalSuccess);
  EXPECT_EQ(async, tidalSuccess);
}

TEST(Api, NullCommIsNamed) {
  float x = 0;
  EXPECT_EQ(tidalAllReduce(&x, &x, 1, tidalFloat32, tidalSum, nullptr, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(std::string(tidalGetLastError(nullptr)), HasSubstr("comm is NULL"));
  int n = 0;
  EXPECT_EQ(tidalCommCount(nullptr, &n), tidalInvalidArgument);
}

TEST(Api, InitRankChecksItsArguments) {
  tidalUniqueId id;
  ASSERT_EQ(tidalGetUniqueId(&id), tidalSuccess);
  tidalComm_t comm;
  EXPECT_EQ(tidalCommInitRank(&comm, 0, id, 0), tidalInvalidArgument);
  EXPECT_THAT(std::string(tidalGetLastError(nullptr)), HasSubstr("nranks 0"));
  EXPECT_EQ(tidalCommInitRank(&comm, 4, id, 4), tidalInvalidArgument);
  EXPECT_THAT(std::string(tidalGetLastError(nullptr)), HasSubstr("rank 4"));
  EXPECT_EQ(tidalCommInitRank(nullptr, 4, id, 0), tidalInvalidArgument);
  tidalUniqueId garbage;
  std::memset(&garbage, 0xff, sizeof garbage);
  EXPECT_EQ(tidalCommInitRank(&comm, 2, garbage, 0), tidalInvalidArgument);
  EXPECT_THAT(std::string(tidalGetLastError(nullptr)), HasSubstr("commId"));
}

TEST(Api, BadSettingsAreNamedAtInit) {
  // Checked before the rendezvous, so every rank fails alike instead of some waiting.
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, const char*>>{{"TIDAL_BUSY_POLL", "sometimes"},
                                                        {"TIDAL_ALLREDUCE_ALGO", "fastest"},
                                                        {"TIDAL_ALLGATHER_ALGO", "rd"},
                                                        {"TIDAL_REDUCESCATTER_ALGO", "tree"},
                                                        {"TIDAL_ALLTOALL_ALGO", "ring"},
                                                        {"TIDAL_GATHER_ALGO", "bruck"},
                                                        {"TIDAL_SCATTER_ALGO", "pairwise"},
                                                        {"TIDAL_GATHER_TREE_BYTES", "-1"}}) {
    // libtidal reads TIDAL_* from the environment at each init.
    setenv(name, value, 1);
    tidalComm_t comms[2];
    EXPECT_EQ(tidalCommInitAll(comms, 2, nullptr), tidalInvalidArgument) << name;
    unsetenv(name);
    const std::string text = tidalGetLastError(nullptr);
    EXPECT_THAT(text, HasSubstr(name));
    EXPECT_THAT(text, HasSubstr(value));
  }
}

TEST(Api, ErrorStringsAreDistinct) {
  for (int a = 0; a < tidalNumResults; ++a) {
    for (int b = a + 1; b < tidalNumResults; ++b) {
      EXPECT_STRNE(tidalGetErrorString(static_cast<tidalResult_t>(a)),
                   tidalGetErrorString(static_cast<tidalResult_t>(b)));
    }
  }
}

TEST(Api, TwoRanksAsThreadsAgreeAndAbortUnblocks) {
  tidalComm_t comms[2];
  ASSERT_EQ(tidalCommInitAll(comms, 2, nullptr), tidalSuccess);
  std::vector<double> v0(1000, 1.5), v1(1000, 2.5);
  std::thread t([&] {
    EXPECT_EQ(
        tidalAllReduce(v1.data(), v1.data(), v1.size(), tidalFloat64, tidalMax, comms[1], nullptr),
        tidalSuccess);
  });
  EXPECT_EQ(
      tidalAllReduce(v0.data(), v0.data(), v0.size(), tidalFloat64, tidalMax, comms[0], nullptr),
      tidalSuccess);
  t.join();
  EXPECT_EQ(v0[999], 2.5);
  EXPECT_EQ(v1[0], 2.5);
  // Rank 1 waits for a partner that never comes; aborting it from another
  // thread must end the wait with an error, long before any timeout.
  std::thread waiter([&] {
    EXPECT_NE(
        tidalAllReduce(v1.data(), v1.data(), v1.size(), tidalFloat64, tidalSum, comms[1], nullptr),
        tidalSuccess);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(tidalCommAbort(comms[1]), tidalSuccess);
  waiter.join();
  EXPECT_EQ(tidalCommDestroy(comms[0]), tidalSuccess);
}

}  // namespace
