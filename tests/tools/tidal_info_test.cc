// Runs tidal-info the way a user would and checks what it reports.
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "subprocess.h"
#include "tidal/tidal.h"

namespace {

// The --params row for `name`, split at whitespace into
// NAME TYPE VALUE SOURCE..., or empty when there is none.
std::vector<std::string> paramRow(const std::string& table, const std::string& name) {
  for (const auto& line : tidal::testing::lines(table)) {
    if (line.rfind(name + " ", 0) != 0) continue;
    std::istringstream in(line);
    std::vector<std::string> fields;
    for (std::string f; in >> f;) fields.push_back(f);
    return fields;
  }
  return {};
}

TEST(TidalInfo, SummaryShowsVersionFeaturesAndKernel) {
  const auto r = tidal::testing::run({TIDAL_INFO_PATH});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("Tidal " TIDAL_RELEASE_STRING " (NCCL API 2.30.0)"), std::string::npos)
      << r.out;
  for (const char* feature : {"ibverbs", "ofi", "cuda", "pmix"}) {
    EXPECT_NE(r.out.find(feature), std::string::npos) << feature << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("Reduction kernel: "), std::string::npos) << r.out;
}

TEST(TidalInfo, ParamsShowValueFromEnvironment) {
  const auto r = tidal::testing::run({TIDAL_INFO_PATH, "--params"},
                                     {"TIDAL_NSOCKS=3", "TIDAL_CONF_FILE=/nonexistent"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto row = paramRow(r.out, "TIDAL_NSOCKS");
  ASSERT_GE(row.size(), 4u) << r.out;
  EXPECT_EQ(row[1], "int");
  EXPECT_EQ(row[2], "3");
  EXPECT_EQ(row[3], "environment");
}

TEST(TidalInfo, ParamsShowValueFromConfigFile) {
  char path[] = "/tmp/tidal_info_test_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string conf = "# a comment\nTIDAL_CHUNK_SIZE = 4096\n";
  ASSERT_EQ(::write(fd, conf.data(), conf.size()), static_cast<ssize_t>(conf.size()));
  ::close(fd);
  const auto r =
      tidal::testing::run({TIDAL_INFO_PATH, "--params"}, {std::string("TIDAL_CONF_FILE=") + path});
  ::unlink(path);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto row = paramRow(r.out, "TIDAL_CHUNK_SIZE");
  ASSERT_GE(row.size(), 6u) << r.out;
  EXPECT_EQ(row[2], "4096");
  EXPECT_EQ(row[3] + " " + row[4] + " " + row[5], std::string("config file ") + path);
}

TEST(TidalInfo, BadOptionExitsTwo) {
  const auto r = tidal::testing::run({TIDAL_INFO_PATH, "--bogus"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
}

}  // namespace

namespace {

// The --tuning row for `bytes` under the section `collective`, split at
// whitespace, or empty.
std::vector<std::string> tuningRow(const std::string& out, const std::string& collective,
                                   const std::string& bytes) {
  bool in = false;
  for (const auto& line : tidal::testing::lines(out)) {
    if (line == collective) in = true;
    if (!in) continue;
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string f; words >> f;) fields.push_back(f);
    if (!fields.empty() && fields[0] == bytes) return fields;
    if (line.empty()) in = false;
  }
  return {};
}

TEST(TidalInfo, TuningPrintsEachAlgorithmsPredictionAndBothPicks) {
  const auto r = tidal::testing::run(
      {TIDAL_INFO_PATH, "--tuning", "--nranks", "16", "--hosts", "16", "--max-bytes", "4096"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("16 ranks on 16 host(s), 1 per host"), std::string::npos) << r.out;
  // bytes, ring, rd, rabenseifner, tree, hier, model picks, rules pick.
  const auto row = tuningRow(r.out, "AllReduce", "8");
  ASSERT_EQ(row.size(), 8u) << r.out;
  EXPECT_EQ(row[5], "-") << "no hierarchy on 1 rank per host";
  EXPECT_LT(std::stod(row[2]), std::stod(row[1])) << "recursive doubling beats the ring at 8 B";
  EXPECT_EQ(row[6], "rd");
  EXPECT_EQ(row[7], "rd");
  const auto bc = tuningRow(r.out, "Broadcast", "4096");
  ASSERT_EQ(bc.size(), 5u) << r.out;
  EXPECT_EQ(bc[4], "tree");
  // A forced algorithm is what the rules pick.
  const auto forced = tidal::testing::run({TIDAL_INFO_PATH, "--tuning", "--nranks", "4",
                                           "--collective", "AllReduce", "--max-bytes", "8"},
                                          {"TIDAL_ALLREDUCE_ALGO=ring"});
  ASSERT_EQ(forced.exitCode, 0) << forced.err;
  EXPECT_EQ(tuningRow(forced.out, "AllReduce", "8").back(), "ring") << forced.out;
  EXPECT_EQ(forced.out.find("Broadcast"), std::string::npos) << forced.out;
  // Other sizes: 1 MiB, 4 MiB, 16 MiB, 64 MiB, and not 256 MiB.
  const auto sizes = tidal::testing::run({TIDAL_INFO_PATH, "--tuning", "--nranks", "4",
                                          "--collective", "AllGather", "--min-bytes", "1048576",
                                          "--max-bytes", "67108864", "--step-factor", "4"});
  ASSERT_EQ(sizes.exitCode, 0) << sizes.err;
  for (const char* bytes : {"1048576", "4194304", "16777216", "67108864"})
    EXPECT_FALSE(tuningRow(sizes.out, "AllGather", bytes).empty()) << bytes << "\n" << sizes.out;
  EXPECT_TRUE(tuningRow(sizes.out, "AllGather", "8").empty()) << sizes.out;
  EXPECT_TRUE(tuningRow(sizes.out, "AllGather", "2097152").empty()) << sizes.out;
  EXPECT_TRUE(tuningRow(sizes.out, "AllGather", "268435456").empty()) << sizes.out;
}

TEST(TidalInfo, TuningRefusesBadPlacementsAndLinkFiles) {
  const auto hosts =
      tidal::testing::run({TIDAL_INFO_PATH, "--tuning", "--nranks", "4", "--hosts", "5"});
  EXPECT_EQ(hosts.exitCode, 2);
  EXPECT_NE(hosts.err.find("--hosts 5 is more than --nranks 4"), std::string::npos) << hosts.err;
  const auto sizes = tidal::testing::run(
      {TIDAL_INFO_PATH, "--tuning", "--min-bytes", "4096", "--max-bytes", "1024"});
  EXPECT_EQ(sizes.exitCode, 2);
  EXPECT_NE(sizes.err.find("--min-bytes 4096 is more than --max-bytes 1024"), std::string::npos)
      << sizes.err;
  const auto many = tidal::testing::run({TIDAL_INFO_PATH, "--tuning", "--nranks", "1025"});
  EXPECT_EQ(many.exitCode, 2) << many.err;
  char path[] = "/tmp/tidal_tuner_test_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "network_alpha_us 5\nnetwork_mb_per_s -1\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  const auto bad = tidal::testing::run({TIDAL_INFO_PATH, "--tuning", "--nranks", "2"},
                                       {std::string("TIDAL_TUNER_FILE=") + path});
  ::unlink(path);
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("line 2: network_mb_per_s must be a positive number"), std::string::npos)
      << bad.err;
}

}  // namespace
