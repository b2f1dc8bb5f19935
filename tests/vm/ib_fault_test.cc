// Failures over a real RDMA device (run in the VM; skipped without one),
// with real rank processes: a peer killed in the middle of a transfer, and
// the GID misconfigurations RoCE users meet most.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../integration/job_fork.h"
#include "../integration/killed_rank.h"
#include "tidal/tidal.h"
#include "transports/ib/device_select.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/verbs_api.h"

namespace tidal::ib {
namespace {

using namespace std::chrono;
using test::ForkedJob;

constexpr int kTimeoutSeconds = 10;

std::optional<PortCandidate> firstPort() {
  std::string why;
  const VerbsApi* api = VerbsApi::load(&why);
  if (!api) return std::nullopt;
  const PortScan scan = scanPorts(*api, HcaSpec{});
  if (scan.usable.empty()) return std::nullopt;
  return scan.usable.front();
}

TEST(IbFaults, KilledPeerMidTransferFailsEveryOtherRankWithinTheTimeout) {
  if (!firstPort()) GTEST_SKIP() << "no active RDMA port here";
  constexpr int kRanks = 3, kVictim = 1;
  ForkedJob job(kRanks,
                [](int rank) {
                  // 4 MiB of floats: each call takes a while on Soft-RoCE.
                  return test::survivorOrVictim(rank, kVictim, 1u << 20, kTimeoutSeconds);
                },
                {{"TIDAL_TIMEOUT", std::to_string(kTimeoutSeconds)}, {"TIDAL_NET", "ib"}});
  const auto status = job.wait(seconds(6 * kTimeoutSeconds));
  test::expectSurvivorsGotTheError(status, kVictim);
}

// Each rank: init must fail with InvalidArgument and text containing every
// one of `needles`. Exit 0 when so, else says what went wrong.
int initFailsWith(int rank, const std::vector<std::string>& needles) {
  tidalComm_t comm;
  const tidalResult_t r = tidalCommInitFromEnv(&comm);
  if (r == tidalSuccess) {
    tidalCommDestroy(comm);
    return 1;
  }
  const std::string text = tidalGetLastError(nullptr);
  std::fprintf(stderr, "rank %d: init failed as expected (%s): %s\n", rank, tidalGetErrorString(r),
               text.c_str());
  if (r != tidalInvalidArgument) return 2;
  for (const auto& n : needles) {
    if (text.find(n) == std::string::npos) {
      std::fprintf(stderr, "rank %d: the error does not say '%s'\n", rank, n.c_str());
      return 3;
    }
  }
  return 0;
}

void expectAllExitZero(const std::vector<int>& status) {
  for (size_t r = 0; r < status.size(); ++r) {
    ASSERT_TRUE(status[r] != -1 && WIFEXITED(status[r])) << "rank " << r << " hung or crashed";
    EXPECT_EQ(WEXITSTATUS(status[r]), 0)
        << "rank " << r << " (1: init succeeded, 2: wrong code, 3: unclear text)";
  }
}

TEST(IbFaults, UnusedGidIndexIsAClearErrorAtInit) {
  const auto port = firstPort();
  if (!port) GTEST_SKIP() << "no active RDMA port here";
  if (!port->ethernet) GTEST_SKIP() << "InfiniBand port";
  const auto table = readGidTable(sysfsPortDir(port->device, port->port));
  int unused = static_cast<int>(table.size()) + 3;
  for (const auto& e : table) {
    if (e.empty()) {
      unused = e.index;
      break;
    }
  }
  const std::vector<std::string> needles = {port->device, fmt::format("port {}", port->port),
                                            fmt::format("TIDAL_IB_GID_INDEX={}", unused),
                                            "Usable GIDs there"};
  const auto start = steady_clock::now();
  ForkedJob job(2, [&](int rank) { return initFailsWith(rank, needles); },
                {{"TIDAL_NET", "ib"},
                 {"TIDAL_TIMEOUT", "30"},
                 {"TIDAL_IB_GID_INDEX", std::to_string(unused)}});
  expectAllExitZero(job.wait(seconds(60)));
  EXPECT_LT(steady_clock::now() - start, seconds(20)) << "must fail at once, not at the timeout";
}

TEST(IbFaults, RanksOnDifferentAddressFamiliesAreToldWhichGidsDiffer) {
  const auto port = firstPort();
  if (!port) GTEST_SKIP() << "no active RDMA port here";
  const auto table = readGidTable(sysfsPortDir(port->device, port->port));
  int nonIpv4 = -1;
  for (const auto& e : table) {
    if (!e.empty() && e.roceV2() && !e.ipv4Mapped()) {
      nonIpv4 = e.index;
      break;
    }
  }
  if (!port->ethernet || nonIpv4 < 0) GTEST_SKIP() << "no IPv6 RoCE v2 GID on this port";
  const std::string index = std::to_string(nonIpv4);
  ForkedJob job(2,
                [&](int rank) {
                  // Rank 0 is "misconfigured" onto the IPv6 GID; rank 1 chooses itself.
                  if (rank == 0) setenv("TIDAL_IB_GID_INDEX", index.c_str(), 1);
                  return initFailsWith(rank, {"GID index " + index, "TIDAL_IB_GID_INDEX", "rank"});
                },
                {{"TIDAL_NET", "ib"}, {"TIDAL_TIMEOUT", "30"}});
  expectAllExitZero(job.wait(seconds(60)));
}

}  // namespace
}  // namespace tidal::ib
