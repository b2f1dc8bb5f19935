// Bad input to the point-to-point, AllToAll(v), Gather/Scatter, group and
// split calls: an error code and a message naming the argument, its value
// and the rank; the communicator stays usable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "single_rank.h"
#include "tidal/tidal.h"

namespace {

using ::testing::HasSubstr;

using P2pErrors = tidal::test::SingleRank;

TEST_F(P2pErrors, PeerOutOfRangeIsNamed) {
  EXPECT_EQ(tidalSend(a_.data(), 4, tidalFloat32, 3, comm_, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("rank 0: tidalSend: peer 3 is out of range for 1 ranks"));
  EXPECT_EQ(tidalRecv(b_.data(), 4, tidalFloat32, -1, comm_, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("tidalRecv: peer -1"));
}

TEST_F(P2pErrors, NullBuffersAndArraysAreNamed) {
  EXPECT_EQ(tidalRecv(nullptr, 4, tidalFloat32, 0, comm_, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("recvbuff is NULL (16 bytes expected)"));
  EXPECT_EQ(tidalAlltoAll(a_.data(), nullptr, 4, tidalFloat32, comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("tidalAlltoAll: recvbuff is NULL"));
  size_t counts[1] = {4}, displs[1] = {0};
  EXPECT_EQ(tidalAllToAllv(a_.data(), counts, nullptr, b_.data(), counts, displs, tidalFloat32,
                           comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("sdispls is NULL"));
  size_t huge[1] = {SIZE_MAX - 1}, two[1] = {2};
  EXPECT_EQ(
      tidalAllToAllv(a_.data(), two, huge, b_.data(), counts, displs, tidalFloat32, comm_, nullptr),
      tidalInvalidArgument);
  EXPECT_THAT(last(),
              HasSubstr("sdispls[0] = 18446744073709551614 plus sendcounts[0] = 2 overflows"));
}

TEST_F(P2pErrors, GatherScatterRootIsChecked) {
  EXPECT_EQ(tidalGather(a_.data(), b_.data(), 4, tidalFloat32, 5, comm_, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("tidalGather: root 5 is out of range"));
  EXPECT_EQ(
      tidalScatter(a_.data(), b_.data(), 4, static_cast<tidalDataType_t>(99), 0, comm_, nullptr),
      tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("datatype 99"));
}

TEST_F(P2pErrors, GroupEndWithoutStart) {
  EXPECT_EQ(tidalGroupEnd(), tidalInvalidUsage);
  EXPECT_THAT(std::string(tidalGetLastError(nullptr)), HasSubstr("no group is open"));
}

TEST_F(P2pErrors, BadCallFailsItsGroupAndRunsNothing) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  EXPECT_EQ(tidalSend(a_.data(), 4, tidalFloat32, 0, comm_, nullptr), tidalSuccess);
  EXPECT_EQ(tidalRecv(b_.data(), 4, tidalFloat32, 7, comm_, nullptr), tidalInvalidArgument);
  EXPECT_EQ(tidalGroupEnd(), tidalInvalidArgument);
  EXPECT_THAT(std::string(tidalGetLastError(nullptr)), HasSubstr("nothing in the group ran"));
  EXPECT_THAT(std::string(tidalGetLastError(nullptr)), HasSubstr("peer 7"));
  EXPECT_EQ(b_[0], 0.0f);
  // The communicator is still usable, and the next group is a fresh one.
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  EXPECT_EQ(tidalSend(a_.data(), 4, tidalFloat32, 0, comm_, nullptr), tidalSuccess);
  EXPECT_EQ(tidalRecv(b_.data(), 4, tidalFloat32, 0, comm_, nullptr), tidalSuccess);
  EXPECT_EQ(tidalGroupEnd(), tidalSuccess) << last();
  EXPECT_EQ(b_[0], 1.0f);
}

TEST_F(P2pErrors, UnpairedSelfSendIsAnError) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  EXPECT_EQ(tidalSend(a_.data(), 4, tidalFloat32, 0, comm_, nullptr), tidalSuccess);
  EXPECT_EQ(tidalGroupEnd(), tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("1 send(s) to this rank itself but 0 receive(s)"));
  // A usage error, not a failure of the communicator: it still works.
  float x = 1, y = 0;
  EXPECT_EQ(tidalAllReduce(&x, &y, 1, tidalFloat32, tidalSum, comm_, nullptr), tidalSuccess)
      << last();
}

TEST_F(P2pErrors, SelfSendLongerThanItsReceive) {
  ASSERT_EQ(tidalGroupStart(), tidalSuccess);
  tidalSend(a_.data(), 8, tidalFloat32, 0, comm_, nullptr);
  tidalRecv(b_.data(), 4, tidalFloat32, 0, comm_, nullptr);
  EXPECT_EQ(tidalGroupEnd(), tidalInvalidUsage);
  EXPECT_THAT(last(), HasSubstr("32 bytes but the matching self-receive only 16"));
}

TEST_F(P2pErrors, SplitArgumentsAreChecked) {
  tidalComm_t sub = nullptr;
  EXPECT_EQ(tidalCommSplit(comm_, -5, 0, &sub, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("color -5 is negative"));
  EXPECT_EQ(tidalCommSplit(comm_, 0, 0, nullptr, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(), HasSubstr("newcomm is NULL"));
  ASSERT_EQ(tidalCommSplit(comm_, 3, 0, &sub, nullptr), tidalSuccess) << last();
  int n = 0;
  tidalCommCount(sub, &n);
  EXPECT_EQ(n, 1);
  float x = 2, y = 0;
  EXPECT_EQ(tidalAllReduce(&x, &y, 1, tidalFloat32, tidalSum, sub, nullptr), tidalSuccess);
  EXPECT_EQ(y, 2.0f);
  tidalCommDestroy(sub);
  EXPECT_EQ(tidalCommSplit(comm_, TIDAL_SPLIT_NOCOLOR, 0, &sub, nullptr), tidalSuccess);
  EXPECT_EQ(sub, nullptr);
}

}  // namespace
