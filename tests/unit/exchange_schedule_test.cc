// The schedules that move blocks without reducing them (AllToAll pairwise and
// Bruck, Gather and Scatter direct and over a binomial tree), run against
// each other in memory (schedule_simulator.h) for every rank count up to 17,
// every root, in place and not, with chunks small enough to cut blocks. Every
// element names its sender, its receiver and its index; buffers carry guard
// bytes that must survive.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <set>
#include <tuple>
#include <vector>

#include "collectives/schedule.h"
#include "schedule_simulator.h"

namespace tidal::coll {
namespace {

using test::kGuardByte;
using test::Landing;
using test::RankState;
using test::simulate;

using Builder = std::function<Schedule(const CollectiveArgs&)>;

constexpr size_t kGuard = 16;  // bytes behind every user buffer

int32_t pairValue(int from, int to, size_t i) {
  return from * 1000000 + to * 10000 + static_cast<int32_t>(i % 9973);
}

int32_t elementAt(const std::vector<char>& v, size_t byteOffset) {
  int32_t x;
  std::memcpy(&x, v.data() + byteOffset, sizeof x);
  return x;
}

void fill(std::vector<char>& v, size_t byteOffset, size_t count, int from, int to) {
  for (size_t i = 0; i < count; ++i) {
    const int32_t x = pairValue(from, to, i);
    std::memcpy(v.data() + byteOffset + i * 4, &x, sizeof x);
  }
}

bool guarded(const std::vector<char>& v, size_t from) {
  return std::all_of(v.begin() + static_cast<std::ptrdiff_t>(from), v.end(),
                     [](char b) { return b == kGuardByte; });
}

CollectiveArgs argsOf(int rank, int n, size_t count, int root, size_t chunk, bool inPlace) {
  return {rank, n, count, tidalInt32, tidalSum, root, chunk, inPlace};
}

// n ranks, `count` elements per block; chunk in bytes.
class Exchanges : public ::testing::TestWithParam<std::tuple<int, size_t, size_t>> {};

void expectAllToAll(const Builder& make, int n, size_t count, size_t chunk, bool inPlace,
                    Landing landing) {
  const size_t block = count * 4, total = block * static_cast<size_t>(n);
  std::vector<RankState> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& s = ranks[static_cast<size_t>(r)];
    s.schedule = make(argsOf(r, n, count, 0, chunk, inPlace));
    s.send.assign(total + kGuard, kGuardByte);
    s.recv.assign(total + kGuard, kGuardByte);
    for (int to = 0; to < n; ++to) fill(s.send, static_cast<size_t>(to) * block, count, r, to);
    if (inPlace) s.recvAt = s.send.data();
  }
  ASSERT_TRUE(simulate(ranks, landing));
  for (int r = 0; r < n; ++r) {
    const auto& s = ranks[static_cast<size_t>(r)];
    const auto& out = inPlace ? s.send : s.recv;
    for (int from = 0; from < n; ++from) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(elementAt(out, static_cast<size_t>(from) * block + i * 4), pairValue(from, r, i))
            << "rank " << r << " block " << from << " element " << i;
      }
    }
    EXPECT_TRUE(guarded(out, total)) << "rank " << r;
    EXPECT_TRUE(guarded(s.recv, inPlace ? 0 : total)) << "rank " << r;
  }
}

constexpr Landing kLandings[] = {Landing::OnArrival, Landing::OnCompletion};

TEST_P(Exchanges, PairwiseAllToAllDeliversEveryBlock) {
  const auto [n, count, chunk] = GetParam();
  for (bool inPlace : {false, true})
    for (Landing l : kLandings) expectAllToAll(pairwiseAllToAll, n, count, chunk, inPlace, l);
}

TEST_P(Exchanges, BruckAllToAllDeliversEveryBlock) {
  const auto [n, count, chunk] = GetParam();
  for (bool inPlace : {false, true})
    for (Landing l : kLandings) expectAllToAll(bruckAllToAll, n, count, chunk, inPlace, l);
}

// Gather to, then Scatter from, every root.
void expectGatherScatter(const Builder& gather, const Builder& scatter, int n, size_t count,
                         size_t chunk, bool inPlace, Landing landing) {
  const size_t block = count * 4, total = block * static_cast<size_t>(n);
  for (int root = 0; root < n; ++root) {
    const size_t mine = static_cast<size_t>(root) * block;
    std::vector<RankState> g(static_cast<size_t>(n)), s(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const bool alias = inPlace && r == root;
      auto& gr = g[static_cast<size_t>(r)];
      gr.schedule = gather(argsOf(r, n, count, root, chunk, alias));
      gr.send.assign(block + kGuard, kGuardByte);
      fill(gr.send, 0, count, r, root);
      gr.recv.assign(total + kGuard, kGuardByte);
      if (alias) {
        fill(gr.recv, mine, count, r, root);
        gr.sendAt = gr.recv.data() + mine;
      }
      auto& sr = s[static_cast<size_t>(r)];
      sr.schedule = scatter(argsOf(r, n, count, root, chunk, alias));
      sr.send.assign(total + kGuard, kGuardByte);
      if (r == root)
        for (int to = 0; to < n; ++to) fill(sr.send, static_cast<size_t>(to) * block, count, r, to);
      sr.recv.assign(block + kGuard, kGuardByte);
      if (alias) sr.recvAt = sr.send.data() + mine;
    }
    ASSERT_TRUE(simulate(g, landing)) << "Gather to root " << root;
    ASSERT_TRUE(simulate(s, landing)) << "Scatter from root " << root;
    for (int r = 0; r < n; ++r) {
      const auto& gr = g[static_cast<size_t>(r)];
      if (r == root) {
        for (int from = 0; from < n; ++from) {
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(elementAt(gr.recv, static_cast<size_t>(from) * block + i * 4),
                      pairValue(from, root, i))
                << "Gather root " << root << " block " << from << " element " << i;
          }
        }
        EXPECT_TRUE(guarded(gr.recv, total)) << "Gather root " << root;
      } else {
        EXPECT_TRUE(guarded(gr.recv, 0))
            << "Gather root " << root << ": rank " << r << " wrote the recvbuff it does not own";
      }
      const auto& sr = s[static_cast<size_t>(r)];
      const auto& got = (inPlace && r == root) ? sr.send : sr.recv;
      const size_t at = (inPlace && r == root) ? mine : 0;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(elementAt(got, at + i * 4), pairValue(root, r, i))
            << "Scatter root " << root << " rank " << r << " element " << i;
      }
      EXPECT_TRUE(guarded(sr.recv, (inPlace && r == root) ? 0 : block))
          << "Scatter root " << root << " rank " << r;
    }
  }
}

TEST_P(Exchanges, DirectGatherAndScatterFromEveryRoot) {
  const auto [n, count, chunk] = GetParam();
  for (bool inPlace : {false, true})
    for (Landing l : kLandings)
      expectGatherScatter(directGather, directScatter, n, count, chunk, inPlace, l);
}

TEST_P(Exchanges, BinomialGatherAndScatterFromEveryRoot) {
  const auto [n, count, chunk] = GetParam();
  for (bool inPlace : {false, true})
    for (Landing l : kLandings)
      expectGatherScatter(binomialGather, binomialScatter, n, count, chunk, inPlace, l);
}

INSTANTIATE_TEST_SUITE_P(
    RanksCountsChunks, Exchanges,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17),
                       ::testing::Values(0, 1, 7, 1023), ::testing::Values(4, 12, 1 << 20)));

int rounds(int n) { return std::bit_width(static_cast<unsigned>(n - 1)); }

TEST(Bruck, OneMessagePerRoundToRankMinusTwoToTheK) {
  // Unchunked, each round is one message, cut at most where the blocks that
  // arrive for good end and where they wrap around the receiver's recvbuff.
  for (int n : {2, 3, 5, 8, 13, 64, 100}) {
    for (int r : {0, 1, n - 1}) {
      const Schedule s = bruckAllToAll(argsOf(r, n, 3, 0, 1 << 20, false));
      std::set<int> peers;
      for (const auto& op : s.sends) peers.insert(op.peer);
      std::set<int> want;
      for (int k = 0; k < rounds(n); ++k) want.insert(((r - (1 << k)) % n + n) % n);
      EXPECT_EQ(peers, want) << "n " << n << " rank " << r;
      EXPECT_LE(s.sends.size(), static_cast<size_t>(3 * rounds(n))) << "n " << n;
      EXPECT_LE(s.recvs.size(), static_cast<size_t>(3 * rounds(n))) << "n " << n;
      // Round 0 waits for nothing, every later one for the round before.
      EXPECT_EQ(s.sends.front().afterRecv, -1);
      if (rounds(n) > 1) {
        EXPECT_GE(s.sends.back().afterRecv, 0);
      }
    }
  }
}

TEST(Bruck, ForwardedBlocksMoveInRuns) {
  // 64 ranks: 63 own blocks in the prologue (plus the block to itself), and
  // the forwarded ones in runs of 2^k after round k: far fewer copies than the
  // 5 * 32 blocks forwarded.
  const Schedule s = bruckAllToAll(argsOf(5, 64, 3, 0, 1 << 20, false));
  EXPECT_LE(s.prologue.size(), 64u);
  EXPECT_LE(s.recvCopies.size(), 64u);
  EXPECT_GT(s.recvCopies.size(), 0u);
}

TEST(BinomialTree, RootExchangesLog2Messages) {
  for (int n : {2, 3, 7, 8, 9, 100}) {
    for (int root : {0, n / 2, n - 1}) {
      std::set<int> from, to;
      for (const auto& op : binomialGather(argsOf(root, n, 5, root, 1 << 20, false)).recvs)
        from.insert(op.peer);
      for (const auto& op : binomialScatter(argsOf(root, n, 5, root, 1 << 20, false)).sends)
        to.insert(op.peer);
      EXPECT_EQ(from.size(), static_cast<size_t>(rounds(n))) << "n " << n << " root " << root;
      EXPECT_EQ(to, from) << "n " << n << " root " << root;
      // The nearest child (vrank 1) is the rank after the root.
      EXPECT_TRUE(from.count((root + 1) % n)) << "n " << n << " root " << root;
    }
  }
}

}  // namespace
}  // namespace tidal::coll
