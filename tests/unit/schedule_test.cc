// The reducing and gathering collectives' schedules, run against each other
// in memory (schedule_simulator.h): the results must be right.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "collectives/double_binary_tree.h"
#include "collectives/schedule.h"
#include "schedule_simulator.h"

namespace tidal::coll {
namespace {

using test::Landing;
using test::RankState;
using test::simulate;

CollectiveArgs argsFor(int rank, int n, size_t count, tidalRedOp_t op, int root, size_t chunk) {
  return {rank, n, count, tidalInt32, op, root, chunk, false};
}

// Rank r's element i.
int32_t value(int r, size_t i) { return static_cast<int32_t>((r + 1) * 1000 + i % 997); }

// Element i of every rank's input reduced with op (avg: the truncated mean).
int32_t reduced(tidalRedOp_t op, int n, size_t i) {
  int64_t sum = 0;
  int32_t max = value(0, i);
  for (int k = 0; k < n; ++k) {
    sum += value(k, i);
    max = std::max(max, value(k, i));
  }
  return static_cast<int32_t>(op == tidalMax ? max : op == tidalAvg ? sum / n : sum);
}

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
      ASSERT_EQ(reinterpret_cast<int32_t*>(ranks[r].recv.data())[i], reduced(op, n, i))
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

// Runs a Broadcast and a Reduce schedule family from every root, in place
// and out of place, with both landings, and checks every rank's copy of the
// root's input and the root's reduction (sum, max, or the truncated mean for
// avg). Reduce leaves recvbuff alone except at the root.
void expectBroadcastAndReduce(const Builder& broadcast, const Builder& reduceTo, int n,
                              size_t count, size_t chunk, tidalRedOp_t op) {
  for (int root = 0; root < n; ++root) {
    for (const bool inPlace : {false, true}) {
      for (const Landing landing : {Landing::OnArrival, Landing::OnCompletion}) {
        std::vector<RankState> b(static_cast<size_t>(n)), red(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          CollectiveArgs a = argsFor(r, n, count, op, root, chunk);
          a.inPlace = inPlace;
          b[r].schedule = broadcast(a);
          red[r].schedule = reduceTo(a);
          for (const auto& recv : red[r].schedule.recvs) {
            EXPECT_LE(recv.bytes, std::max<size_t>(chunk, 4)) << "a reducing receive > a slot";
          }
          for (auto* st : {&b[r], &red[r]}) {
            st->send.resize(count * 4);
            for (size_t i = 0; i < count; ++i)
              reinterpret_cast<int32_t*>(st->send.data())[i] = value(r, i);
            st->recv.assign(count * 4, 0);
            if (inPlace) {
              st->recv = st->send;
              st->sendAt = st->recv.data();
            }
          }
        }
        ASSERT_TRUE(simulate(b, landing)) << "root " << root;
        ASSERT_TRUE(simulate(red, landing)) << "root " << root;
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(reinterpret_cast<int32_t*>(red[root].recv.data())[i], reduced(op, n, i))
              << "root " << root << " i " << i << " in place " << inPlace;
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(reinterpret_cast<int32_t*>(b[r].recv.data())[i], value(root, i))
                << "root " << root << " rank " << r << " i " << i << " in place " << inPlace;
            if (r != root && !inPlace) {
              ASSERT_EQ(reinterpret_cast<int32_t*>(red[r].recv.data())[i], 0)
                  << "Reduce wrote rank " << r << "'s recvbuff, root " << root;
            }
          }
        }
      }
    }
  }
}

TEST_P(Schedules, BroadcastAndReduceFromEveryRoot) {
  const auto [n, count, chunk] = GetParam();
  expectBroadcastAndReduce(chainBroadcast, chainReduce, n, count, chunk, tidalSum);
}

INSTANTIATE_TEST_SUITE_P(RanksCountsChunks, Schedules,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(0, 1, 7, 1023, 5000),
                                            ::testing::Values(4, 64, 4096)));

// Binomial Broadcast and Reduce at every rank count up to 9 and a few past
// powers of two, every op the engine applies differently (avg: divisor).
class BinomialTrees
    : public ::testing::TestWithParam<std::tuple<int, size_t, size_t, tidalRedOp_t>> {};

TEST_P(BinomialTrees, BroadcastAndReduceFromEveryRoot) {
  const auto [n, count, chunk, op] = GetParam();
  expectBroadcastAndReduce(binomialBroadcast, binomialReduce, n, count, chunk, op);
}

INSTANTIATE_TEST_SUITE_P(RanksCountsChunksOps, BinomialTrees,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17),
                                            ::testing::Values(0, 1, 7, 1000),
                                            ::testing::Values(4, 64, 4096),
                                            ::testing::Values(tidalSum, tidalMax, tidalAvg)));

// Steps a collective takes when every rank sends one message per step and
// completes one receive per step (full duplex): a send starts once the
// receive it waits for has completed and the rank's previous send is done,
// and arrives a step later; receives complete in schedule order. Messages
// match in order per (sender, receiver). The last completion is the time.
int stepsToFinish(const std::vector<Schedule>& ss) {
  const int n = static_cast<int>(ss.size());
  std::map<std::pair<int, int>, std::vector<size_t>> recvsFrom;  // (to, from) -> receives
  std::map<std::pair<int, int>, size_t> matched;
  std::vector<std::vector<int>> arrival(ss.size()), done(ss.size());
  for (int r = 0; r < n; ++r) {
    arrival[r].assign(ss[r].recvs.size(), -1);
    done[r].assign(ss[r].recvs.size(), -1);
    for (size_t i = 0; i < ss[r].recvs.size(); ++i)
      recvsFrom[{r, ss[r].recvs[i].peer}].push_back(i);
  }
  std::vector<size_t> nextSend(ss.size(), 0);
  std::vector<int> sendFree(ss.size(), 0);
  const auto doneAt = [&](int r, int64_t i) -> int {  // -1 while unknown
    auto& d = done[r];
    for (size_t j = 0; j <= static_cast<size_t>(i); ++j) {
      if (d[j] >= 0) continue;
      if (arrival[r][j] < 0) return -1;
      d[j] = std::max(arrival[r][j], j == 0 ? 0 : d[j - 1] + 1);
    }
    return d[static_cast<size_t>(i)];
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      while (nextSend[r] < ss[r].sends.size()) {
        const SendOp& op = ss[r].sends[nextSend[r]];
        int start = sendFree[r];
        if (op.afterRecv >= 0) {
          const int d = doneAt(r, op.afterRecv);
          if (d < 0) break;
          start = std::max(start, d);
        }
        const auto& list = recvsFrom[{op.peer, r}];
        const size_t k = matched[{op.peer, r}]++;
        EXPECT_LT(k, list.size()) << "rank " << r << " sends rank " << op.peer << " too much";
        if (k >= list.size()) return -1;
        arrival[op.peer][list[k]] = start + 1;
        sendFree[r] = start + 1;
        ++nextSend[r];
        moved = true;
      }
    }
  }
  int last = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(nextSend[r], ss[r].sends.size()) << "rank " << r << " deadlocked";
    if (!ss[r].recvs.empty()) last = std::max(last, doneAt(r, ss[r].recvs.size() - 1));
  }
  return last;
}

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

TEST(BinomialTrees, OneChunkTakesCeilLog2StepsAgainstTheChainsNMinusOne) {
  for (int n = 1; n <= 17; ++n) {
    for (const int root : {0, n / 2, n - 1}) {
      std::vector<Schedule> tb, tr, cb, cr;
      for (int r = 0; r < n; ++r) {
        const CollectiveArgs a = argsFor(r, n, 4, tidalSum, root, 64);
        tb.push_back(binomialBroadcast(a));
        tr.push_back(binomialReduce(a));
        cb.push_back(chainBroadcast(a));
        cr.push_back(chainReduce(a));
      }
      EXPECT_EQ(stepsToFinish(tb), ceilLog2(n)) << "Broadcast n " << n << " root " << root;
      EXPECT_EQ(stepsToFinish(tr), ceilLog2(n)) << "Reduce n " << n << " root " << root;
      EXPECT_EQ(stepsToFinish(cb), n - 1) << "chain Broadcast n " << n << " root " << root;
      EXPECT_EQ(stepsToFinish(cr), n - 1) << "chain Reduce n " << n << " root " << root;
    }
  }
}

TEST(BinomialTrees, EachNonRootReceivesOrSendsEachChunkOnceAndTheRootTalksToLog2Peers) {
  constexpr size_t kCount = 40, kChunk = 64;  // 16 elements a chunk: 3 chunks
  for (int n = 1; n <= 17; ++n) {
    for (int root = 0; root < n; ++root) {
      for (int r = 0; r < n; ++r) {
        const CollectiveArgs a = argsFor(r, n, kCount, tidalSum, root, kChunk);
        const Schedule b = binomialBroadcast(a), red = binomialReduce(a);
        std::set<int> bPeers, rPeers;
        for (const auto& op : b.sends) bPeers.insert(op.peer);
        for (const auto& op : red.recvs) rPeers.insert(op.peer);
        if (r == root) {
          EXPECT_TRUE(b.recvs.empty());
          EXPECT_TRUE(red.sends.empty());
          EXPECT_EQ(static_cast<int>(bPeers.size()), ceilLog2(n)) << "n " << n;
          EXPECT_EQ(static_cast<int>(rPeers.size()), ceilLog2(n)) << "n " << n;
          continue;
        }
        ASSERT_EQ(b.recvs.size(), 3u) << "n " << n << " root " << root << " rank " << r;
        ASSERT_EQ(red.sends.size(), 3u) << "n " << n << " root " << root << " rank " << r;
        for (size_t c = 0; c < 3; ++c) {
          EXPECT_EQ(b.recvs[c].peer, b.recvs[0].peer);
          EXPECT_EQ(red.sends[c].peer, red.sends[0].peer);
          EXPECT_EQ(b.recvs[c].dst.offset, c * kChunk);
          EXPECT_EQ(red.sends[c].src.offset, c * kChunk);
        }
        // Up the tree and down it are the same edge.
        EXPECT_EQ(b.recvs[0].peer, red.sends[0].peer);
        EXPECT_EQ(bPeers, rPeers);
        // The communicator connects these at init.
        const auto peers = binomialPeers(r, n);
        for (const int p : bPeers)
          EXPECT_NE(std::find(peers.begin(), peers.end(), p), peers.end()) << "rank " << r;
        EXPECT_NE(std::find(peers.begin(), peers.end(), b.recvs[0].peer), peers.end());
      }
    }
  }
}

// Rabenseifner AllReduce and Bruck AllGather at every rank count up to 9 and
// past powers of two, in place and not, with both landings, every op the
// engine applies differently (avg: divisor).
class LogDepth : public ::testing::TestWithParam<std::tuple<int, size_t, size_t, tidalRedOp_t>> {};

// Every peer a schedule names must be one the communicator connects at init.
void expectPeersAmong(const Schedule& s, const std::vector<int>& peers, int rank) {
  for (const auto& op : s.sends)
    EXPECT_NE(std::find(peers.begin(), peers.end(), op.peer), peers.end()) << "rank " << rank;
  for (const auto& op : s.recvs)
    EXPECT_NE(std::find(peers.begin(), peers.end(), op.peer), peers.end()) << "rank " << rank;
}

// Runs an AllReduce family in place and not, with both landings, checks
// every rank's result, that reducing receives fit a slot and that every peer
// is among `peersOf(rank, n)`.
void expectAllReduceExact(const Builder& make, std::vector<int> (*peersOf)(int, int), int n,
                          size_t count, size_t chunk, tidalRedOp_t op) {
  for (const bool inPlace : {false, true}) {
    for (const Landing landing : {Landing::OnArrival, Landing::OnCompletion}) {
      std::vector<RankState> ranks(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        CollectiveArgs a = argsFor(r, n, count, op, 0, chunk);
        a.inPlace = inPlace;
        ranks[r].schedule = make(a);
        for (const auto& recv : ranks[r].schedule.recvs) {
          if (recv.reduce) {
            EXPECT_LE(recv.bytes, std::max<size_t>(chunk, 4)) << "> a slot";
          }
        }
        expectPeersAmong(ranks[r].schedule, peersOf(r, n), r);
        ranks[r].send.resize(count * 4);
        for (size_t i = 0; i < count; ++i)
          reinterpret_cast<int32_t*>(ranks[r].send.data())[i] = value(r, i);
        ranks[r].recv.assign(count * 4, 0);
        if (inPlace) {
          ranks[r].recv = ranks[r].send;
          ranks[r].sendAt = ranks[r].recv.data();
        }
      }
      ASSERT_TRUE(simulate(ranks, landing)) << "in place " << inPlace;
      for (size_t i = 0; i < count; ++i) {
        const int32_t want = reduced(op, n, i);
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(reinterpret_cast<int32_t*>(ranks[r].recv.data())[i], want)
              << "rank " << r << " i " << i << " in place " << inPlace;
        }
      }
    }
  }
}

TEST_P(LogDepth, RabenseifnerAllReduceIsExact) {
  const auto [n, count, chunk, op] = GetParam();
  expectAllReduceExact(rabenseifnerAllReduce, recursiveDoublingPeers, n, count, chunk, op);
}

TEST_P(LogDepth, DoubleBinaryTreeAllReduceIsExact) {
  const auto [n, count, chunk, op] = GetParam();
  expectAllReduceExact(doubleBinaryTreeAllReduce, doubleBinaryTreePeers, n, count, chunk, op);
}

// Recursive-halving ReduceScatter, in place (recvbuff is the rank's own block
// of sendbuff) and not, with both landings: every rank's block exact, every
// reducing receive within a slot, and about log2(n) steps.
TEST_P(LogDepth, HalvingReduceScatterIsExact) {
  const auto [n, count, chunk, op] = GetParam();
  const size_t total = count * static_cast<size_t>(n);
  const auto input = [&](int r, size_t i) { return value((r + static_cast<int>(i)) % n, i); };
  for (const bool inPlace : {false, true}) {
    for (const Landing landing : {Landing::OnArrival, Landing::OnCompletion}) {
      std::vector<RankState> ranks(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        CollectiveArgs a = argsFor(r, n, count, op, 0, chunk);
        a.inPlace = inPlace;
        ranks[r].schedule = halvingReduceScatter(a);
        for (const auto& recv : ranks[r].schedule.recvs) {
          if (recv.reduce) {
            EXPECT_LE(recv.bytes, std::max<size_t>(chunk, 4)) << "> a slot";
          }
        }
        ranks[r].send.resize(total * 4);
        for (size_t i = 0; i < total; ++i)
          reinterpret_cast<int32_t*>(ranks[r].send.data())[i] = input(r, i);
        ranks[r].recv.assign(count * 4, 0);
        if (inPlace) ranks[r].recvAt = ranks[r].send.data() + static_cast<size_t>(r) * count * 4;
      }
      ASSERT_TRUE(simulate(ranks, landing)) << "in place " << inPlace;
      for (int r = 0; r < n; ++r) {
        const char* out = inPlace ? ranks[r].recvAt : ranks[r].recv.data();
        for (size_t i = 0; i < count; ++i) {
          const size_t g = static_cast<size_t>(r) * count + i;
          int64_t sum = 0;
          int32_t max = input(0, g);
          for (int k = 0; k < n; ++k) {
            sum += input(k, g);
            max = std::max(max, input(k, g));
          }
          const auto want = static_cast<int32_t>(op == tidalMax   ? max
                                                 : op == tidalAvg ? sum / n
                                                                  : sum);
          ASSERT_EQ(reinterpret_cast<const int32_t*>(out)[i], want)
              << "rank " << r << " i " << i << " in place " << inPlace;
        }
      }
    }
  }
  // Where a whole buffer fits a chunk, one message a step: log2(p) halving
  // steps, plus the pairing's two where n is not a power of two (the ring
  // takes n - 1).
  if (count > 0 && count * 4 * static_cast<size_t>(n) <= chunk && n > 1) {
    std::vector<Schedule> ss;
    for (int r = 0; r < n; ++r)
      ss.push_back(halvingReduceScatter(argsFor(r, n, count, op, 0, chunk)));
    const int logSteps = ceilLog2(n + 1) - 1;  // floor(log2 n)
    EXPECT_LE(stepsToFinish(ss), logSteps + ((n & (n - 1)) != 0 ? 2 : 0) + 1) << "n " << n;
  }
}

TEST(DoubleBinaryTree, TwoSpanningTreesOfAtMostTwoChildrenWhereNoRankForwardsInBoth) {
  for (int n = 1; n <= 70; ++n) {
    const BinaryTree trees[2] = {doubleBinaryTree(n, 0), doubleBinaryTree(n, 1)};
    for (const BinaryTree& t : trees) {
      EXPECT_EQ(t.parent[t.root], -1);
      EXPECT_LE(t.treeHeight(), ceilLog2(n + 1)) << "n " << n;
      for (int r = 0; r < n; ++r) {
        EXPECT_LE(t.children[r].size(), 2u) << "n " << n << " rank " << r;
        // Up the parents reaches the root, depth steps later.
        int steps = 0;
        for (int v = r; v != t.root; v = t.parent[v]) {
          ASSERT_GE(t.parent[v], 0) << "n " << n << " rank " << v << " is a second root";
          ASSERT_LE(++steps, n) << "n " << n << ": a cycle";
        }
        EXPECT_EQ(steps, t.depth[r]);
        for (const int c : t.children[r]) {
          EXPECT_EQ(t.parent[c], r);
          EXPECT_GE(t.height[r], t.height[c] + 1);
        }
      }
    }
    if (n % 2 == 0) {
      for (int r = 0; r < n; ++r) {
        EXPECT_FALSE(!trees[0].children[r].empty() && !trees[1].children[r].empty())
            << "n " << n << ": rank " << r << " forwards in both trees";
      }
    }
  }
}

TEST(DoubleBinaryTree, ChunksPipelineUpAndDownTheTrees) {
  // One message per step: a rank sends 4 chunk messages per chunk index (an
  // inner rank of one tree sends its sum up and the result to two children,
  // the leaf of the other sends its input up), so k chunks a tree take at
  // least 4k steps; pipelined, about 4k + 3 log2(n), not k times the
  // 2 log2(n) of one chunk (a rank sends to its two children one after the
  // other: 3 log2(n) steps for one chunk).
  for (const int n : {2, 3, 5, 8, 13, 16, 31, 64}) {
    for (const int chunks : {1, 16}) {
      std::vector<Schedule> ss;
      for (int r = 0; r < n; ++r) {
        // 2 * chunks elements of 4 bytes, 1 element a chunk: chunks per tree.
        ss.push_back(doubleBinaryTreeAllReduce(
            argsFor(r, n, 2 * static_cast<size_t>(chunks), tidalSum, 0, 4)));
      }
      const int steps = stepsToFinish(ss);
      EXPECT_LE(steps, 4 * chunks + 3 * ceilLog2(n + 1) + 4) << "n " << n << " chunks " << chunks;
      EXPECT_GE(steps, 2 * ceilLog2(n) - 1) << "n " << n << " chunks " << chunks;
    }
  }
}

class BruckAllGather : public ::testing::TestWithParam<std::tuple<int, size_t, size_t>> {};

TEST_P(BruckAllGather, CollectsEveryBlockInPlaceOrNot) {
  const auto [n, count, chunk] = GetParam();
  expectAllGatherBlocks(bruckAllGather, n, count, chunk);
  // In place: each rank's block is already at its place in recvbuff.
  for (const Landing landing : {Landing::OnArrival, Landing::OnCompletion}) {
    std::vector<RankState> ranks(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      CollectiveArgs a = argsFor(r, n, count, tidalSum, 0, chunk);
      a.inPlace = true;
      ranks[r].schedule = bruckAllGather(a);
      expectPeersAmong(ranks[r].schedule, binomialPeers(r, n), r);
      ranks[r].recv.assign(count * 4 * static_cast<size_t>(n), 0);
      for (size_t i = 0; i < count; ++i)
        reinterpret_cast<int32_t*>(ranks[r].recv.data())[static_cast<size_t>(r) * count + i] =
            value(r, i);
      ranks[r].sendAt = ranks[r].recv.data() + static_cast<size_t>(r) * count * 4;
    }
    ASSERT_TRUE(simulate(ranks, landing));
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count * static_cast<size_t>(n); ++i) {
        ASSERT_EQ(reinterpret_cast<int32_t*>(ranks[r].recv.data())[i],
                  value(static_cast<int>(i / count), i % count))
            << "rank " << r << " element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RanksCountsChunksOps, LogDepth,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17),
                                            ::testing::Values(0, 1, 7, 1000),
                                            ::testing::Values(4, 64, 4096),
                                            ::testing::Values(tidalSum, tidalMax, tidalAvg)));
INSTANTIATE_TEST_SUITE_P(RanksCountsChunks, BruckAllGather,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17),
                                            ::testing::Values(0, 1, 7, 1000),
                                            ::testing::Values(4, 64, 4096)));

// Which ranks each rank has heard from, directly or through others, once its
// last receive has completed: a send carries what its rank had heard when
// the receive it waits for completed (only itself, when it waits for none),
// and messages match in order per (sender, receiver).
std::vector<std::set<int>> heardFrom(const std::vector<Schedule>& ss) {
  const int n = static_cast<int>(ss.size());
  std::map<std::pair<int, int>, std::vector<size_t>> sendsTo;  // (from, to) -> sends
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < ss[r].sends.size(); ++i) sendsTo[{r, ss[r].sends[i].peer}].push_back(i);
  std::map<std::pair<int, int64_t>, std::set<int>> memo;  // (rank, receive) -> heard after it
  std::function<std::set<int>(int, int64_t)> after = [&](int r, int64_t recv) {
    if (recv < 0) return std::set<int>{r};
    if (auto it = memo.find({r, recv}); it != memo.end()) return it->second;
    std::set<int> out = after(r, recv - 1);
    const int from = ss[r].recvs[static_cast<size_t>(recv)].peer;
    size_t k = 0;  // which receive from `from` this is
    for (int64_t j = 0; j < recv; ++j) k += ss[r].recvs[static_cast<size_t>(j)].peer == from;
    const auto& sends = sendsTo[{from, r}];
    EXPECT_LT(k, sends.size()) << "rank " << r << " receives more than rank " << from << " sends";
    if (k < sends.size()) {
      const auto heard = after(from, ss[from].sends[sends[k]].afterRecv);
      out.insert(heard.begin(), heard.end());
    }
    memo[{r, recv}] = out;
    return out;
  };
  std::vector<std::set<int>> out;
  for (int r = 0; r < n; ++r) out.push_back(after(r, static_cast<int64_t>(ss[r].recvs.size()) - 1));
  return out;
}

TEST(DisseminationBarrier, EveryRankHearsFromEveryRankInCeilLog2Rounds) {
  for (int n = 1; n <= 33; ++n) {
    std::vector<Schedule> ss;
    std::set<int> everyone;
    for (int r = 0; r < n; ++r) {
      ss.push_back(disseminationBarrier(argsFor(r, n, static_cast<size_t>(n), tidalMax, 0, 64)));
      everyone.insert(r);
      expectPeersAmong(ss.back(), binomialPeers(r, n), r);
      for (const auto& recv : ss.back().recvs) EXPECT_LT(recv.dst.offset, static_cast<size_t>(n));
    }
    const auto heard = heardFrom(ss);
    for (int r = 0; r < n; ++r) EXPECT_EQ(heard[r], everyone) << "n " << n << " rank " << r;
    EXPECT_EQ(stepsToFinish(ss), ceilLog2(n)) << "n " << n;
  }
}

TEST(LogDepth, OneMessagePerStepTakesLogRoundsAgainstTheRingsLinearSteps) {
  for (int n = 2; n <= 17; ++n) {
    std::vector<Schedule> bruck, ring, rab;
    const int p = 1 << (ceilLog2(n + 1) - 1);  // largest power of two <= n
    for (int r = 0; r < n; ++r) {
      // One chunk per message: 1 element a block for AllGather; for
      // AllReduce a chunk as large as the whole buffer of n elements.
      bruck.push_back(bruckAllGather(argsFor(r, n, 1, tidalSum, 0, 4096)));
      ring.push_back(ringAllGather(argsFor(r, n, 1, tidalSum, 0, 4096)));
      rab.push_back(
          rabenseifnerAllReduce(argsFor(r, n, static_cast<size_t>(n), tidalSum, 0, 4096)));
    }
    EXPECT_EQ(stepsToFinish(bruck), ceilLog2(n)) << "Bruck n " << n;
    EXPECT_EQ(stepsToFinish(ring), n - 1) << "ring n " << n;
    EXPECT_EQ(stepsToFinish(rab), 2 * ceilLog2(p) + (n == p ? 0 : 2)) << "Rabenseifner n " << n;
  }
}

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
