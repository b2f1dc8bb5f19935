// Where communicator init puts each rank (src/comm/rank_placement.h), on a
// fixture topology whose CPUs exist on any two-CPU machine
// (topology_fixtures.h buildTwoCpuHost: GPU0 near CPU 1, GPU1 near CPU 0):
// the local rank from the communicator, the INFO line with GPU, NICs, class,
// GDR and CPUs, and TIDAL_BIND binding only a rank nothing bound before.
// Real rank processes (ForkedJob), each writing its affinity after init.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../unit/topology_fixtures.h"
#include "job_fork.h"
#include "tidal/tidal.h"

namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using tidal::test::ForkedJob;

std::string affinityText() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "unreadable";
  std::string text;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) text += (text.empty() ? "" : ",") + std::to_string(c);
  }
  return text;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines of `text` that contain `needle`.
std::vector<std::string> linesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

// Binds the calling process to one CPU before init.
void bindTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

class Placement : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string all = affinityText();
    if (all != allOnline()) GTEST_SKIP() << "this test process is bound (" << all << ")";
    if (all.rfind("0,1", 0) != 0) GTEST_SKIP() << "the fixture needs CPUs 0 and 1, have " << all;
    tidal::topo::test::buildTwoCpuHost(tree_);
    char tmpl[] = "/tmp/tidal_placement_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  static std::string allOnline() {
    std::string text;
    for (long c = 0; c < ::sysconf(_SC_NPROCESSORS_ONLN); ++c) {
      text += (text.empty() ? "" : ",") + std::to_string(c);
    }
    return text;
  }

  // Runs `nranks` ranks that init, write their affinity to dir/affinity.R,
  // and destroy; `prepare(rank)` runs first in each. Returns the exit codes.
  std::vector<int> run(int nranks, std::vector<std::pair<std::string, std::string>> env,
                       void (*prepare)(int) = nullptr) {
    env.push_back({"TIDAL_TOPO_SYSFS", tree_.root()});
    env.push_back({"TIDAL_CUDA_DISABLE", "1"});  // a GPU machine's real bus ids are not there
    env.push_back({"TIDAL_DEBUG", "INFO"});
    env.push_back({"TIDAL_DEBUG_SUBSYS", "INIT"});
    env.push_back({"TIDAL_NET", "tcp"});
    env.push_back({"TIDAL_TEST_DIR", dir_});
    ForkedJob job(
        nranks,
        [prepare](int rank) {
          const std::string dir = std::getenv("TIDAL_TEST_DIR");
          ::setenv("TIDAL_DEBUG_FILE", (dir + "/log." + std::to_string(rank)).c_str(), 1);
          if (prepare) prepare(rank);
          tidalComm_t comm = nullptr;
          if (tidalCommInitFromEnv(&comm) != tidalSuccess) {
            std::ofstream(dir + "/error." + std::to_string(rank)) << tidalGetLastError(nullptr);
            return 3;
          }
          std::ofstream(dir + "/affinity." + std::to_string(rank)) << affinityText();
          // exit, not the job's _Exit: the logger flushes INFO lines at exit.
          std::exit(tidalCommDestroy(comm) == tidalSuccess ? 0 : 4);
        },
        env);
    std::vector<int> codes;
    for (int st : job.wait(seconds(60))) codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return codes;
  }

  std::string affinity(int rank) const { return slurp(dir_ + "/affinity." + std::to_string(rank)); }
  std::string log(int rank) const { return slurp(dir_ + "/log." + std::to_string(rank)); }
  std::string error(int rank) const { return slurp(dir_ + "/error." + std::to_string(rank)); }
  // The one placement INFO line of a rank, from "rank R: local rank" on.
  std::string placementLine(int rank) const {
    const std::string head = "rank " + std::to_string(rank) + ": local rank ";
    const auto lines = linesWith(log(rank), head);
    if (lines.size() != 1) return "(" + std::to_string(lines.size()) + " placement lines)";
    return lines[0].substr(lines[0].find(head));
  }

  tidal::topo::test::SysfsTree tree_;
  std::string dir_;
};

TEST_F(Placement, BindsAnUnboundRankToItsGpusCpus) {
  ASSERT_EQ(run(2, {}), (std::vector<int>{0, 0})) << error(0) << error(1);
  EXPECT_EQ(affinity(0), "1");
  EXPECT_EQ(affinity(1), "0");
  EXPECT_EQ(placementLine(0),
            "rank 0: local rank 0 of 2, GPU 0000:03:00.0, NICs mlx5_0:1, PIX, GDR on (PIX is "
            "within TIDAL_NET_GDR_LEVEL=PXB), CPUs 1 (bound by Tidal to GPU 0000:03:00.0's CPUs "
            "(TIDAL_BIND=auto)); topology from sysfs " +
                tree_.root())
      << log(0);
  EXPECT_EQ(placementLine(1),
            "rank 1: local rank 1 of 2, GPU 0000:81:00.0, NICs mlx5_1:1, NODE, GDR off (NODE is "
            "beyond TIDAL_NET_GDR_LEVEL=PXB), CPUs 0 (bound by Tidal to GPU 0000:81:00.0's CPUs "
            "(TIDAL_BIND=auto)); topology from sysfs " +
                tree_.root());
}

TEST_F(Placement, GdrLevelDecidesTheClassInTheLine) {
  ASSERT_EQ(run(2, {{"TIDAL_NET_GDR_LEVEL", "PHB"}}), (std::vector<int>{0, 0}));
  EXPECT_THAT(placementLine(1), HasSubstr(", NODE, GDR on (NODE is within "
                                          "TIDAL_NET_GDR_LEVEL=PHB), CPUs 0 "));
}

TEST_F(Placement, LocalRankComesFromTheCommunicatorsHosts) {
  // Two "hosts" of one rank each: both are local rank 0 and take GPU0,
  // whatever the launcher's RANK says.
  ASSERT_EQ(run(2, {},
                [](int rank) {
                  ::setenv("TIDAL_HOSTID", rank == 0 ? "hostA" : "hostB", 1);
                  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
                }),
            (std::vector<int>{0, 0}));
  EXPECT_EQ(affinity(0), "1");
  EXPECT_EQ(affinity(1), "1");
  EXPECT_THAT(placementLine(1),
              HasSubstr("rank 1: local rank 0 of 1, GPU 0000:03:00.0, NICs mlx5_0:1, PIX"));
}

TEST_F(Placement, BindNoneLeavesTheRankAlone) {
  ASSERT_EQ(run(2, {{"TIDAL_BIND", "none"}}), (std::vector<int>{0, 0}));
  EXPECT_EQ(affinity(0), allOnline());
  EXPECT_EQ(affinity(1), allOnline());
  EXPECT_THAT(placementLine(0), HasSubstr("(not bound by Tidal: TIDAL_BIND=none)"));
}

TEST_F(Placement, ARankBoundBeforeInitIsLeftAsItIs) {
  ASSERT_EQ(run(1, {}, [](int) { bindTo(0); }),  // GPU0's CPU is 1
            (std::vector<int>{0}));
  EXPECT_EQ(affinity(0), "0");
  EXPECT_THAT(placementLine(0), HasSubstr(", CPUs 0 (bound before init, left as it is)"));
}

// The line that says how waits spin (Communicator::chooseSpinMode).
std::string spinLine(const std::string& log) {
  const auto lines = linesWith(log, " rank(s) on this host, ");
  if (lines.size() != 1) return "(" + std::to_string(lines.size()) + " spin lines)";
  return lines[0].substr(lines[0].find("rank "));
}

TEST_F(Placement, RanksSharingOneCpuYieldInsteadOfBusyPolling) {
  // As under `taskset -c 0` or a one-CPU cpuset: the machine has two CPUs,
  // but the two ranks may run on one, so a busy-polling wait would hold the
  // CPU its peer needs.
  ASSERT_EQ(run(2, {}, [](int) { bindTo(0); }), (std::vector<int>{0, 0})) << error(0) << error(1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(spinLine(log(r)), "rank " + std::to_string(r) +
                                    ": 2 rank(s) on this host, 1 CPU(s) in their affinity masks: "
                                    "waits yield, then sleep")
        << log(r);
  }
}

TEST_F(Placement, RanksOnCpusOfTheirOwnBusyPoll) {
  ASSERT_EQ(run(2, {}, [](int rank) { bindTo(rank); }), (std::vector<int>{0, 0}))
      << error(0) << error(1);
  EXPECT_EQ(spinLine(log(1)),
            "rank 1: 2 rank(s) on this host, 2 CPU(s) in their affinity masks: waits busy-poll, "
            "then sleep")
      << log(1);
}

TEST_F(Placement, EachHostCountsOnlyItsOwnRanks) {
  // Two "hosts", each with one rank on a CPU of its own: each counts its
  // own rank's one CPU, not the other host's.
  ASSERT_EQ(run(2, {},
                [](int rank) {
                  bindTo(rank);
                  ::setenv("TIDAL_HOSTID", rank == 0 ? "hostA" : "hostB", 1);
                }),
            (std::vector<int>{0, 0}));
  EXPECT_EQ(spinLine(log(0)),
            "rank 0: 1 rank(s) on this host, 1 CPU(s) in their affinity masks: waits busy-poll, "
            "then sleep")
      << log(0);
}

TEST_F(Placement, ABadBindSettingFailsInit) {
  ASSERT_EQ(run(1, {{"TIDAL_BIND", "numa"}}), (std::vector<int>{3}));
  EXPECT_THAT(error(0), HasSubstr("TIDAL_BIND='numa' is not auto or none"));
}

TEST_F(Placement, AnUnreadableTopologyIsAWarningNotAFailure) {
  ASSERT_EQ(run(1, {{"TIDAL_TOPO_FILE", dir_ + "/missing"}}), (std::vector<int>{0}));
  EXPECT_EQ(affinity(0), allOnline());
  const auto warned = linesWith(log(0), "topology not used");
  ASSERT_EQ(warned.size(), 1u) << log(0);
  EXPECT_THAT(warned[0], HasSubstr("rank 0: local rank 0 of 1: topology not used (NICs, GDR and "
                                   "CPUs keep their defaults): TIDAL_TOPO_FILE=" +
                                   dir_ + "/missing: cannot open it"));
}

}  // namespace
