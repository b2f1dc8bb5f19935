// Failures a user meets in production: a rank killed in the middle of an
// AllReduce, and a stranger poking the rendezvous port. Real processes, real
// sockets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "job_fork.h"
#include "killed_rank.h"
#include "tidal/tidal.h"

namespace {

using namespace std::chrono;
using tidal::test::ForkedJob;

constexpr int kTimeoutSeconds = 10;

std::set<std::string> devShmEntries() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    names.insert(e.path().filename().string());
  }
  return names;
}

class KilledRank : public ::testing::TestWithParam<const char*> {};

TEST_P(KilledRank, EveryOtherRankReturnsAnErrorWithinTheTimeout) {
  constexpr int kRanks = 4, kVictim = 2;
  const auto shmBefore = devShmEntries();
  ForkedJob job(kRanks,
                [](int rank) {
                  // 16 MiB of floats: each call takes a while.
                  return tidal::test::survivorOrVictim(rank, kVictim, 4u << 20, kTimeoutSeconds);
                },
                {{"TIDAL_TIMEOUT", std::to_string(kTimeoutSeconds)}, {"TIDAL_NET", GetParam()}});
  const auto status = job.wait(seconds(4 * kTimeoutSeconds));
  tidal::test::expectSurvivorsGotTheError(status, kVictim);
  // Nothing of the job may outlive it in /dev/shm, not even after a SIGKILL.
  for (const auto& name : devShmEntries()) {
    EXPECT_TRUE(shmBefore.count(name)) << "/dev/shm/" << name << " was left behind";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, KilledRank, ::testing::Values("tcp", "shm"));

// Sends `bytes` to the rendezvous port and reports whether the far end then
// closed the connection within `patience`.
bool strangerIsShownTheDoor(int port, const std::vector<uint8_t>& bytes, seconds patience) {
  const auto deadline = steady_clock::now() + seconds(20);
  int fd = -1;
  while (steady_clock::now() < deadline) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) break;
    ::close(fd);
    fd = -1;
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (fd < 0) return false;
  if (!bytes.empty()) (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  timeval tv{static_cast<time_t>(patience.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  ssize_t n;
  // Whatever the root says back, it must end with a close (0) or a reset.
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  const bool closed = n == 0 || (n < 0 && errno == ECONNRESET);
  ::close(fd);
  return closed;
}

int honestRank(int rank) {
  // The last rank comes late, so that the root is listening and still
  // waiting while the stranger calls: otherwise a fast job can finish its
  // rendezvous and close the port before the stranger gets there.
  if (rank == 2) std::this_thread::sleep_for(milliseconds(1500));
  tidalComm_t comm;
  if (tidalCommInitFromEnv(&comm) != tidalSuccess) return 1;
  int n = 0;
  tidalCommCount(comm, &n);
  std::vector<int32_t> v(1000, 2);
  if (tidalAllReduce(v.data(), v.data(), v.size(), tidalInt32, tidalSum, comm, nullptr) !=
      tidalSuccess) {
    return 2;
  }
  for (int32_t x : v) {
    if (x != 2 * n) return 3;
  }
  tidalCommDestroy(comm);
  return 0;
}

class Stranger : public ::testing::TestWithParam<int> {};

TEST_P(Stranger, IsRefusedAndTheJobStillCompletes) {
  std::vector<uint8_t> payload;
  switch (GetParam()) {
    case 0:  // garbage bytes
      payload.assign(200, 0xab);
      break;
    case 1: {  // plausible header with an absurd length
      payload.assign(64, 0);
      const uint32_t magic = 0x5444424bu, huge = 0xffffffffu;
      std::memcpy(payload.data(), &magic, 4);
      std::memcpy(payload.data() + 8, &huge, 4);
      std::memcpy(payload.data() + 12, &huge, 4);
      break;
    }
    default:  // says nothing at all
      break;
  }
  ForkedJob job(3, honestRank, {{"TIDAL_TIMEOUT", "30"}});
  const bool closed = strangerIsShownTheDoor(job.port, payload, seconds(15));
  const auto status = job.wait(seconds(60));
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(status[r] != -1 && WIFEXITED(status[r])) << "rank " << r << " status " << status[r];
    EXPECT_EQ(WEXITSTATUS(status[r]), 0) << "rank " << r;
  }
  EXPECT_TRUE(closed) << "the root kept the stranger's connection open";
}

INSTANTIATE_TEST_SUITE_P(Kinds, Stranger, ::testing::Values(0, 1, 2));

}  // namespace
