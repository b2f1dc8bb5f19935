// Launcher detection from the environment, and agreeing on a unique id
// through a rendezvous address (the PMIx path runs in tests/bootstrap/).
#include "bootstrap/launcher_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/params.h"

namespace tidal {
namespace {

// Every variable detectLaunch() or agreeOnUniqueId() reads. The fixture
// clears them all, so the test sees only what it sets, and restores them.
const char* const kVariables[] = {"TIDAL_COMM_ID",
                                  "TIDAL_RANK",
                                  "TIDAL_NRANKS",
                                  "TIDAL_SECRET",
                                  "TIDAL_MASTER_PORT_OFFSET",
                                  "RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_RANK",
                                  "LOCAL_WORLD_SIZE",
                                  "MASTER_ADDR",
                                  "MASTER_PORT",
                                  "OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE",
                                  "PMI_RANK",
                                  "PMI_SIZE",
                                  "MPI_LOCALRANKID",
                                  "MPI_LOCALNRANKS",
                                  "SLURM_PROCID",
                                  "SLURM_NTASKS",
                                  "SLURM_LOCALID",
                                  "TORCHELASTIC_RUN_ID",
                                  "SLURM_JOB_ID",
                                  "SLURM_STEP_ID",
                                  "OMPI_MCA_ess_base_jobid",
                                  "PMIX_NAMESPACE",
                                  "PMIX_SERVER_URI41",
                                  "PMIX_SERVER_URI4",
                                  "PMIX_SERVER_URI3",
                                  "PMIX_SERVER_URI21",
                                  "PMIX_SERVER_URI2",
                                  "PMIX_SERVER_URI",
                                  "TIDAL_CONF_FILE",
                                  "TIDAL_TIMEOUT"};

class LauncherEnv : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
    // No config file either: only the environment of the test counts.
    setenv("TIDAL_CONF_FILE", "/nonexistent/tidal.conf", 1);
    params::reload();
  }
  void TearDown() override {
    for (const char* name : kVariables) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
    params::reload();
  }
  static void set(const char* name, const char* value) {
    setenv(name, value, 1);
    params::reload();
  }
  // detectLaunch() must fail with `code` and a message naming `needle`.
  static void expectFailure(tidalResult_t code, const std::string& needle) {
    try {
      detectLaunch();
      ADD_FAILURE() << "detectLaunch succeeded; expected an error naming " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }

 private:
  std::map<std::string, std::string> saved_;
};

uint16_t freePort() {
  Socket l = Socket::listenOn(SocketAddress::loopback(AF_INET, 0));
  return l.localAddress().port();
}

TEST_F(LauncherEnv, NothingSetNamesWhatItLookedFor) {
  try {
    detectLaunch();
    FAIL() << "detected a launcher in an empty environment";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidUsage);
    const std::string text = e.what();
    for (const char* v : {"TIDAL_RANK", "TIDAL_COMM_ID", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                          "PMI_RANK", "SLURM_PROCID"}) {
      EXPECT_NE(text.find(v), std::string::npos) << v << " missing from: " << text;
    }
  }
}

TEST_F(LauncherEnv, TidalVariables) {
  set("TIDAL_COMM_ID", "127.0.0.1:29999");
  set("TIDAL_RANK", "1");
  set("TIDAL_NRANKS", "4");
  const LaunchInfo info = detectLaunch();
  EXPECT_EQ(info.launcher, "tidal");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.nranks, 4);
  ASSERT_TRUE(info.root);
  EXPECT_EQ(info.root->toString(), "127.0.0.1:29999");
  EXPECT_EQ(info.rootSource, "TIDAL_COMM_ID");
  EXPECT_FALSE(info.secret);
}

TEST_F(LauncherEnv, Torchrun) {
  set("RANK", "3");
  set("WORLD_SIZE", "8");
  set("LOCAL_RANK", "1");
  set("LOCAL_WORLD_SIZE", "4");
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", "29500");
  LaunchInfo info = detectLaunch();
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.nranks, 8);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localNranks, 4);
  ASSERT_TRUE(info.root);
  // torch's TCPStore holds MASTER_PORT itself; Tidal takes the next port.
  EXPECT_EQ(info.root->port(), 29501);
  set("TIDAL_MASTER_PORT_OFFSET", "0");
  info = detectLaunch();
  EXPECT_EQ(info.root->port(), 29500);
  set("MASTER_ADDR", "fd00::7");
  EXPECT_EQ(detectLaunch().root->toString(), "[fd00::7]:29500");
}

TEST_F(LauncherEnv, OpenMpi) {
  set("OMPI_COMM_WORLD_RANK", "2");
  set("OMPI_COMM_WORLD_SIZE", "3");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "1");
  const LaunchInfo info = detectLaunch();
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.nranks, 3);
  EXPECT_EQ(info.localRank, 0);
  EXPECT_EQ(info.localNranks, 1);
  EXPECT_FALSE(info.root);
}

TEST_F(LauncherEnv, Mpich) {
  set("PMI_RANK", "5");
  set("PMI_SIZE", "6");
  set("MPI_LOCALRANKID", "1");
  set("MPI_LOCALNRANKS", "2");
  const LaunchInfo info = detectLaunch();
  EXPECT_EQ(info.launcher, "mpich");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.nranks, 6);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localNranks, 2);
}

TEST_F(LauncherEnv, Slurm) {
  set("SLURM_PROCID", "7");
  set("SLURM_NTASKS", "16");
  set("SLURM_LOCALID", "3");
  const LaunchInfo info = detectLaunch();
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 7);
  EXPECT_EQ(info.nranks, 16);
  EXPECT_EQ(info.localRank, 3);
  EXPECT_EQ(info.localNranks, -1);
}

TEST_F(LauncherEnv, PriorityOrder) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "1");
  EXPECT_EQ(detectLaunch().launcher, "slurm");
  set("PMI_RANK", "0");
  set("PMI_SIZE", "2");
  EXPECT_EQ(detectLaunch().launcher, "mpich");
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "3");
  EXPECT_EQ(detectLaunch().launcher, "openmpi");
  set("RANK", "0");
  set("WORLD_SIZE", "4");
  EXPECT_EQ(detectLaunch().launcher, "torchrun");
  set("TIDAL_RANK", "0");
  set("TIDAL_NRANKS", "5");
  EXPECT_EQ(detectLaunch().launcher, "tidal");
  EXPECT_EQ(detectLaunch().nranks, 5);
}

TEST_F(LauncherEnv, HalfATorchrunPairIsIgnored) {
  set("RANK", "1");  // RANK alone is too generic a name to mean torchrun
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(detectLaunch().launcher, "openmpi");
}

TEST_F(LauncherEnv, BadValuesNameVariableAndValue) {
  set("RANK", "abc");
  set("WORLD_SIZE", "4");
  expectFailure(tidalInvalidArgument, "RANK='abc'");
  set("RANK", "4");
  expectFailure(tidalInvalidArgument, "RANK=4 is out of range for WORLD_SIZE=4");
  set("RANK", "0");
  set("WORLD_SIZE", "0");
  expectFailure(tidalInvalidArgument, "WORLD_SIZE=0");
  set("WORLD_SIZE", "4 ");
  expectFailure(tidalInvalidArgument, "WORLD_SIZE='4 '");
  set("WORLD_SIZE", "4");
  set("LOCAL_RANK", "2");
  set("LOCAL_WORLD_SIZE", "2");
  expectFailure(tidalInvalidArgument, "LOCAL_RANK=2");
  set("LOCAL_RANK", "0");
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", "70000");
  expectFailure(tidalInvalidArgument, "MASTER_PORT=70000");
  set("MASTER_PORT", "x");
  expectFailure(tidalInvalidArgument, "MASTER_PORT='x'");
  set("MASTER_PORT", "29500");
  set("MASTER_ADDR", "no-such-host.invalid");
  expectFailure(tidalInvalidArgument, "MASTER_ADDR='no-such-host.invalid'");
}

TEST_F(LauncherEnv, BadTidalValues) {
  set("TIDAL_RANK", "1");
  expectFailure(tidalInvalidUsage, "TIDAL_NRANKS");
  set("TIDAL_NRANKS", "one");
  expectFailure(tidalInvalidArgument, "TIDAL_NRANKS='one'");
  set("TIDAL_NRANKS", "1");
  expectFailure(tidalInvalidArgument, "TIDAL_RANK=1 is out of range");
  set("TIDAL_RANK", "0");
  set("TIDAL_COMM_ID", "no-port");
  expectFailure(tidalInvalidArgument, "TIDAL_COMM_ID='no-port'");
  set("TIDAL_COMM_ID", "127.0.0.1:4000");
  set("TIDAL_SECRET", "xyz");
  expectFailure(tidalInvalidArgument, "TIDAL_SECRET");
  set("TIDAL_SECRET", "00112233445566778899aabbccddeeff");
  const LaunchInfo info = detectLaunch();
  ASSERT_TRUE(info.secret);
  EXPECT_EQ(secretToHex(*info.secret), "00112233445566778899aabbccddeeff");
}

TEST_F(LauncherEnv, BadMpiValues) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "-3");
  expectFailure(tidalInvalidArgument, "OMPI_COMM_WORLD_SIZE=-3");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  set("PMI_RANK", "1");
  set("PMI_SIZE", "2");
  set("MPI_LOCALRANKID", "z");
  expectFailure(tidalInvalidArgument, "MPI_LOCALRANKID='z'");
  unsetenv("PMI_RANK");
  unsetenv("PMI_SIZE");
  set("SLURM_PROCID", "99999999999");
  set("SLURM_NTASKS", "2");
  expectFailure(tidalInvalidArgument, "SLURM_PROCID='99999999999'");
}

TEST_F(LauncherEnv, DerivedSecretDependsOnTheJob) {
  const Secret a = derivedSecret("10.0.0.1:29501", 8);
  EXPECT_EQ(derivedSecret("10.0.0.1:29501", 8), a);
  EXPECT_NE(derivedSecret("10.0.0.1:29501", 4), a);
  EXPECT_NE(derivedSecret("10.0.0.1:29502", 8), a);
  set("SLURM_JOB_ID", "1234");
  EXPECT_NE(derivedSecret("10.0.0.1:29501", 8), a);
}

TEST_F(LauncherEnv, NoAddressAndNoPmixIsInvalidUsage) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "2");
  try {
    agreeOnUniqueId(detectLaunch());
    FAIL() << "agreed on an id without any rendezvous";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidUsage);
    const std::string text = e.what();
    EXPECT_NE(text.find("TIDAL_COMM_ID"), std::string::npos) << text;
    EXPECT_NE(text.find("MASTER_ADDR"), std::string::npos) << text;
    EXPECT_NE(text.find("PMIx"), std::string::npos) << text;
  }
}

// Every "process" of the job is a thread with its own copy of LaunchInfo
// (the environment is per process, so only the rank differs).
void runJobFromEnv(int n) {
  const LaunchInfo base = detectLaunch();
  std::vector<std::optional<std::string>> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        LaunchInfo mine = base;
        mine.rank = r;
        const UniqueId id = agreeOnUniqueId(mine);
        auto b = Bootstrap::create(id, r, n);
        std::vector<int> all(static_cast<size_t>(n));
        const int value = 100 + r;
        b->allGather(&value, all.data(), sizeof value);
        for (int i = 0; i < n; ++i) {
          if (all[static_cast<size_t>(i)] != 100 + i) throw std::runtime_error("bad allGather");
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(errors[static_cast<size_t>(r)])
        << "rank " << r << ": " << *errors[static_cast<size_t>(r)];
  }
}

TEST_F(LauncherEnv, JobThroughTidalCommId) {
  set("TIDAL_TIMEOUT", "30");
  const std::string commId = "127.0.0.1:" + std::to_string(freePort());
  set("TIDAL_COMM_ID", commId.c_str());
  set("TIDAL_RANK", "0");
  set("TIDAL_NRANKS", "3");
  set("TIDAL_SECRET", "0123456789abcdef0123456789abcdef");
  runJobFromEnv(3);
}

TEST_F(LauncherEnv, JobThroughMasterAddrHostName) {
  set("TIDAL_TIMEOUT", "30");
  set("RANK", "0");
  set("WORLD_SIZE", "4");
  set("MASTER_ADDR", "localhost");  // a name: rank 0 listens on every interface
  set("MASTER_PORT", std::to_string(freePort() - 1).c_str());
  set("TORCHELASTIC_RUN_ID", "test-run");
  runJobFromEnv(4);
}

}  // namespace
}  // namespace tidal
