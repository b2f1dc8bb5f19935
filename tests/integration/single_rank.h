// A one-rank communicator for argument-checking tests: every call's checks
// run (and most calls complete) without a peer.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tidal/tidal.h"

namespace tidal::test {

class SingleRank : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(tidalCommInitAll(&comm_, 1, nullptr), tidalSuccess); }
  void TearDown() override { tidalCommDestroy(comm_); }
  std::string last() const { return tidalGetLastError(comm_); }
  tidalComm_t comm_ = nullptr;
  std::vector<float> a_ = std::vector<float>(16, 1.0f), b_ = std::vector<float>(16, 0.0f);
};

}  // namespace tidal::test
