// Predictions at scale (src/tuner/large_scale.h): simulating host 0's ranks
// for all gives exactly what simulating every rank gives, for the schedules
// that repeat from host to host; schedules that do not (trees) are found
// out and simulated rank by rank, or refused beyond the budget; and the
// one-host simulation reaches the seed's 16,384 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/any_rank.h"
#include "collectives/double_binary_tree.h"
#include "collectives/schedule.h"
#include "core/error.h"
#include "test_link_model.h"
#include "tuner/candidates.h"
#include "tuner/large_scale.h"
#include "tuner/schedule_time.h"

namespace tidal::tuner {
namespace {

LinkModel model() { return test::testLinkModel(); }

coll::CollectiveArgs argsOf(Collective c, size_t bytes, HostLayout layout, size_t chunk) {
  return {
      0,    layout.nranks(), elementsFor(c, bytes, layout.nranks()), tidalUint8, tidalSum, 0, chunk,
      false};
}

// Every rank's schedule through the plain model, the reference.
double everyRankMicros(const coll::AnyRankBuilder& build, coll::CollectiveArgs args,
                       HostLayout layout) {
  std::vector<std::string> keys;
  std::vector<int> hostOf;
  for (int r = 0; r < layout.nranks(); ++r) {
    keys.push_back("h" + std::to_string(r / layout.ranksPerHost));
    hostOf.push_back(r / layout.ranksPerHost);
  }
  std::vector<coll::Topology> topologies;
  for (int r = 0; r < layout.nranks(); ++r)
    topologies.push_back(coll::Topology::fromHostKeys(keys, r));
  return predictMicros(coll::everyRank(build, args, topologies), hostOf, model());
}

struct Case {
  Collective collective;
  const char* algorithm;
  HostLayout layout;
  const char* expectedMethod;
};

class HostSymmetry : public ::testing::TestWithParam<Case> {};

// Sizes that cut evenly over the ranks (a ring's segments equal), in a few
// pipeline chunks and in one. The hierarchical AllGather and ReduceScatter
// order their sends by the host's own index (host h starts with the block
// it holds), so they do not repeat operation by operation, are found out,
// and are simulated rank by rank.
TEST_P(HostSymmetry, OneHostForAllPredictsWhatEveryRankDoes) {
  const Case c = GetParam();
  const int n = c.layout.nranks();
  for (const size_t bytes : {static_cast<size_t>(n) * 64, static_cast<size_t>(n) * 4096 * 3}) {
    for (const auto& cand : candidatesFor(c.collective)) {
      if (std::string(cand.name) != c.algorithm) continue;
      const auto args = argsOf(c.collective, bytes, c.layout, 8192);
      const auto p = predictAtScale(cand.build, args, c.layout, model());
      ASSERT_TRUE(p.micros.has_value()) << p.method;
      std::string why;
      hostSymmetryOf(cand.build, args, c.layout, &why);
      EXPECT_EQ(p.method, c.expectedMethod) << "bytes " << bytes << ": " << why;
      const double reference = everyRankMicros(cand.build, args, c.layout);
      EXPECT_NEAR(*p.micros, reference, reference * 1e-9) << "bytes " << bytes;
    }
  }
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(collectiveName(info.param.collective)) + "_" + info.param.algorithm + "_" +
         std::to_string(info.param.layout.hosts) + "x" +
         std::to_string(info.param.layout.ranksPerHost);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, HostSymmetry,
    ::testing::Values(Case{Collective::AllReduce, "ring", {8, 4}, "host shift"},
                      Case{Collective::AllReduce, "ring", {6, 1}, "host shift"},
                      Case{Collective::AllReduce, "hier", {8, 4}, "host shift"},
                      Case{Collective::AllReduce, "hier", {5, 3}, "host shift"},
                      Case{Collective::AllReduce, "rabenseifner", {8, 2}, "host xor"},
                      Case{Collective::AllReduce, "rd", {16, 1}, "host xor"},
                      Case{Collective::AllGather, "ring", {8, 2}, "host shift"},
                      Case{Collective::AllGather, "hier", {4, 4}, "every rank"},
                      Case{Collective::ReduceScatter, "ring", {7, 2}, "host shift"},
                      Case{Collective::ReduceScatter, "hier", {4, 2}, "every rank"}),
    caseName);

TEST(HostSymmetryOf, ATreeHasNoneAndSaysWhichRankDiffers) {
  const HostLayout layout{8, 2};
  std::string why;
  const auto kind = hostSymmetryOf(coll::flat<coll::doubleBinaryTreeAllReduce>,
                                   argsOf(Collective::AllReduce, 4096, layout, 1024), layout, &why);
  EXPECT_FALSE(kind.has_value());
  EXPECT_NE(why.find("host shift: rank "), std::string::npos) << why;
  EXPECT_NE(why.find("host xor: rank "), std::string::npos) << why;
}

TEST(PredictAtScale, WithoutSymmetryEveryRankIsSimulatedWithinTheBudgetOnly) {
  const HostLayout layout{8, 2};
  const auto build = coll::flat<coll::doubleBinaryTreeAllReduce>;
  const auto args = argsOf(Collective::AllReduce, 64 * 1024, layout, 1024);
  const auto p = predictAtScale(build, args, layout, model());
  ASSERT_TRUE(p.micros.has_value()) << p.method;
  EXPECT_EQ(p.method, "every rank");
  EXPECT_NEAR(*p.micros, everyRankMicros(build, args, layout), 1e-6);
  const auto refused = predictAtScale(build, args, layout, model(), CountIs::Whole, 100);
  EXPECT_FALSE(refused.micros.has_value());
  EXPECT_NE(refused.method.find("not simulated"), std::string::npos) << refused.method;
}

// Over the budget, a whole buffer that does not cut evenly over the ranks is
// predicted at the next count that does, and says so; a per-rank block is
// never rounded up (that would multiply it by the rank count).
TEST(PredictAtScale, OverTheBudgetAnUnevenBufferIsPredictedAtTheNextEvenCount) {
  const HostLayout layout{64, 1};
  const auto ring = coll::flat<coll::ringAllReduce>;
  const auto uneven = argsOf(Collective::AllReduce, 8, layout, 1024);
  const auto p = predictAtScale(ring, uneven, layout, model(), CountIs::Whole, 10);
  ASSERT_TRUE(p.micros.has_value()) << p.method;
  EXPECT_EQ(p.method, "host shift at 64 elements (the next count that cuts evenly over the ranks)");
  const auto even = predictAtScale(ring, argsOf(Collective::AllReduce, 64, layout, 1024), layout,
                                   model(), CountIs::Whole, 10);
  EXPECT_EQ(even.method, "host shift");
  EXPECT_EQ(*p.micros, even.micros.value_or(-1));
  const auto block = predictAtScale(ring, uneven, layout, model(), CountIs::PerRank, 10);
  EXPECT_FALSE(block.micros.has_value()) << block.method;
}

TEST(PredictAtScale, AnEmptyLayoutIsRefused) {
  const auto build = coll::flat<coll::ringAllReduce>;
  EXPECT_THROW(
      predictAtScale(build, argsOf(Collective::AllReduce, 64, {1, 1}, 64), {0, 8}, model()), Error);
}

// At the seed's scale: a ring's start-ups grow with the ranks, so a ring
// AllReduce of one byte per rank costs 2 (n - 1) hops, about 8 times more at
// 2048 hosts than at 256 (16,383 / 2,047 = 8.003), where the hierarchy's
// host ring has 2 (H - 1) of them between hosts, and the log-round
// schedule grows by only 3 rounds.
TEST(PredictAtScale, ReachesTheSeedsSixteenThousandRanks) {
  LinkModel m = model();
  m.sameHost = {2, 300000};
  m.network = {6, 45000};
  m.reduceBytesPerUs = m.copyBytesPerUs = 1e6;
  const auto ring = coll::flat<coll::ringAllReduce>;
  const auto rd = coll::flat<coll::recursiveDoublingAllReduce>;
  const HostLayout seed{2048, 8}, eighth{256, 8};
  const auto at = [&](const coll::AnyRankBuilder& build, HostLayout layout) {
    const auto p = predictAtScale(
        build, argsOf(Collective::AllReduce, layout.nranks(), layout, size_t{1} << 20), layout, m);
    EXPECT_NE(p.method, "every rank");
    return p.micros.value_or(-1);
  };
  const double ringSeed = at(ring, seed), ringEighth = at(ring, eighth);
  EXPECT_NEAR(ringSeed / ringEighth, 16383.0 / 2047.0, 0.4);
  const double rdSeed = at(rd, seed), rdEighth = at(rd, eighth);
  EXPECT_GT(rdSeed, rdEighth);
  EXPECT_LT(rdSeed, rdEighth * 1.5);
  EXPECT_LT(rdSeed * 100, ringSeed);
}

}  // namespace
}  // namespace tidal::tuner
