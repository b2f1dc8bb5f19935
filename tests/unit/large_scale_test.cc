// Predictions at scale (src/tuner/large_scale.h): simulating host 0's ranks
// for all gives exactly what simulating every rank gives, for the schedules
// that repeat from host to host; schedules that do not (trees) are found
// out and simulated rank by rank, or refused beyond the budget; and the
// one-host simulation reaches the seed's 16,384 ranks. A fat tree above the
// hosts slows exactly the messages that cross its oversubscribed spine
// links, rank by rank and with one host standing for all.
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
                       HostLayout layout, const LinkModel& links = model()) {
  std::vector<std::string> keys;
  std::vector<int> hostOf;
  for (int r = 0; r < layout.nranks(); ++r) {
    keys.push_back("h" + std::to_string(r / layout.ranksPerHost));
    hostOf.push_back(r / layout.ranksPerHost);
  }
  std::vector<coll::Topology> topologies;
  for (int r = 0; r < layout.nranks(); ++r)
    topologies.push_back(coll::Topology::fromHostKeys(keys, r));
  return predictMicros(coll::everyRank(build, args, topologies), hostOf, links);
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
      // Under a fat tree of 2 hosts a leaf at 3:1. Where leaves are equal,
      // one host stands for all and its message's copies share the spine
      // links and end together, where rank by rank the first copy takes
      // the room and the next waits: two approximations of sharing, which
      // differ most for small messages over many rounds (recursive doubling
      // at 1 KiB: 20%, the copies' common end holding up the next round),
      // within 7% for the rest here. With a short last leaf, every rank.
      LinkModel tree = model();
      tree.hostsPerLeaf = 2;
      tree.oversubscription = 3;
      tree.spineAlphaUs = 1;
      const double treeReference = everyRankMicros(cand.build, args, c.layout, tree);
      const auto q = predictAtScale(cand.build, args, c.layout, tree);
      if (c.layout.hosts % 2 == 0) {
        EXPECT_EQ(q.method, c.expectedMethod);
        EXPECT_NEAR(q.micros.value_or(-1), treeReference, treeReference * 0.25)
            << "bytes " << bytes << ", fat tree";
      } else {
        EXPECT_EQ(q.method, "every rank");
        EXPECT_NEAR(q.micros.value_or(-1), treeReference, treeReference * 1e-9)
            << "bytes " << bytes << ", fat tree";
      }
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

// The test links (network: 10 us + 100 MB/s) under a fat tree of
// `hostsPerLeaf` hosts a leaf.
LinkModel fatTree(int hostsPerLeaf, double oversubscription, double spineAlpha) {
  LinkModel m = model();
  m.hostsPerLeaf = hostsPerLeaf;
  m.oversubscription = oversubscription;
  m.spineAlphaUs = spineAlpha;
  return m;
}

// One message, host 0 to host 1: within a leaf it costs what it costs
// without the tree; between leaves it flows at the leaf's spine links'
// share (one rank under the leaf: 100 MB/s / oversubscription) and takes
// the spine's extra start-up.
TEST(FatTree, AMessageBetweenLeavesFlowsAtTheSpineLinksShare) {
  std::vector<coll::Schedule> s(2);
  s[0].sends.push_back({1, {coll::Buffer::Send, 0}, 100000, -1});
  coll::RecvOp recv{};
  recv.peer = 0;
  recv.bytes = 100000;
  s[1].recvs.push_back(recv);
  const std::vector<int> hostOf{0, 1};
  EXPECT_NEAR(predictMicros(s, hostOf, model()), 10 + 1000, 1e-9);
  EXPECT_NEAR(predictMicros(s, hostOf, fatTree(2, 4, 3)), 10 + 1000, 1e-9) << "one leaf";
  EXPECT_NEAR(predictMicros(s, hostOf, fatTree(1, 4, 3)), 10 + 3 + 4000, 1e-9);
  EXPECT_NEAR(predictMicros(s, hostOf, fatTree(1, 1, 3)), 10 + 3 + 1000, 1e-9);
}

// Recursive doubling on 8 hosts x 1 rank, 4 hosts a leaf: only the last
// round (partners 4 apart) crosses the spine, and there all 4 hosts of a
// leaf send at once. At 4:1 the leaf's spine links carry one rank's
// bandwidth, so that round's transfer takes 4 times as long: 3 x bytes /
// beta more in all, plus the spine's start-up. Non-blocking (1:1), only the
// start-up. One host standing for all (host xor) predicts the same.
TEST(FatTree, OnlyTheRoundThatCrossesTheSpineSlowsDown) {
  const HostLayout layout{8, 1};
  const auto rd = coll::flat<coll::recursiveDoublingAllReduce>;
  const size_t bytes = 80000;
  const auto args = argsOf(Collective::AllReduce, bytes, layout, size_t{1} << 20);
  const double base = everyRankMicros(rd, args, layout);
  const double oversubscribed = everyRankMicros(rd, args, layout, fatTree(4, 4, 2));
  EXPECT_NEAR(oversubscribed - base, 3.0 * bytes / 100.0 + 2, 1e-6);
  EXPECT_NEAR(everyRankMicros(rd, args, layout, fatTree(4, 1, 2)) - base, 2, 1e-6);
  const auto p = predictAtScale(rd, args, layout, fatTree(4, 4, 2));
  EXPECT_EQ(p.method, "host xor");
  EXPECT_NEAR(p.micros.value_or(-1), oversubscribed, oversubscribed * 1e-9);
}

// A ring crosses each leaf boundary with one message per step: while the
// spine links carry at least one rank's bandwidth (4 hosts a leaf at 2:1)
// it runs as on one switch; at 8:1 the crossing hops are the slow ones and
// the whole pipeline waits for them. Host shift agrees with every rank.
TEST(FatTree, ARingIsSlowedOnlyWhenOneMessageOverfillsTheSpineLinks) {
  const HostLayout layout{8, 2};
  const auto ring = coll::flat<coll::ringAllReduce>;
  const auto args = argsOf(Collective::AllReduce, 16 * 4096 * 3, layout, 8192);
  const double base = everyRankMicros(ring, args, layout);
  EXPECT_NEAR(everyRankMicros(ring, args, layout, fatTree(4, 2, 0)), base, base * 1e-9);
  const double slow = everyRankMicros(ring, args, layout, fatTree(4, 16, 0));
  EXPECT_GT(slow, base * 1.5);
  for (const double f : {2.0, 16.0}) {
    const auto p = predictAtScale(ring, args, layout, fatTree(4, f, 0));
    EXPECT_EQ(p.method, "host shift");
    const double reference = everyRankMicros(ring, args, layout, fatTree(4, f, 0));
    EXPECT_NEAR(p.micros.value_or(-1), reference, reference * 1e-9) << "oversubscription " << f;
  }
}

// A non-blocking fat tree (1:1) has room for every message that can flow at
// once, so a pipelined Rabenseifner (many chunks in flight, ranks running
// ahead of one another) takes what it takes on one switch, rank by rank
// and by XOR symmetry. (Kept as a first come, first served queue in the
// simulation's order, the spine links were booked far ahead by ranks that
// ran ahead, which made it 3x slower at the seed's scale.) At 8:1 it slows.
TEST(FatTree, NonBlockingItCostsNothing) {
  const HostLayout layout{16, 2};
  const auto rab = coll::flat<coll::rabenseifnerAllReduce>;
  const auto args = argsOf(Collective::AllReduce, 32 * 4096 * 8, layout, 4096);
  const double base = everyRankMicros(rab, args, layout);
  EXPECT_NEAR(everyRankMicros(rab, args, layout, fatTree(4, 1, 0)), base, base * 1e-9);
  const auto p = predictAtScale(rab, args, layout, fatTree(4, 1, 0));
  EXPECT_EQ(p.method, "host xor");
  EXPECT_NEAR(p.micros.value_or(-1), base, base * 1e-9);
  EXPECT_GT(everyRankMicros(rab, args, layout, fatTree(4, 8, 0)), base * 1.5);
}

TEST(FatTree, TheModelFileSaysIt) {
  LinkModel m;
  m.read("hosts_per_leaf 16\noversubscription 3.5\nspine_alpha_us 1.5\n", "test");
  EXPECT_EQ(m.hostsPerLeaf, 16);
  EXPECT_EQ(m.oversubscription, 3.5);
  EXPECT_EQ(m.spineAlphaUs, 1.5);
  m.read("hosts_per_leaf 0\n", "test");
  EXPECT_EQ(m.hostsPerLeaf, 0);
  EXPECT_THROW(m.read("oversubscription 0.5\n", "test"), Error);
  EXPECT_THROW(m.read("hosts_per_leaf 2.5\n", "test"), Error);
}

}  // namespace
}  // namespace tidal::tuner
