// Runs tidal-sim the way a user would and checks its tables.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "subprocess.h"

namespace {

// The row of `bytes` in the table headed "## <heading>...", split at
// whitespace: bytes, one value per algorithm, the fastest.
std::vector<std::string> row(const std::string& out, const std::string& heading,
                             const std::string& bytes) {
  bool in = false;
  for (const auto& line : tidal::testing::lines(out)) {
    if (line.rfind("## " + heading, 0) == 0) in = true;
    if (!in) continue;
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string f; words >> f;) fields.push_back(f);
    if (!fields.empty() && fields[0] == bytes) return fields;
    if (line.rfind("# simulated", 0) == 0) in = false;
  }
  return {};
}

TEST(TidalSim, PrintsATablePerCollectiveAndHostCount) {
  const auto r = tidal::testing::run({TIDAL_SIM_PATH, "--hosts", "4,8", "-p", "2", "-b", "8", "-e",
                                      "64K", "-f", "8", "-c", "AllReduce,Broadcast"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // bytes, ring, rd, rabenseifner, tree, hier, fastest.
  const auto small = row(r.out, "AllReduce, 4 hosts x 2 ranks = 8 ranks", "8");
  ASSERT_EQ(small.size(), 7u) << r.out;
  EXPECT_LT(std::stod(small[2]), std::stod(small[1])) << "recursive doubling beats the ring at 8 B";
  EXPECT_EQ(small[6], "rd") << r.out;
  // Broadcast: bytes, chain, tree, fastest.
  const auto bcast = row(r.out, "Broadcast, 8 hosts x 2 ranks = 16 ranks", "32768");
  ASSERT_EQ(bcast.size(), 4u) << r.out;
  EXPECT_GT(std::stod(bcast[1]), 0) << r.out;
  EXPECT_NE(r.out.find("ring: host shift"), std::string::npos) << r.out;
}

// The seed's cluster: 16,384 ranks, one host's ranks simulated for all. A
// 1 GiB bucket crosses between hosts once in the hierarchy and twice in the
// flat ring, over NICs 150 times slower than NVLink here: the hierarchy wins.
TEST(TidalSim, TheSeedPresetReachesSixteenThousandRanks) {
  const auto r = tidal::testing::run(
      {TIDAL_SIM_PATH, "--preset", "seed", "-b", "1G", "-e", "1G", "-a", "ring,hier"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("network 6.00 us + 45000 MB/s"), std::string::npos) << r.out;
  const auto big = row(r.out, "AllReduce, 2048 hosts x 8 ranks = 16384 ranks", "1073741824");
  ASSERT_EQ(big.size(), 4u) << r.out;
  EXPECT_LT(std::stod(big[2]), std::stod(big[1])) << r.out;
  EXPECT_EQ(big[3], "hier") << r.out;
  EXPECT_NE(r.out.find("hier: host shift."), std::string::npos) << r.out;
}

// A fat tree: 8 hosts, 4 a leaf. Recursive doubling's last round sends
// every host's whole buffer across the spine at once; at 4:1 that round
// takes about 4 times as long, while the ring's one crossing message per
// step still fits the spine links' share at 2:1.
TEST(TidalSim, AnOversubscribedFatTreeSlowsWhatCrossesIt) {
  const auto at = [](const char* oversubscription) {
    return tidal::testing::run({TIDAL_SIM_PATH, "--hosts", "8", "-b", "256K", "-e", "256K", "-a",
                                "ring,rd", "--leaf-hosts", "4", "--oversubscription",
                                oversubscription});
  };
  const auto flat = tidal::testing::run(
      {TIDAL_SIM_PATH, "--hosts", "8", "-b", "256K", "-e", "256K", "-a", "ring,rd"});
  const auto two = at("2"), four = at("4");
  ASSERT_EQ(flat.exitCode, 0) << flat.err;
  ASSERT_EQ(four.exitCode, 0) << four.err;
  EXPECT_NE(flat.out.find("one non-blocking switch"), std::string::npos) << flat.out;
  EXPECT_NE(four.out.find("fat tree: 4 hosts per leaf, leaf-to-spine links oversubscribed 4.00:1"),
            std::string::npos)
      << four.out;
  const char* heading = "AllReduce, 8 hosts x 1 ranks = 8 ranks";
  const auto f = row(flat.out, heading, "262144"), t2 = row(two.out, heading, "262144"),
             t4 = row(four.out, heading, "262144");
  ASSERT_EQ(f.size(), 4u) << flat.out;  // bytes, ring, rd, fastest
  ASSERT_EQ(t4.size(), 4u) << four.out;
  EXPECT_EQ(t2[1], f[1]) << "the ring at 2:1";
  EXPECT_GT(std::stod(t4[2]), std::stod(f[2]) * 1.5) << "recursive doubling at 4:1";
}

TEST(TidalSim, RefusesBadInput) {
  const auto leaf = tidal::testing::run({TIDAL_SIM_PATH, "--oversubscription", "0.5"});
  EXPECT_NE(leaf.exitCode, 0);
  EXPECT_NE(leaf.err.find("--oversubscription"), std::string::npos) << leaf.err;
  const auto hosts = tidal::testing::run({TIDAL_SIM_PATH, "--hosts", "0"});
  EXPECT_NE(hosts.exitCode, 0);
  EXPECT_NE(hosts.err.find("--hosts"), std::string::npos) << hosts.err;
  const auto sizes = tidal::testing::run({TIDAL_SIM_PATH, "-b", "2K", "-e", "1K"});
  EXPECT_NE(sizes.exitCode, 0);
  EXPECT_NE(sizes.err.find("at most --maxbytes"), std::string::npos) << sizes.err;
  const auto unit = tidal::testing::run({TIDAL_SIM_PATH, "-b", "8X"});
  EXPECT_NE(unit.exitCode, 0);
  EXPECT_NE(unit.err.find("'8X'"), std::string::npos) << unit.err;
  const auto model = tidal::testing::run({TIDAL_SIM_PATH, "--model", "/nonexistent/links.txt"});
  EXPECT_EQ(model.exitCode, 1);
  EXPECT_NE(model.err.find("cannot read --model /nonexistent/links.txt"), std::string::npos)
      << model.err;
  const auto collective = tidal::testing::run({TIDAL_SIM_PATH, "-c", "AllToAll"});
  EXPECT_NE(collective.exitCode, 0);
  EXPECT_NE(collective.err.find("'AllToAll'"), std::string::npos) << collective.err;
}

}  // namespace
