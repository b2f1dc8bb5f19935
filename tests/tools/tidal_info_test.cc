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
