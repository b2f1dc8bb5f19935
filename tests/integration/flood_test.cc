// A flood of idle connections at a listening port must not keep a job's
// ranks out: 1,100 connections are opened and held (more than the acceptor
// keeps pending, kMaxPendingHellos = 1024) on the bootstrap root's port, or on
// a rank's bootstrap ring port, before the last rank joins; the job must still
// initialise and give exact results. Real forked ranks, real sockets.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
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
using std::chrono::steady_clock;
using tidal::test::expectEveryRankPassed;
using tidal::test::ForkedJob;

constexpr int kFlood = 1100;

// Opens `count` connections to 127.0.0.1:port and keeps them; returns their fds.
std::vector<int> holdConnections(int port, int count) {
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (fd >= 0) ::close(fd);
      break;
    }
    fds.push_back(fd);
  }
  return fds;
}

bool waitUntilListening(int port, seconds limit) {
  const auto deadline = steady_clock::now() + limit;
  while (steady_clock::now() < deadline) {
    std::vector<int> one = holdConnections(port, 1);
    for (int fd : one) ::close(fd);
    if (!one.empty()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

// The TCP ports `pid` listens on (from /proc: its socket inodes, matched
// against the kernel's table of listening sockets).
std::set<int> listeningPorts(pid_t pid) {
  std::set<std::string> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      char target[128] = {0};
      const std::string link = dir + "/" + e->d_name;
      if (::readlink(link.c_str(), target, sizeof target - 1) > 0) {
        const std::string t = target;
        if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
      }
    }
    ::closedir(d);
  }
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >>
          inode;
      if (state != "0A" || !inodes.count(inode)) continue;  // 0A: LISTEN
      ports.insert(std::stoi(local.substr(local.rfind(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

// Rank body: waits for the parent's go (a byte on `go`) when it is late,
// then initialises and checks an AllReduce.
int rank(int r, bool late, int go) {
  if (late) {
    pollfd p{go, POLLIN, 0};
    if (::poll(&p, 1, 60000) != 1) return 20;
  }
  tidalComm_t comm;
  if (tidalCommInitFromEnv(&comm) != tidalSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", r, tidalGetLastError(nullptr));
    return 1;
  }
  int n = 0;
  tidalCommCount(comm, &n);
  std::vector<int32_t> v(1000, r + 1);
  if (tidalAllReduce(v.data(), v.data(), v.size(), tidalInt32, tidalSum, comm, nullptr) !=
      tidalSuccess) {
    return 2;
  }
  for (int32_t x : v) {
    if (x != n * (n + 1) / 2) return 3;
  }
  tidalCommDestroy(comm);
  return 0;
}

void raiseDescriptorLimit() {
  rlimit l{};
  ::getrlimit(RLIMIT_NOFILE, &l);
  if (l.rlim_cur < 4096 && l.rlim_max >= 4096) {
    l.rlim_cur = 4096;
    ::setrlimit(RLIMIT_NOFILE, &l);
  }
}

TEST(Flood, JobInitialisesWhileIdleConnectionsHoldTheRootPort) {
  raiseDescriptorLimit();
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  // Rank 0 (holding the root) starts at once; the others wait for the flood.
  ForkedJob job(3, [&](int r) { return rank(r, r != 0, go[0]); }, {{"TIDAL_TIMEOUT", "40"}});
  ASSERT_TRUE(waitUntilListening(job.port, seconds(20)));
  const std::vector<int> flood = holdConnections(job.port, kFlood);
  EXPECT_EQ(flood.size(), static_cast<size_t>(kFlood));
  ASSERT_EQ(::write(go[1], "xx", 2), 2);
  const auto status = job.wait(seconds(90));
  for (int fd : flood) ::close(fd);
  expectEveryRankPassed(status);
}

TEST(Flood, JobInitialisesWhileIdleConnectionsHoldARingPort) {
  raiseDescriptorLimit();
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  // Ranks 0 and 1 join and wait at the root for rank 2; meanwhile rank 1's
  // bootstrap listener (its only one before the rendezvous completes) is
  // flooded. Rank 0 must still connect the ring to it.
  ForkedJob job(3, [&](int r) { return rank(r, r == 2, go[0]); }, {{"TIDAL_TIMEOUT", "40"}});
  // A forked rank inherits the test process's own listening sockets (an
  // earlier test's rendezvous root, still running): those are not its own.
  const std::set<int> inherited = listeningPorts(::getpid());
  std::set<int> ports;
  const auto deadline = steady_clock::now() + seconds(20);
  while (steady_clock::now() < deadline) {
    ports.clear();
    for (int port : listeningPorts(job.pids[1]))
      if (!inherited.count(port)) ports.insert(port);
    if (!ports.empty()) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_FALSE(ports.empty()) << "rank 1 never listened";
  std::vector<int> flood;
  for (int port : ports) {
    std::vector<int> held = holdConnections(port, kFlood);
    EXPECT_EQ(held.size(), static_cast<size_t>(kFlood)) << "port " << port;
    flood.insert(flood.end(), held.begin(), held.end());
  }
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  const auto status = job.wait(seconds(90));
  for (int fd : flood) ::close(fd);
  expectEveryRankPassed(status);
}

}  // namespace
