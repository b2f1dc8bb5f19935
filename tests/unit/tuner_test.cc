// The tuner's model (src/tuner): predicted times of hand-made schedules whose
// cost follows from the model's rules, of the real schedules where the
// ordering of algorithms is known, and the link file's checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "core/error.h"
#include "test_link_model.h"
#include "tuner/candidates.h"
#include "tuner/link_model.h"
#include "tuner/model_picks.h"
#include "tuner/schedule_time.h"

namespace tidal::tuner {
namespace {

using coll::Buffer;
using coll::Schedule;

LinkModel model() { return test::testLinkModel(); }

Schedule sendTo(int peer, size_t bytes, int64_t after = -1) {
  Schedule s;
  s.sends.push_back({peer, {Buffer::Send, 0}, bytes, after});
  return s;
}

void addRecv(Schedule& s, int peer, size_t bytes, bool reduce = false) {
  s.recvs.push_back({peer, {Buffer::Recv, 0}, bytes, reduce, {Buffer::Send, 0}, 0});
}

TEST(TunerModel, OneMessageCostsAlphaPlusBytesOverBandwidthOfItsLinkClass) {
  std::vector<Schedule> ss{sendTo(1, 1000), Schedule{}};
  addRecv(ss[1], 0, 1000);
  EXPECT_DOUBLE_EQ(predictMicros(ss, {0, 1}, model()), 10.0 + 1000.0 / 100.0);
  EXPECT_DOUBLE_EQ(predictMicros(ss, {0, 0}, model()), 1.0 + 1000.0 / 1000.0);
}

TEST(TunerModel, SendsShareTheSendersLinkAndForwardingWaitsForTheReceive) {
  // Rank 0 sends two messages to rank 1: the second leaves when the first has.
  std::vector<Schedule> two{sendTo(1, 500), Schedule{}};
  two[0].sends.push_back({1, {Buffer::Send, 0}, 500, -1});
  addRecv(two[1], 0, 500);
  addRecv(two[1], 0, 500);
  EXPECT_DOUBLE_EQ(predictMicros(two, {0, 1}, model()), 10.0 + 2 * 5.0);
  // 0 -> 1 -> 2, the forward waiting for the receive, which reduces.
  std::vector<Schedule> chain{sendTo(1, 1000), sendTo(2, 1000, 0), Schedule{}};
  addRecv(chain[1], 0, 1000, true);
  addRecv(chain[2], 1, 1000);
  EXPECT_DOUBLE_EQ(predictMicros(chain, {0, 1, 2}, model()), 2 * (10.0 + 10.0) + 1000.0 / 500.0);
  // A prologue copy delays everything after it.
  chain[0].prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, 4000});
  EXPECT_DOUBLE_EQ(predictMicros(chain, {0, 1, 2}, model()),
                   2.0 + 2 * (10.0 + 10.0) + 1000.0 / 500.0);
}

TEST(TunerModel, AReceiverTakesConcurrentSendersOneAfterAnother) {
  // Ranks 1 and 2 send rank 0 1000 bytes each at once over the network.
  std::vector<Schedule> incast{Schedule{}, sendTo(0, 1000), sendTo(0, 1000)};
  addRecv(incast[0], 1, 1000);
  addRecv(incast[0], 2, 1000);
  EXPECT_DOUBLE_EQ(predictMicros(incast, {0, 1, 2}, model()), 2 * 10.0 + 10.0);
  // Over different link classes they do not share a side.
  EXPECT_DOUBLE_EQ(predictMicros(incast, {0, 0, 2}, model()), 10.0 + 10.0);
}

TEST(TunerModel, MirroredPeersDoJustTheOtherSideOfOneRanksPart) {
  // Rank 1 of 3 sends 1000 bytes to rank 2 and receives 500 from rank 0,
  // and keeps a self-send that its own schedule pairs.
  Schedule mine = sendTo(2, 1000);
  mine.sends.push_back({1, {Buffer::Send, 0}, 8, -1});
  addRecv(mine, 0, 500);
  addRecv(mine, 1, 8);
  const std::vector<Schedule> all = withMirroredPeers(mine, 1, 3);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].sends.size(), 2u);
  ASSERT_EQ(all[0].sends.size(), 1u);
  EXPECT_TRUE(all[0].recvs.empty());
  EXPECT_EQ(all[0].sends[0].peer, 1);
  EXPECT_EQ(all[0].sends[0].bytes, 500u);
  EXPECT_EQ(all[0].sends[0].afterRecv, -1);
  ASSERT_EQ(all[2].recvs.size(), 1u);
  EXPECT_TRUE(all[2].sends.empty());
  EXPECT_EQ(all[2].recvs[0].peer, 1);
  EXPECT_EQ(all[2].recvs[0].bytes, 1000u);
  // Both flows overlap, each with its own sides; the self-send's 8 bytes
  // cross the same-host class after the 1000 to rank 2 (one sending side).
  EXPECT_DOUBLE_EQ(predictMicros(all, {0, 1, 2}, model()), 10.0 + 1000.0 / 100.0);
  EXPECT_DOUBLE_EQ(predictMicros(all, {0, 0, 0}, model()), 1.0 + 1000.0 / 1000.0 + 8.0 / 1000.0);
}

TEST(TunerModel, HostKeysBecomeEachHostsFirstRank) {
  EXPECT_EQ(hostIdsOf({"b", "a", "b", "c", "a"}), (std::vector<int>{0, 1, 0, 3, 1}));
  EXPECT_TRUE(hostIdsOf({}).empty());
}

TEST(TunerModel, SchedulesThatDoNotMatchOrDeadlockAreRefusedByName) {
  std::vector<Schedule> unmatched{sendTo(1, 8), Schedule{}};
  try {
    predictMicros(unmatched, {0, 1}, model());
    ADD_FAILURE() << "an unreceived message was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 sends rank 1"), std::string::npos) << e.what();
  }
  // Each waits to receive before it sends.
  std::vector<Schedule> cycle{sendTo(1, 8, 0), sendTo(0, 8, 0)};
  addRecv(cycle[0], 1, 8);
  addRecv(cycle[1], 0, 8);
  try {
    predictMicros(cycle, {0, 1}, model());
    ADD_FAILURE() << "a deadlock was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
  }
}

double timeOf(const std::vector<Estimate>& es, const std::string& name) {
  for (const auto& e : es) {
    if (e.algorithm == name) {
      EXPECT_TRUE(e.applies) << name;
      return e.micros;
    }
  }
  ADD_FAILURE() << "no candidate " << name;
  return 0;
}

TEST(TunerModel, LogStepAlgorithmsWinSmallMessagesOnManyHostsAndTheRingLargeOnes) {
  const LinkModel m;  // the defaults
  const Placement oneEach{16, 1};
  const auto ar = estimate(Collective::AllReduce, 8, oneEach, 524288, m);
  EXPECT_LT(timeOf(ar, "rd"), timeOf(ar, "ring") / 2);
  EXPECT_LT(timeOf(ar, "rabenseifner"), timeOf(ar, "ring"));
  const auto bc = estimate(Collective::Broadcast, 8, oneEach, 524288, m);
  EXPECT_LT(timeOf(bc, "tree"), timeOf(bc, "chain") / 2);
  const auto ag = estimate(Collective::AllGather, 16 * 8, oneEach, 524288, m);
  EXPECT_LT(timeOf(ag, "bruck"), timeOf(ag, "ring") / 2);
  // Large ones: the root of a tree sends (Broadcast) or takes (Reduce)
  // everything log2(n) times through its one link; the chain once.
  for (const Collective c : {Collective::Broadcast, Collective::Reduce}) {
    const auto big = estimate(c, size_t{64} << 20, oneEach, 524288, m);
    EXPECT_LT(timeOf(big, "chain"), timeOf(big, "tree")) << collectiveName(c);
  }
}

TEST(TunerModel, CandidatesApplyOnlyWhereTheirSchedulesCan) {
  const LinkModel m;
  // Recursive doubling sends the whole message in one chunk.
  for (const auto& e : estimate(Collective::AllReduce, 1 << 20, {8, 1}, 65536, m)) {
    EXPECT_EQ(e.applies, e.algorithm != "rd" && e.algorithm != "hier") << e.algorithm;
  }
  // Hierarchical: only over hosts with equal rank counts (8 = 4 x 2, not 3 + 3 + 2).
  const auto even = estimate(Collective::AllGather, 8 * 64, {8, 2}, 65536, m);
  const auto uneven = estimate(Collective::AllGather, 8 * 64, {8, 3}, 65536, m);
  EXPECT_TRUE(even.back().applies);
  EXPECT_FALSE(uneven.back().applies);
  EXPECT_EQ(even.back().algorithm, "hier");
  EXPECT_THROW(estimate(Collective::Reduce, 8, {0, 1}, 65536, m), Error);
}

TEST(TunerModel, EveryCandidateRunsToTheEndForEveryRankCountAndPlacement) {
  const LinkModel m;
  for (int n = 1; n <= 17; ++n) {
    for (const int perHost : {1, 2, n}) {
      for (const Collective c :
           {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
            Collective::Broadcast, Collective::Reduce}) {
        for (const size_t bytes : {size_t{8}, size_t{100000}}) {
          for (const auto& e : estimate(c, bytes * static_cast<size_t>(n), {n, perHost}, 4096, m)) {
            if (!e.applies) continue;
            EXPECT_GE(e.micros, 0) << collectiveName(c) << " " << e.algorithm << " n " << n;
            // More than one rank moves something, so it takes time.
            if (n > 1) {
              EXPECT_GT(e.micros, 0) << collectiveName(c) << " " << e.algorithm;
            }
          }
        }
      }
    }
  }
}

TEST(TunerModelPicks, FastestCandidateBySizeBucketForTheCommunicatorsPlacement) {
  const std::vector<int> sixteenHosts{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const ModelPicks p = ModelPicks::compute(sixteenHosts, 524288, LinkModel{});
  EXPECT_EQ(p.pick(Collective::AllReduce, 8), "rd");
  EXPECT_EQ(p.pick(Collective::AllReduce, 2 << 20), "rabenseifner");
  EXPECT_EQ(p.pick(Collective::AllReduce, size_t{1} << 30), "ring");
  EXPECT_EQ(p.pick(Collective::AllGather, 16 * 8), "bruck");
  EXPECT_EQ(p.pick(Collective::Broadcast, 200000), "tree");  // tabled at 262144
  EXPECT_EQ(p.pick(Collective::Broadcast, 16 << 20), "chain");
  EXPECT_EQ(p.pick(Collective::Reduce, 8), "tree");
  // Beyond the table: its largest size.
  EXPECT_EQ(p.pick(Collective::Broadcast, size_t{1} << 40), "chain");
  // Each pick is the fastest that applies at its size.
  for (size_t bytes = 8; bytes <= ModelPicks::kMaxBytes; bytes *= 64) {
    const auto es =
        estimateOnHosts(Collective::AllReduce, bytes, sixteenHosts, 524288, LinkModel{});
    for (const auto& e : es) {
      if (e.applies) {
        EXPECT_GE(e.micros, timeOf(es, p.pick(Collective::AllReduce, bytes)))
            << bytes << " " << e.algorithm;
      }
    }
  }
}

TEST(TunerLinkFile, ReadsEveryNameAndRefusesWhatItCannotUse) {
  LinkModel m;
  m.read(
      "# measured\nsame_host_alpha_us 1.5\nsame_host_mb_per_s 6000 # shm\n\nnetwork_alpha_us 0\n"
      "network_mb_per_s 1250\nreduce_mb_per_s 9000\ncopy_mb_per_s 11000\n",
      "test");
  EXPECT_DOUBLE_EQ(m.sameHost.alphaUs, 1.5);
  EXPECT_DOUBLE_EQ(m.sameHost.bytesPerUs, 6000);
  EXPECT_DOUBLE_EQ(m.network.alphaUs, 0);
  EXPECT_DOUBLE_EQ(m.network.bytesPerUs, 1250);
  EXPECT_DOUBLE_EQ(m.reduceBytesPerUs, 9000);
  EXPECT_DOUBLE_EQ(m.copyBytesPerUs, 11000);
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"network_mb_per_s 0", "line 1: network_mb_per_s must be a positive number"},
           {"\nnetwork_alpha_us -3", "line 2: network_alpha_us must be a positive number"},
           {"network_mb_per_s fast", "line 1: expected 'NAME NUMBER'"},
           {"network_mb_per_s 5 6", "line 1: expected 'NAME NUMBER'"},
           {"latency_us 5", "line 1: unknown name 'latency_us'"}}) {
    try {
      LinkModel bad;
      bad.read(text, "links.txt");
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("links.txt " + says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tidal::tuner
