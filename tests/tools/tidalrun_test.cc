// Tests of the tidalrun launcher on its own: no Tidal library involved, the
// ranks are tidalrun_test_child (see there for its modes).
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../unit/topology_fixtures.h"
#include "subprocess.h"

namespace {

using tidal::testing::lines;
using tidal::testing::RunResult;
using tidal::testing::Subprocess;

std::vector<std::string> cmd(std::vector<std::string> tidalrunArgs,
                             std::vector<std::string> childArgs) {
  std::vector<std::string> argv{TIDALRUN_PATH};
  argv.insert(argv.end(), tidalrunArgs.begin(), tidalrunArgs.end());
  argv.push_back(TEST_CHILD_PATH);
  argv.insert(argv.end(), childArgs.begin(), childArgs.end());
  return argv;
}

// env: NAME=VALUE settings for tidalrun (and so for its ranks).
RunResult tidalrun(std::vector<std::string> tidalrunArgs, std::vector<std::string> childArgs,
                   std::vector<std::string> env = {}) {
  return tidal::testing::run(cmd(std::move(tidalrunArgs), std::move(childArgs)), std::move(env));
}

int countOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// --- exit status ----------------------------------------------------------

TEST(TidalrunExit, AllZeroIsZero) {
  const auto r = tidalrun({"-np", "3"}, {"exit", "0", "0", "0"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(TidalrunExit, SingleFailureIsForwarded) {
  const auto r = tidalrun({"-np", "2"}, {"exit", "0", "42:50"});
  EXPECT_EQ(r.exitCode, 42);
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with code 42"), std::string::npos) << r.err;
}

TEST(TidalrunExit, FirstFailureInTimeWinsNotLowestRank) {
  // Rank 2 fails at 50 ms, rank 1 at 600 ms: rank 2's code is the job's.
  const auto r = tidalrun({"-np", "3"}, {"exit", "0", "5:600", "3:50"});
  EXPECT_EQ(r.exitCode, 3) << r.err;
  EXPECT_NE(r.err.find("rank 1 "), std::string::npos) << "later failures are reported too\n"
                                                      << r.err;
}

TEST(TidalrunExit, RankKilledBySignalGives128PlusSignal) {
  const auto r = tidalrun({"-np", "2", "--abort-grace", "0"}, {"raise", "1", "9"});
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.err;
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal 9"), std::string::npos) << r.err;
}

TEST(TidalrunExit, MissingProgramIs127) {
  const auto r = tidal::testing::run({TIDALRUN_PATH, "-np", "2", "/nonexistent/program"});
  EXPECT_EQ(r.exitCode, 127);
  EXPECT_NE(r.err.find("cannot execute '/nonexistent/program'"), std::string::npos) << r.err;
}

// --- a failing rank takes the job down -------------------------------------

TEST(TidalrunAbort, HangingRanksAreTerminatedAfterGrace) {
  const auto r = tidalrun({"-np", "3", "--abort-grace", "0.3"}, {"fail-hang", "1", "7"});
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 7) << r.err;
  EXPECT_LT(r.seconds, 10) << "the sleeping ranks were not terminated";
  EXPECT_NE(r.err.find("rank 1 (pid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIGTERM"), std::string::npos) << r.err;
}

TEST(TidalrunAbort, RanksIgnoringSigtermAreKilled) {
  const auto r = tidalrun({"-np", "3", "--abort-grace", "0.2", "--kill-grace", "0.3"},
                          {"fail-stubborn", "0", "9"});
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 9) << r.err;
  EXPECT_LT(r.seconds, 10);
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
}

TEST(TidalrunAbort, GraceLetsOthersFinish) {
  // Rank 0 fails at once; rank 1 still finishes its work within the grace.
  const auto r = tidalrun({"-np", "2", "--abort-grace", "5"}, {"exit", "4", "0:300"});
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_EQ(r.err.find("SIGTERM"), std::string::npos) << r.err;
}

TEST(TidalrunAbort, TimeoutGives124) {
  const auto r = tidalrun({"-np", "2", "--timeout", "0.5", "--kill-grace", "0.5"},
                          {"fail-stubborn", "-1", "0"});
  EXPECT_EQ(r.exitCode, 124) << r.err;
  EXPECT_LT(r.seconds, 10);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
}

// --- signals ----------------------------------------------------------------

void expectSignalForwarded(int sig) {
  // A long grace: the ranks must get `sig` from forwarding, not tidalrun's own
  // SIGTERM once the grace is over.
  Subprocess p(cmd({"-np", "3", "--tag-output", "--abort-grace", "60"}, {"wait-signal"}));
  ASSERT_TRUE(p.readUntil([](const std::string& out) { return countOf(out, "ready") == 3; }, 20))
      << p.out();
  ASSERT_EQ(::kill(p.pid(), sig), 0);
  const auto r = p.finish(20);
  EXPECT_FALSE(r.timedOut);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string line = "[" + std::to_string(rank) + "] rank " + std::to_string(rank) +
                             " got signal " + std::to_string(sig);
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  // The ranks exited 0, but the job was interrupted: not a success.
  EXPECT_EQ(r.exitCode, 128 + sig);
}

TEST(TidalrunSignals, SigtermIsForwarded) { expectSignalForwarded(SIGTERM); }
TEST(TidalrunSignals, SigintIsForwarded) { expectSignalForwarded(SIGINT); }
TEST(TidalrunSignals, SighupIsForwarded) { expectSignalForwarded(SIGHUP); }

TEST(TidalrunSignals, RanksKilledBySigtermMakeItFail) {
  Subprocess p(cmd({"-np", "2"}, {"fail-hang", "-1", "0"}));
  ASSERT_TRUE(
      p.readUntil([](const std::string& out) { return countOf(out, "sleeping") == 2; }, 20));
  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);
  const auto r = p.finish();
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 128 + SIGTERM) << r.err;
  EXPECT_LT(r.seconds, 10);
}

// --- environment ------------------------------------------------------------

TEST(TidalrunEnv, EveryRankGetsTheContract) {
  const std::vector<std::string> names{
      "RANK",         "WORLD_SIZE",   "LOCAL_RANK",    "LOCAL_WORLD_SIZE",
      "MASTER_ADDR",  "MASTER_PORT",  "TIDAL_COMM_ID", "TIDAL_RANK",
      "TIDAL_NRANKS", "TIDAL_SECRET", "EXTRA",         "EMPTY"};
  std::vector<std::string> child{"env"};
  child.insert(child.end(), names.begin(), names.end());
  const auto r = tidalrun({"-np", "3", "--tag-output", "-x", "EXTRA=a=b", "-x", "EMPTY="}, child);
  ASSERT_EQ(r.exitCode, 0) << r.err;

  // rank -> name -> value
  std::map<int, std::map<std::string, std::string>> seen;
  const std::regex lineRe(R"(\[(\d+)\] ([A-Z_]+)=(.*))");
  for (const auto& line : lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, lineRe)) << line;
    seen[std::stoi(m[1])][m[2]] = m[3];
  }
  ASSERT_EQ(seen.size(), 3u) << r.out;
  const std::string port = seen[0]["MASTER_PORT"];
  const std::string secret = seen[0]["TIDAL_SECRET"];
  EXPECT_TRUE(std::regex_match(secret, std::regex("[0-9a-f]{32}"))) << secret;
  EXPECT_GT(std::stoi(port), 0);
  for (int rank = 0; rank < 3; ++rank) {
    auto& env = seen[rank];
    const std::string r_ = std::to_string(rank);
    EXPECT_EQ(env["RANK"], r_);
    EXPECT_EQ(env["TIDAL_RANK"], r_);
    EXPECT_EQ(env["LOCAL_RANK"], r_);
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["TIDAL_NRANKS"], "3");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], port) << "all ranks share one rendezvous";
    EXPECT_EQ(env["TIDAL_COMM_ID"], "127.0.0.1:" + port);
    EXPECT_EQ(env["TIDAL_SECRET"], secret) << "all ranks share one secret";
    EXPECT_EQ(env["EXTRA"], "a=b");
    EXPECT_EQ(env["EMPTY"], "");
  }
}

// The rendezvous port comes from below the kernel's ephemeral range, so
// that no connect() on the host can take it before rank 0 binds it (two jobs
// side by side once failed so).
TEST(TidalrunEnv, RendezvousPortIsBelowTheEphemeralRange) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (!(range >> low >> high) || low <= 11000) GTEST_SKIP() << "ephemeral range starts at " << low;
  for (int job = 0; job < 5; ++job) {
    const auto r = tidalrun({"-np", "1"}, {"env", "MASTER_PORT"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(MASTER_PORT=(\d+))"))) << r.out;
    const int port = std::stoi(m[1]);
    EXPECT_GE(port, 10000);
    EXPECT_LT(port, low) << "ephemeral range " << low << "-" << high;
  }
}

TEST(TidalrunEnv, EachJobGetsItsOwnSecret) {
  const auto a = tidalrun({"-np", "1"}, {"env", "TIDAL_SECRET"});
  const auto b = tidalrun({"-np", "1"}, {"env", "TIDAL_SECRET"});
  ASSERT_EQ(a.exitCode, 0);
  ASSERT_EQ(b.exitCode, 0);
  EXPECT_NE(a.out, b.out);
}

TEST(TidalrunEnv, PortOptionAndUserOverride) {
  const auto r = tidalrun({"-np", "2", "--port", "23456", "-x", "TIDAL_NRANKS=7"},
                          {"env", "MASTER_PORT", "TIDAL_COMM_ID", "TIDAL_NRANKS"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(countOf(r.out, "MASTER_PORT=23456\n"), 2) << r.out;
  EXPECT_EQ(countOf(r.out, "TIDAL_COMM_ID=127.0.0.1:23456\n"), 2) << r.out;
  EXPECT_EQ(countOf(r.out, "TIDAL_NRANKS=7\n"), 2) << "-x comes last and wins\n" << r.out;
}

TEST(TidalrunEnv, InheritsTheCallersEnvironment) {
  const auto r = tidal::testing::run(cmd({"-np", "2"}, {"env", "TIDALRUN_TEST_MARK"}),
                                     {"TIDALRUN_TEST_MARK=inherited"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(countOf(r.out, "TIDALRUN_TEST_MARK=inherited\n"), 2) << r.out;
}

// --- output -----------------------------------------------------------------

// Ranks write every line in three pieces with pauses in between; tidalrun must
// still deliver each line whole, with the right tag.
TEST(TidalrunOutput, LinesStayWholeAndTagged) {
  const int kLines = 40;
  const auto r = tidalrun({"-np", "4", "--tag-output"}, {"lines", std::to_string(kLines)});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const std::regex lineRe(R"(\[(\d)\] rank (\d) line (\d+) x{100} end)");
  for (const auto* stream : {&r.out, &r.err}) {
    std::map<int, int> next;  // per rank, the line number expected next
    const auto all = lines(*stream);
    EXPECT_EQ(all.size(), 4u * kLines);
    for (const auto& line : all) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(line, m, lineRe)) << "mangled line: " << line;
      EXPECT_EQ(m[1], m[2]) << "line tagged with the wrong rank: " << line;
      EXPECT_EQ(std::stoi(m[3]), next[std::stoi(m[1])]++) << "order within a rank: " << line;
    }
  }
}

TEST(TidalrunOutput, UntaggedLinesPassUnchanged) {
  const auto r = tidalrun({"-np", "3"}, {"lines", "20"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const std::regex lineRe(R"(rank \d line \d+ x{100} end)");
  const auto all = lines(r.out);
  EXPECT_EQ(all.size(), 60u);
  for (const auto& line : all) EXPECT_TRUE(std::regex_match(line, lineRe)) << line;
}

TEST(TidalrunOutput, PartialLineIsFlushedAtExit) {
  const auto r = tidalrun({"-np", "2", "--tag-output"}, {"partial"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(countOf(r.out, "] no newline\n"), 2) << r.out;
  EXPECT_NE(r.out.find("[0] no newline\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] no newline\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[1] err no newline\n"), std::string::npos) << r.err;
}

TEST(TidalrunOutput, ClosedOutputStopsTheRanks) {
  // `tidalrun -np 2 yes | head`: once nobody reads, the ranks must get SIGPIPE
  // instead of running forever.
  Subprocess p({TIDALRUN_PATH, "-np", "2", "--", "yes"});
  ASSERT_TRUE(p.readUntil([](const std::string& out) { return out.size() > 10000; }, 20));
  p.closeOut();
  const auto r = p.finish(20);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 128 + SIGPIPE) << r.err;
}

// --- command line -------------------------------------------------------------

TEST(TidalrunArgs, ProgramArgumentsAreNotParsed) {
  // Options after the program name belong to the program, even ones tidalrun has.
  const auto r = tidalrun({"-np", "1"}, {"args", "-np", "5", "--tag-output", "-x", "A=B", "--"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "arg=-np\narg=5\narg=--tag-output\narg=-x\narg=A=B\narg=--\n");
}

TEST(TidalrunArgs, SpellingsOfNp) {
  for (const std::vector<std::string>& np : {std::vector<std::string>{"-np", "2"},
                                             {"-n", "2"},
                                             {"--np", "2"},
                                             {"--np=2"},
                                             {"-n2"},
                                             {"-np=2"}}) {
    auto args = np;
    args.push_back("--");
    const auto r = tidalrun(args, {"env", "WORLD_SIZE"});
    EXPECT_EQ(r.exitCode, 0) << np[0] << "\n" << r.err;
    EXPECT_EQ(r.out, "WORLD_SIZE=2\nWORLD_SIZE=2\n") << np[0];
  }
}

TEST(TidalrunArgs, ErrorsExitTwoWithUsage) {
  const std::vector<std::vector<std::string>> bad{
      {},                                    // nothing
      {"-np", "2"},                          // no program
      {"/bin/true"},                         // no -np
      {"-np", "0", "/bin/true"},             // too few ranks
      {"-np", "two", "/bin/true"},           // not a number
      {"-np", "2", "--bogus", "/bin/true"},  // unknown option
      {"-np", "2", "-x", "NOVALUE", "/bin/true"},
      {"-np", "2", "--timeout", "-1", "/bin/true"},
      {"-np", "2", "--port", "70000", "/bin/true"},
      {"-np", "2", "--bind", "socket", "/bin/true"},
      {"-np", "2", "--bind", "", "/bin/true"},
      {"-np", "2", "--bind", "GPU", "/bin/true"},
  };
  for (const auto& args : bad) {
    std::vector<std::string> argv{TIDALRUN_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = tidal::testing::run(argv);
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    EXPECT_EQ(r.exitCode, 2) << shown << "\n" << r.err;
    EXPECT_NE(r.err.find("tidalrun: error: "), std::string::npos) << shown << "\n" << r.err;
    EXPECT_NE(r.err.find("Usage: tidalrun"), std::string::npos) << shown << "\n" << r.err;
    EXPECT_EQ(r.out, "") << shown;
  }
}

TEST(TidalrunArgs, HelpExitsZero) {
  const auto r = tidal::testing::run({TIDALRUN_PATH, "--help"});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("--tag-output"), std::string::npos) << r.out;
}

// --- CPU binding -----------------------------------------------------------

// The CPUs this test process may run on: tidalrun inherits them.
std::vector<int> ownCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string joined(const std::vector<int>& cpus) {
  std::string text;
  for (int c : cpus) text += (text.empty() ? "" : ",") + std::to_string(c);
  return text;
}

// Each rank's CPU list, by rank, from the child's "affinity" mode.
std::map<int, std::string> rankAffinities(const RunResult& r) {
  std::map<int, std::string> byRank;
  const std::regex line(R"(rank (\d+) cpus ([0-9,]*))");
  for (const auto& l : lines(r.out)) {
    std::smatch m;
    if (std::regex_match(l, m, line)) byRank[std::stoi(m[1])] = m[2];
  }
  return byRank;
}

// A host like this one (no GPU), so that the default is core binding
// wherever the tests run.
class NoGpuHost {
 public:
  NoGpuHost() { tidal::topo::test::buildNoGpu(tree_); }
  std::vector<std::string> env() const { return {"TIDAL_TOPO_SYSFS=" + tree_.root()}; }

 private:
  tidal::topo::test::SysfsTree tree_;
};

TEST(TidalrunBind, DefaultBindsEachRankToOneCpuOfItsOwnSet) {
  const auto cpus = ownCpus();
  ASSERT_FALSE(cpus.empty());
  // One rank more than CPUs: the last wraps around to the first CPU.
  const int n = static_cast<int>(cpus.size()) + 1;
  const NoGpuHost host;
  const auto r = tidalrun({"-np", std::to_string(n)}, {"affinity"}, host.env());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err, "") << "binding prints nothing by default";
  const auto got = rankAffinities(r);
  ASSERT_EQ(got.size(), static_cast<size_t>(n)) << r.out;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got.at(i), std::to_string(cpus[static_cast<size_t>(i) % cpus.size()]))
        << "rank " << i;
  }
}

TEST(TidalrunBind, VerboseSaysWhenRanksShareCpus) {
  const int n = static_cast<int>(ownCpus().size()) + 1;
  const NoGpuHost host;
  const auto r = tidalrun({"-np", std::to_string(n), "--verbose"}, {"affinity"}, host.env());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("ranks share CPUs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 0: pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", bound to CPU "), std::string::npos) << r.err;
}

TEST(TidalrunBind, NoneKeepsTheWholeSet) {
  const std::string all = joined(ownCpus());
  const auto r = tidalrun({"-np", "3", "--bind", "none"}, {"affinity"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto got = rankAffinities(r);
  ASSERT_EQ(got.size(), 3u) << r.out;
  for (const auto& [rank, set] : got) EXPECT_EQ(set, all) << "rank " << rank;
}

TEST(TidalrunBind, StaysInsideARestrictedSet) {
  // As under `taskset -c C` or a cgroup cpuset: tidalrun's own set is {C}.
  if (::access("/usr/bin/taskset", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/taskset";
  const std::string only = std::to_string(ownCpus().front());
  auto argv = cmd({"-np", "3"}, {"affinity"});
  argv.insert(argv.begin(), {"/usr/bin/taskset", "-c", only});
  const NoGpuHost host;
  const auto r = tidal::testing::run(argv, host.env());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto got = rankAffinities(r);
  ASSERT_EQ(got.size(), 3u) << r.out;
  for (const auto& [rank, set] : got) EXPECT_EQ(set, only) << "rank " << rank;
}

// --- binding from the topology: the two-CPU fixture ------------------------
// (topology_fixtures.h buildTwoCpuHost) CPU 0 is NUMA node 0 and CPU 1 node 1;
// GPU0 is near CPU 1, GPU1 near CPU 0, so gpu binding reverses core binding.

class TidalrunTopologyBind : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto cpus = ownCpus();
    if (cpus.size() < 2 || cpus[0] != 0 || cpus[1] != 1) {
      GTEST_SKIP() << "the fixture needs CPUs 0 and 1, this test may use " << joined(cpus);
    }
    tidal::topo::test::buildTwoCpuHost(tree_);
  }
  std::string sysfs() const { return "TIDAL_TOPO_SYSFS=" + tree_.root(); }

  tidal::topo::test::SysfsTree tree_;
};

TEST_F(TidalrunTopologyBind, GpuBindsEachRankToItsGpusCpus) {
  // Three ranks, two GPUs: rank 2 has none and gets core binding (CPU 2 mod 2).
  const auto r = tidalrun({"-np", "3", "--bind", "gpu"}, {"affinity"}, {sysfs()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(rankAffinities(r), (std::map<int, std::string>{{0, "1"}, {1, "0"}, {2, "0"}}));
}

TEST_F(TidalrunTopologyBind, DefaultIsGpuWhereTheTopologyListsGpus) {
  const auto r = tidalrun({"-np", "2"}, {"affinity"}, {sysfs()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(rankAffinities(r), (std::map<int, std::string>{{0, "1"}, {1, "0"}}));
}

TEST_F(TidalrunTopologyBind, NumaSpreadsRanksOverTheNodesInBlocks) {
  const auto three = tidalrun({"-np", "3", "--bind", "numa"}, {"affinity"}, {sysfs()});
  ASSERT_EQ(three.exitCode, 0) << three.err;
  EXPECT_EQ(rankAffinities(three), (std::map<int, std::string>{{0, "0"}, {1, "0"}, {2, "1"}}));
  const auto two = tidalrun({"-np", "2", "--bind", "numa"}, {"affinity"}, {sysfs()});
  EXPECT_EQ(rankAffinities(two), (std::map<int, std::string>{{0, "0"}, {1, "1"}}));
}

TEST_F(TidalrunTopologyBind, CoreIgnoresTheTopology) {
  const auto r = tidalrun({"-np", "2", "--bind", "core"}, {"affinity"}, {sysfs()});
  EXPECT_EQ(rankAffinities(r), (std::map<int, std::string>{{0, "0"}, {1, "1"}}));
}

TEST_F(TidalrunTopologyBind, TopologySettingsGivenWithDashXCount) {
  const auto r = tidalrun({"-np", "2", "--bind", "gpu", "-x", sysfs()}, {"affinity"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(rankAffinities(r), (std::map<int, std::string>{{0, "1"}, {1, "0"}}));
}

TEST_F(TidalrunTopologyBind, CudaVisibleDevicesChoosesEachRanksGpu) {
  // Rank 0 sees GPU1 (CPU 0) as its device 0; rank 1 has no GPU: core, CPU 1.
  const auto r =
      tidalrun({"-np", "2", "--bind", "gpu"}, {"affinity"}, {sysfs(), "CUDA_VISIBLE_DEVICES=1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(rankAffinities(r), (std::map<int, std::string>{{0, "0"}, {1, "1"}}));
}

TEST_F(TidalrunTopologyBind, VerboseNamesWhatEachRankIsBoundTo) {
  const auto r = tidalrun({"-np", "3", "--verbose"}, {"affinity"}, {sysfs()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("tidalrun: binding: gpu over CPUs 0-1\n"));
  EXPECT_THAT(r.err, ::testing::ContainsRegex("rank 0: pid [0-9]+, bound to CPU 1 \\(GPU "
                                              "0000:03:00.0\\)\n"));
  EXPECT_THAT(r.err, ::testing::ContainsRegex("rank 1: pid [0-9]+, bound to CPU 0 \\(GPU "
                                              "0000:81:00.0\\)\n"));
  EXPECT_THAT(r.err, ::testing::ContainsRegex("rank 2: pid [0-9]+, bound to CPU 0 \\(no GPU\\)"));
}

TEST_F(TidalrunTopologyBind, NoneAlsoTellsTheLibraryNotToBind) {
  const auto r = tidalrun({"-np", "1", "--bind", "none"}, {"env", "TIDAL_BIND"}, {sysfs()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "TIDAL_BIND=none\n");
  const auto gpu = tidalrun({"-np", "1", "--bind", "gpu"}, {"env", "TIDAL_BIND"}, {sysfs()});
  EXPECT_EQ(gpu.out, "TIDAL_BIND=<unset>\n") << "binding ranks leaves the library its default";
}

TEST(TidalrunBind, NumaOrGpuWithoutATopologyIsAnError) {
  for (const char* policy : {"numa", "gpu"}) {
    const auto r = tidalrun({"-np", "2", "--bind", policy}, {"affinity"},
                            {"TIDAL_TOPO_FILE=/nonexistent/topo.txt"});
    EXPECT_EQ(r.exitCode, 1) << policy << "\n" << r.err;
    EXPECT_THAT(r.err, ::testing::HasSubstr(std::string("tidalrun: --bind ") + policy +
                                            " needs the topology: TIDAL_TOPO_FILE=/nonexistent/"
                                            "topo.txt: cannot open it"));
    EXPECT_EQ(r.out, "") << "no rank started";
  }
}

TEST(TidalrunBind, DefaultWithoutATopologyBindsCores) {
  const auto cpus = ownCpus();
  const auto r = tidalrun({"-np", "2"}, {"affinity"}, {"TIDAL_TOPO_FILE=/nonexistent/topo.txt"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("tidalrun: cannot read the topology "
                                          "(TIDAL_TOPO_FILE=/nonexistent/topo.txt: cannot open "
                                          "it"));
  const auto got = rankAffinities(r);
  ASSERT_EQ(got.size(), 2u) << r.out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(got.at(i), std::to_string(cpus[static_cast<size_t>(i) % cpus.size()]));
  }
}

}  // namespace
