// The flight recorder on a real hang: three forked ranks make five
// AllReduces, then rank 2 stops calling. Ranks 0 and 1 time out in their
// sixth and write their records (TIDAL_DUMP_ON_TIMEOUT); rank 2, still
// alive but stuck in its own code, writes its record when sent the dump
// signal (TIDAL_DUMP_SIGNAL). tools/tidal-flight, reading the three files,
// must name rank 2 as the one behind, and the records must say what the
// waiting ranks waited for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "job_fork.h"
#include "rank_exits.h"
#include "tidal/tidal.h"

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using tidal::test::ForkedJob;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
}

bool waitFor(const std::string& path, seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (exists(path)) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string run(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen((command + " 2>&1").c_str(), "r")) {
    char buf[512];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

TEST(FlightRecorder, TimeoutsAndTheSignalDumpRecordsThatNameTheRankBehind) {
  char dirTemplate[] = "/tmp/tidal-flight-XXXXXX";
  ASSERT_NE(::mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  auto file = [&](int r) { return dir + "/flight." + std::to_string(r) + ".json"; };
  ForkedJob job(3,
                [&](int rank) {
                  tidalComm_t comm;
                  if (tidalCommInitFromEnv(&comm) != tidalSuccess) return 10;
                  std::vector<float> v(1000, 1.0f);
                  for (int i = 0; i < 5; ++i) {
                    if (tidalAllReduce(v.data(), v.data(), v.size(), tidalFloat32, tidalSum, comm,
                                       nullptr) != tidalSuccess) {
                      return 11;
                    }
                  }
                  if (rank == 2) {
                    // Stuck outside Tidal, until the test has had its record.
                    for (int i = 0; i < 1200 && !exists(file(2)); ++i) {
                      std::this_thread::sleep_for(milliseconds(50));
                    }
                    return exists(file(2)) ? 0 : 12;
                  }
                  const tidalResult_t r = tidalAllReduce(v.data(), v.data(), v.size(), tidalFloat32,
                                                         tidalSum, comm, nullptr);
                  return r == tidalSuccess ? 13 : 0;
                },
                {{"TIDAL_TIMEOUT", "2"},
                 {"TIDAL_DUMP_ON_TIMEOUT", "1"},
                 {"TIDAL_DUMP_SIGNAL", "USR1"},
                 {"TIDAL_FLIGHT_RECORDER", "4"},
                 {"TIDAL_DUMP_FILE", dir + "/flight.%r.json"}});
  // Rank 0 or 1 times out after 2 s waiting for rank 2; the other sees the
  // connections of the one that gave up close. Both write their records.
  EXPECT_TRUE(waitFor(file(0), seconds(30))) << "rank 0 wrote no record";
  EXPECT_TRUE(waitFor(file(1), seconds(30))) << "rank 1 wrote no record";
  EXPECT_FALSE(exists(file(2))) << "rank 2 wrote a record before it was asked";
  ::kill(job.pids[2], SIGUSR1);
  EXPECT_TRUE(waitFor(file(2), seconds(20))) << "rank 2 did not answer the dump signal";
  tidal::test::expectEveryRankPassed(job.wait(seconds(60)));

  const std::string r0 = slurp(file(0)), r1 = slurp(file(1)), r2 = slurp(file(2));
  // Ranks 0 and 1: six calls, four kept, the last one failed with its timeout.
  EXPECT_THAT(r0, HasSubstr("\"calls\": 6"));
  EXPECT_THAT(r0, HasSubstr("\"call\": 3,"));
  EXPECT_THAT(r0, ::testing::Not(HasSubstr("\"call\": 2,")));  // out of the 4-entry ring
  EXPECT_THAT(r0 + r1, HasSubstr("made no progress for TIDAL_TIMEOUT=2 s, waiting for"));
  EXPECT_THAT(r0, HasSubstr("AllReduce(count 1000, float, sum)"));
  EXPECT_THAT(r2, HasSubstr("\"calls\": 5"));
  EXPECT_THAT(r2, HasSubstr("\"state\": \"completed\""));

  const std::string report = run("/usr/bin/python3 " TIDAL_SOURCE_DIR "/tools/tidal-flight " + dir);
  std::printf("%s", report.c_str());
  EXPECT_THAT(report, HasSubstr("3 rank(s), records from 3"));
  EXPECT_THAT(report, HasSubstr("behind: rank(s) 2 made 5 call(s), others up to 6"));
  EXPECT_THAT(report, HasSubstr("#6 AllReduce(count 1000, float, sum) failed"));

  // Without rank 2's record the tool says whose is missing.
  std::remove(file(2).c_str());
  const std::string partial =
      run("/usr/bin/python3 " TIDAL_SOURCE_DIR "/tools/tidal-flight " + dir);
  EXPECT_THAT(partial, HasSubstr("no record from rank(s) 2"));
  for (int r = 0; r < 3; ++r) std::remove(file(r).c_str());
  ::rmdir(dir.c_str());
}

// Each job holds the root at its own port: a refused init leaves its root
// listening until TIDAL_TIMEOUT, so the two settings get a job each.
TEST(FlightRecorder, BadSettingsAreRefusedByName) {
  const std::pair<const char*, const char*> bad[] = {{"TIDAL_DUMP_SIGNAL", "KILL"},
                                                     {"TIDAL_FLIGHT_RECORDER", "-1"}};
  for (const auto& [name, value] : bad) {
    ForkedJob job(
        1,
        [&](int) {
          tidalComm_t comm;
          if (tidalCommInitFromEnv(&comm) != tidalInvalidArgument) return 1;
          const std::string expected = std::string(name) + (name[6] == 'D' ? "='" : "=") + value;
          return std::string(tidalGetLastError(nullptr)).find(expected) == std::string::npos ? 2
                                                                                             : 0;
        },
        {{name, value}, {"TIDAL_TIMEOUT", "5"}});
    tidal::test::expectEveryRankPassed(job.wait(seconds(60)));
  }
}

}  // namespace
