// The reducing and gathering collectives' schedules, run against each other
// in memory (schedule_simulator.h): the results must be right.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "collectives/schedule.h"
#include "schedule_simulator.h"

namespace tidal::coll {
namespace {

using test::RankState;
using test::simulate;

CollectiveArgs argsFor(int rank, int n, size_t count, tidalRedOp_t op, int root, size_t chunk) {
  return {rank, n, count, tidalInt32, op, root, chunk, false};
}

// Rank r's element i.
int32_t value(int r, size_t i) { return static_cast<int32_t>((r + 1) * 1000 + i % 997); }

class Schedules : public ::testing::TestWithParam<std::tuple<int, size_t, size_t>> {};

// Runs an AllReduce schedule family on n ranks and checks every rank's sum
// (or max, or, for avg, the truncated mean).
void expectAllReduceSums(const std::function<Schedule(const CollectiveArgs&)>& make, int n,
                         size_t count, size_t chunk, tidalRedOp_t op = tidalSum) {
  std::vector<RankState> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ranks[r].schedule = make(argsFor(r, n, count, op, 0, chunk));
    ranks[r].send.resize(count * 4);
    ranks[r].recv.assign(count * 4, 0);
    for (size_t i = 0; i < count; ++i)
      reinterpret_cast<int32_t*>(ranks[r].send.data())[i] = value(r, i);
  }
  ASSERT_TRUE(simulate(ranks));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      int64_t sum = 0;
      int32_t max = value(0, i);
      for (int k = 0; k < n; ++k) {
        sum += value(k, i);
        max = std::max(max, value(k, i));
      }
      const auto want = static_cast<int32_t>(op == tidalMax ? max : op == tidalAvg ? sum / n : sum);
      ASSERT_EQ(reinterpret_cast<int32_t*>(ranks[r].recv.data())[i], want)
          << "rank " << r << " i " << i;
    }
  }
}

TEST_P(Schedules, AllReduceSumsEverything) {
  const auto [n, count, chunk] = GetParam();
  expectAllReduceSums(ringAllReduce, n, count, chunk);
}

TEST_P(Schedules, RecursiveDoublingAllReduceSumsEverything) {
  const auto [n, count, chunk] = GetParam();
  expectAllReduceSums(recursiveDoublingAllReduce, n, count, chunk);
  // Every peer it sends to must be one the communicator connects to.
  for (int r = 0; r < n; ++r) {
    const auto peers = recursiveDoublingPeers(r, n);
    for (const auto& op :
         recursiveDoublingAllReduce(argsFor(r, n, count, tidalSum, 0, chunk)).sends) {
      EXPECT_NE(std::find(peers.begin(), peers.end(), op.peer), peers.end()) << "rank " << r;
    }
  }
}

using Builder = std::function<Schedule(const CollectiveArgs&)>;

// Runs an AllGather schedule family on n ranks and checks every rank's blocks.
void expectAllGatherBlocks(const Builder& make, int n, size_t count, size_t chunk) {
  std::vector<RankState> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ranks[r].schedule = make(argsFor(r, n, count, tidalSum, 0, chunk));
    ranks[r].send.resize(count * 4);
    ranks[r].recv.assign(count * 4 * static_cast<size_t>(n), 0);
    for (size_t i = 0; i < count; ++i)
      reinterpret_cast<int32_t*>(ranks[r].send.data())[i] = value(r, i);
  }
  ASSERT_TRUE(simulate(ranks));
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < n; ++k) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(
            reinterpret_cast<int32_t*>(ranks[r].recv.data())[static_cast<size_t>(k) * count + i],
            value(k, i))
            << "rank " << r << " block " << k << " i " << i;
      }
    }
  }
}

// Runs a ReduceScatter schedule family on n ranks and checks each rank's
// segment (sum, max, or the truncated mean for avg).
void expectReduceScatterSegments(const Builder& make, int n, size_t count, size_t chunk,
                                 tidalRedOp_t op) {
  std::vector<RankState> ranks(static_cast<size_t>(n));
  const size_t total = count * static_cast<size_t>(n);
  for (int r = 0; r < n; ++r) {
    ranks[r].schedule = make(argsFor(r, n, count, op, 0, chunk));
    ranks[r].send.resize(total * 4);
    ranks[r].recv.assign(count * 4, 0);
    for (size_t i = 0; i < total; ++i)
      reinterpret_cast<int32_t*>(ranks[r].send.data())[i] = value((r + static_cast<int>(i)) % n, i);
  }
  ASSERT_TRUE(simulate(ranks));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const size_t g = static_cast<size_t>(r) * count + i;
      int64_t sum = 0;
      int32_t max = value(0, g);
      for (int k = 0; k < n; ++k) {
        const int32_t v = value((k + static_cast<int>(g)) % n, g);
        sum += v;
        max = std::max(max, v);
      }
      const auto want = static_cast<int32_t>(op == tidalMax ? max : op == tidalAvg ? sum / n : sum);
      ASSERT_EQ(reinterpret_cast<int32_t*>(ranks[r].recv.data())[i], want)
          << "rank " << r << " i " << i;
    }
  }
}

TEST_P(Schedules, AllGatherCollectsEveryBlock) {
  const auto [n, count, chunk] = GetParam();
  expectAllGatherBlocks(ringAllGather, n, count, chunk);
}

TEST_P(Schedules, ReduceScatterGivesEachRankItsSegment) {
  const auto [n, count, chunk] = GetParam();
  expectReduceScatterSegments(ringReduceScatter, n, count, chunk, tidalMax);
}

TEST_P(Schedules, BroadcastAndReduceFromEveryRoot) {
  const auto [n, count, chunk] = GetParam();
  for (int root = 0; root < n; ++root) {
    std::vector<RankState> b(static_cast<size_t>(n)), red(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      b[r].schedule = chainBroadcast(argsFor(r, n, count, tidalSum, root, chunk));
      red[r].schedule = chainReduce(argsFor(r, n, count, tidalSum, root, chunk));
      for (auto* s : {&b[r], &red[r]}) {
        s->send.resize(count * 4);
        s->recv.assign(count * 4, 0);
        for (size_t i = 0; i < count; ++i)
          reinterpret_cast<int32_t*>(s->send.data())[i] = value(r, i);
      }
    }
    ASSERT_TRUE(simulate(b));
    ASSERT_TRUE(simulate(red));
    for (size_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int k = 0; k < n; ++k) sum += value(k, i);
      ASSERT_EQ(reinterpret_cast<int32_t*>(red[root].recv.data())[i], sum) << "root " << root;
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(reinterpret_cast<int32_t*>(b[r].recv.data())[i], value(root, i))
            << "root " << root;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RanksCountsChunks, Schedules,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(0, 1, 7, 1023, 5000),
                                            ::testing::Values(4, 64, 4096)));

class Hierarchy : public ::testing::TestWithParam<std::tuple<int, int, size_t, tidalRedOp_t>> {};

// Wraps a hierarchical builder: ranks interleaved over hosts (so host order is
// not rank order), and every peer a schedule uses must be one the
// communicator connects to.
Builder overHosts(int hostsCount, int n, Schedule (*make)(const CollectiveArgs&, const Topology&)) {
  std::vector<std::string> keys;
  for (int r = 0; r < n; ++r) keys.push_back("h" + std::to_string(r % hostsCount));
  return [keys, make](const CollectiveArgs& a) {
    const Topology t = Topology::fromHostKeys(keys, a.rank);
    EXPECT_TRUE(t.hierarchical());
    Schedule s = make(a, t);
    const auto peers = hierarchicalPeers(t);
    for (const auto& send : s.sends) {
      EXPECT_NE(std::find(peers.begin(), peers.end(), send.peer), peers.end());
    }
    for (const auto& recv : s.recvs) {
      EXPECT_NE(std::find(peers.begin(), peers.end(), recv.peer), peers.end());
    }
    return s;
  };
}

TEST_P(Hierarchy, AllReduceAcrossHostsMatchesTheFlatSum) {
  const auto [hostsCount, perHost, count, op] = GetParam();
  const int n = hostsCount * perHost;
  expectAllReduceSums(overHosts(hostsCount, n, hierarchicalAllReduce), n, count, 64, op);
}

TEST_P(Hierarchy, AllGatherAcrossHostsCollectsEveryBlock) {
  const auto [hostsCount, perHost, count, op] = GetParam();
  const int n = hostsCount * perHost;
  expectAllGatherBlocks(overHosts(hostsCount, n, hierarchicalAllGather), n, count, 64);
}

TEST_P(Hierarchy, ReduceScatterAcrossHostsGivesEachRankItsSegment) {
  const auto [hostsCount, perHost, count, op] = GetParam();
  const int n = hostsCount * perHost;
  expectReduceScatterSegments(overHosts(hostsCount, n, hierarchicalReduceScatter), n, count, 64,
                              op);
}

TEST(Hierarchy, AllGatherPhasesOverlap) {
  // 2 hosts x 2 ranks, one chunk per block: the first send inside the host
  // (this rank's own block) waits for nothing, the second (the block from the
  // other host) for exactly the receive that brought it.
  const Topology t = Topology::fromHostKeys({"a", "a", "b", "b"}, 0);
  const Schedule s = hierarchicalAllGather({0, 4, 16, tidalInt32, tidalSum, 0, 64, false}, t);
  ASSERT_EQ(s.sends.size(), 3u);  // 1 across, then 2 pieces of the column inside
  ASSERT_EQ(s.recvs.size(), 3u);
  EXPECT_EQ(s.sends[1].peer, 1);
  EXPECT_EQ(s.sends[1].afterRecv, -1);
  EXPECT_EQ(s.recvs[0].peer, 2);
  EXPECT_EQ(s.sends[2].afterRecv, 0);
}

INSTANTIATE_TEST_SUITE_P(HostsRanksCounts, Hierarchy,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(2, 3, 4),
                                            ::testing::Values(1, 5, 1000, 4099),
                                            ::testing::Values(tidalSum, tidalAvg, tidalMax)));

TEST(Topology, UnevenHostsAreNotHierarchical) {
  EXPECT_FALSE(Topology::fromHostKeys({"a", "a", "b"}, 0).hierarchical());
  EXPECT_FALSE(Topology::fromHostKeys({"a", "a", "a"}, 0).hierarchical());
  const Topology t = Topology::fromHostKeys({"a", "b", "a", "b"}, 3);
  EXPECT_TRUE(t.hierarchical());
  EXPECT_EQ(t.myHost, 1);
  EXPECT_EQ(t.myLocal, 1);
}

TEST(Schedules, PipelineLetsTheFirstChunkGoBeforeTheStepEnds) {
  // With 4 chunks per segment, the first send of step 1 must depend on the
  // first receive of step 0, not the last: that is the pipelining.
  const auto s = ringAllReduce({0, 2, 16 * 2, tidalInt32, tidalSum, 0, 16, false});
  ASSERT_EQ(s.sends.size(), 8u);
  EXPECT_EQ(s.sends[4].afterRecv, 0);
  EXPECT_EQ(s.sends[5].afterRecv, 1);
}

}  // namespace
}  // namespace tidal::coll
