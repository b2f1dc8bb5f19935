// The rules and settings that pick AllReduce, AllGather, AllToAll, Gather,
// Scatter, Broadcast and Reduce algorithms (src/comm/algorithm_choice.h).
#include "comm/algorithm_choice.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "scoped_env.h"

namespace tidal {
namespace {

using test::ScopedEnv;

constexpr int kMany = AlgorithmChoice::kLogRoundsMinRanks;

TEST(AlgorithmChoice, LogRoundsForSmallBlocksOnManyRanksByDefault) {
  const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  EXPECT_TRUE(c.bruckAllToAll(1024, kMany));
  EXPECT_FALSE(c.bruckAllToAll(1025, kMany));
  EXPECT_FALSE(c.bruckAllToAll(8, kMany - 1));
  EXPECT_TRUE(c.treeGather(4096, kMany));
  EXPECT_FALSE(c.treeGather(4097, kMany));
  EXPECT_FALSE(c.treeGather(8, kMany - 1));
  EXPECT_TRUE(c.treeScatter(4096, 1000));
  EXPECT_FALSE(c.treeScatter(4097, 1000));
}

TEST(AlgorithmChoice, ThresholdsMoveTheSwitch) {
  ScopedEnv bruck("TIDAL_ALLTOALL_BRUCK_BYTES", "0");
  ScopedEnv gather("TIDAL_GATHER_TREE_BYTES", "100");
  const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  EXPECT_TRUE(c.bruckAllToAll(0, kMany));
  EXPECT_FALSE(c.bruckAllToAll(1, kMany));
  EXPECT_TRUE(c.treeGather(100, kMany));
  EXPECT_FALSE(c.treeGather(101, kMany));
  EXPECT_TRUE(c.treeScatter(4096, kMany));  // its own setting
}

TEST(AlgorithmChoice, ForcedAlgorithmsIgnoreSizeAndRanks) {
  {
    ScopedEnv a("TIDAL_ALLTOALL_ALGO", "bruck");
    ScopedEnv g("TIDAL_GATHER_ALGO", "tree");
    ScopedEnv s("TIDAL_SCATTER_ALGO", "direct");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_TRUE(c.bruckAllToAll(size_t{1} << 30, 2));
    EXPECT_TRUE(c.treeGather(size_t{1} << 30, 1));
    EXPECT_FALSE(c.treeScatter(1, 1000));
  }
  ScopedEnv a("TIDAL_ALLTOALL_ALGO", "pairwise");
  ScopedEnv s("TIDAL_SCATTER_ALGO", "tree");
  const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  EXPECT_FALSE(c.bruckAllToAll(1, 1000));
  EXPECT_TRUE(c.treeScatter(size_t{1} << 30, 3));
}

TEST(AlgorithmChoice, BroadcastAndReduceTakeTheTreeForSmallMessagesFromThreeRanks) {
  {
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    constexpr int kFew = AlgorithmChoice::kTreeMinRanks;
    EXPECT_TRUE(c.treeBroadcast(65536, kFew));
    EXPECT_FALSE(c.treeBroadcast(65537, kFew));
    EXPECT_FALSE(c.treeBroadcast(8, kFew - 1));
    EXPECT_TRUE(c.treeReduce(0, 16384));
    EXPECT_TRUE(c.treeReduce(65536, kFew));
    EXPECT_FALSE(c.treeReduce(65537, 1000));
    EXPECT_FALSE(c.treeReduce(8, 2));
  }
  {
    ScopedEnv b("TIDAL_BROADCAST_TREE_BYTES", "100");
    ScopedEnv r("TIDAL_REDUCE_TREE_BYTES", "0");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_TRUE(c.treeBroadcast(100, 3));
    EXPECT_FALSE(c.treeBroadcast(101, 3));
    EXPECT_TRUE(c.treeReduce(0, 3));
    EXPECT_FALSE(c.treeReduce(1, 3));
  }
  {
    ScopedEnv b("TIDAL_BROADCAST_ALGO", "tree");
    ScopedEnv r("TIDAL_REDUCE_ALGO", "chain");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_TRUE(c.treeBroadcast(size_t{1} << 30, 2));
    EXPECT_FALSE(c.treeReduce(8, 1000));
  }
  ScopedEnv b("TIDAL_BROADCAST_ALGO", "chain");
  ScopedEnv r("TIDAL_REDUCE_ALGO", "tree");
  const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  EXPECT_FALSE(c.treeBroadcast(8, 1000));
  EXPECT_TRUE(c.treeReduce(size_t{1} << 30, 1));
}

using AR = AlgorithmChoice::AllReduce;
using AG = AlgorithmChoice::AllGather;

// One host of n ranks, and h hosts of 2.
coll::Topology flat(int n) {
  return coll::Topology::fromHostKeys(std::vector<std::string>(n, "a"), 0);
}
coll::Topology hosts(int h) {
  std::vector<std::string> keys;
  for (int r = 0; r < 2 * h; ++r) keys.push_back("h" + std::to_string(r / 2));
  return coll::Topology::fromHostKeys(keys, 0);
}

TEST(AlgorithmChoice, AllReduceByDefaultGoesRecursiveDoublingThenRabenseifnerThenRing) {
  const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  constexpr size_t kChunk = 524288;
  constexpr int kMin = AlgorithmChoice::kLogStepsMinRanks;
  EXPECT_EQ(c.allReduce(65536, kChunk, kMin, flat(kMin)), AR::RecursiveDoubling);
  EXPECT_EQ(c.allReduce(65537, kChunk, kMin, flat(kMin)), AR::Rabenseifner);
  EXPECT_EQ(c.allReduce(1048576, kChunk, 9, flat(9)), AR::Rabenseifner);
  EXPECT_EQ(c.allReduce(1048577, kChunk, kMin, flat(kMin)), AR::Ring);
  EXPECT_EQ(c.allReduce(65537, kChunk, kMin - 1, flat(kMin - 1)), AR::Ring);
  // Across equal hosts the hierarchy comes first.
  EXPECT_EQ(c.allReduce(65537, kChunk, 8, hosts(4)), AR::Hierarchical);
  EXPECT_EQ(c.allReduce(8, kChunk, 8, hosts(4)), AR::RecursiveDoubling);
  // Recursive doubling sends the whole buffer in one slot.
  EXPECT_EQ(c.allReduce(65536, 4096, kMin, flat(kMin)), AR::Rabenseifner);
}

TEST(AlgorithmChoice, AllGatherByDefaultTakesBruckForSmallBlocksFromFourRanks) {
  const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  constexpr int kMin = AlgorithmChoice::kLogStepsMinRanks;
  EXPECT_EQ(c.allGather(8192, kMin, flat(kMin)), AG::Bruck);
  EXPECT_EQ(c.allGather(8193, kMin, flat(kMin)), AG::Ring);
  EXPECT_EQ(c.allGather(8, kMin - 1, flat(kMin - 1)), AG::Ring);
  EXPECT_EQ(c.allGather(8, 8, hosts(4)), AG::Hierarchical);
}

TEST(AlgorithmChoice, ReduceScatterTakesHalvingForSmallBlocksFromFourRanksUnlessHierarchical) {
  using RS = AlgorithmChoice::ReduceScatter;
  constexpr int kMin = AlgorithmChoice::kLogStepsMinRanks;
  {
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_EQ(c.reduceScatter(65536, kMin, flat(kMin)), RS::Halving);
    EXPECT_EQ(c.reduceScatter(65537, kMin, flat(kMin)), RS::Ring);
    EXPECT_EQ(c.reduceScatter(8, kMin - 1, flat(kMin - 1)), RS::Ring);
    EXPECT_EQ(c.reduceScatter(8, 4, hosts(2)), RS::Hierarchical);
  }
  {
    ScopedEnv b("TIDAL_REDUCESCATTER_HALVING_BYTES", "100");
    EXPECT_EQ(AlgorithmChoice::fromParams(0).reduceScatter(101, 8, flat(8)), RS::Ring);
  }
  {
    ScopedEnv f("TIDAL_REDUCESCATTER_ALGO", "halving");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_EQ(c.reduceScatter(size_t{1} << 30, 2, flat(2)), RS::Halving);
    EXPECT_EQ(c.reduceScatter(8, 4, hosts(2)), RS::Halving);
  }
  {
    ScopedEnv f("TIDAL_REDUCESCATTER_ALGO", "ring");
    EXPECT_EQ(AlgorithmChoice::fromParams(0).reduceScatter(8, 4, hosts(2)), RS::Ring);
  }
  ScopedEnv f("TIDAL_REDUCESCATTER_ALGO", "hier");
  const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  EXPECT_EQ(c.reduceScatter(8, 4, hosts(2)), RS::Hierarchical);
  EXPECT_EQ(c.reduceScatter(8, 8, flat(8)), RS::Ring);  // one host: nothing to split
}

TEST(AlgorithmChoice, AllReduceAndAllGatherSettingsMoveOrForceTheChoice) {
  {
    ScopedEnv rab("TIDAL_ALLREDUCE_RABENSEIFNER_BYTES", "100000");
    ScopedEnv bruck("TIDAL_ALLGATHER_BRUCK_BYTES", "0");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_EQ(c.allReduce(100000, 524288, 4, flat(4)), AR::Rabenseifner);
    EXPECT_EQ(c.allReduce(100001, 524288, 4, flat(4)), AR::Ring);
    EXPECT_EQ(c.allGather(0, 4, flat(4)), AG::Bruck);
    EXPECT_EQ(c.allGather(1, 4, flat(4)), AG::Ring);
  }
  {
    ScopedEnv ar("TIDAL_ALLREDUCE_ALGO", "rabenseifner");
    ScopedEnv ag("TIDAL_ALLGATHER_ALGO", "bruck");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_EQ(c.allReduce(8, 524288, 2, flat(2)), AR::Rabenseifner);
    EXPECT_EQ(c.allReduce(size_t{1} << 30, 524288, 8, hosts(4)), AR::Rabenseifner);
    EXPECT_EQ(c.allGather(size_t{1} << 30, 2, hosts(1)), AG::Bruck);
    EXPECT_EQ(c.allGather(8, 8, hosts(4)), AG::Bruck);
  }
  {
    // Forced recursive doubling beyond a chunk falls back to the ring (or the
    // hierarchy), never to Rabenseifner.
    ScopedEnv ar("TIDAL_ALLREDUCE_ALGO", "rd");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_EQ(c.allReduce(524288, 524288, 4, flat(4)), AR::RecursiveDoubling);
    EXPECT_EQ(c.allReduce(524289, 524288, 4, flat(4)), AR::Ring);
    EXPECT_EQ(c.allReduce(524289, 524288, 8, hosts(4)), AR::Hierarchical);
  }
  {
    ScopedEnv ar("TIDAL_ALLREDUCE_ALGO", "tree");
    const AlgorithmChoice c = AlgorithmChoice::fromParams(0);
    EXPECT_EQ(c.allReduce(8, 524288, 2, flat(2)), AR::DoubleBinaryTree);
    EXPECT_EQ(c.allReduce(size_t{1} << 30, 524288, 8, hosts(4)), AR::DoubleBinaryTree);
  }
  ScopedEnv ag("TIDAL_ALLGATHER_ALGO", "ring");
  EXPECT_EQ(AlgorithmChoice::fromParams(0).allGather(8, 8, flat(8)), AG::Ring);
  ScopedEnv hier("TIDAL_ALLGATHER_ALGO", "hier");
  EXPECT_EQ(AlgorithmChoice::fromParams(0).allGather(8, 8, flat(8)), AG::Ring);
  EXPECT_EQ(AlgorithmChoice::fromParams(0).allGather(1 << 20, 8, hosts(4)), AG::Hierarchical);
}

TEST(AlgorithmChoice, TheTunersModelPicksWhereNothingIsForced) {
  {
    const AlgorithmChoice rules = AlgorithmChoice::fromParams(0);
    EXPECT_FALSE(rules.wantsModel());
  }
  ScopedEnv tuner("TIDAL_TUNER", "model");
  AlgorithmChoice c = AlgorithmChoice::fromParams(0);
  ASSERT_TRUE(c.wantsModel());
  std::vector<int> hostIds;
  for (int r = 0; r < 16; ++r) hostIds.push_back(r);
  c.useModel(std::make_shared<const tuner::ModelPicks>(
      tuner::ModelPicks::compute(hostIds, 524288, tuner::LinkModel{})));
  std::vector<std::string> keys;
  for (int r = 0; r < 16; ++r) keys.push_back("h" + std::to_string(r));
  const auto oneEach = coll::Topology::fromHostKeys(keys, 0);
  // Where the model and the size rules differ (tuner_test has the model's numbers).
  EXPECT_EQ(c.allReduce(2 << 20, 524288, 16, oneEach), AR::Rabenseifner);
  EXPECT_TRUE(c.treeBroadcast(262144, 16));
  EXPECT_EQ(c.allReduce(8, 524288, 16, oneEach), AR::RecursiveDoubling);
  // A forced algorithm still wins.
  ScopedEnv ar("TIDAL_ALLREDUCE_ALGO", "ring");
  ScopedEnv bc("TIDAL_BROADCAST_ALGO", "chain");
  AlgorithmChoice forced = AlgorithmChoice::fromParams(0);
  forced.useModel(std::make_shared<const tuner::ModelPicks>(
      tuner::ModelPicks::compute(hostIds, 524288, tuner::LinkModel{})));
  EXPECT_EQ(forced.allReduce(2 << 20, 524288, 16, oneEach), AR::Ring);
  EXPECT_FALSE(forced.treeBroadcast(262144, 16));
}

TEST(AlgorithmChoice, BadSettingsNameVariableValueAndRank) {
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"TIDAL_ALLREDUCE_ALGO", "bruck"},
           {"TIDAL_ALLGATHER_ALGO", "rd"},
           {"TIDAL_REDUCESCATTER_ALGO", "bruck"},
           {"TIDAL_ALLREDUCE_RABENSEIFNER_BYTES", "-4"},
           {"TIDAL_ALLGATHER_BRUCK_BYTES", "-6"},
           {"TIDAL_ALLTOALL_ALGO", "tree"},
           {"TIDAL_GATHER_ALGO", "bruck"},
           {"TIDAL_SCATTER_ALGO", "ring"},
           {"TIDAL_ALLTOALL_BRUCK_BYTES", "-1"},
           {"TIDAL_GATHER_TREE_BYTES", "-5"},
           {"TIDAL_SCATTER_TREE_BYTES", "-7"},
           {"TIDAL_BROADCAST_ALGO", "ring"},
           {"TIDAL_REDUCE_ALGO", "direct"},
           {"TIDAL_BROADCAST_TREE_BYTES", "-2"},
           {"TIDAL_REDUCE_TREE_BYTES", "-3"}}) {
    ScopedEnv bad(name, value);
    try {
      AlgorithmChoice::fromParams(3);
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      const std::string text = e.what();
      EXPECT_NE(text.find(name), std::string::npos) << text;
      EXPECT_NE(text.find(value), std::string::npos) << text;
      EXPECT_NE(text.find("rank 3"), std::string::npos) << text;
    }
  }
}

}  // namespace
}  // namespace tidal
