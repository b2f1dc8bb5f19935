// Starts N rank processes by fork(), each with the environment a launcher
// would give it (TIDAL_COMM_ID, TIDAL_RANK, TIDAL_NRANKS, TIDAL_SECRET), and
// collects their exit statuses with a deadline, so a test can run real
// multi-process jobs, including ones where a rank dies on purpose.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tidal::test {

// Whether 127.0.0.1:port (0: any) can be bound now; *port gets the port.
inline bool bindablePort(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(*port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  socklen_t len = sizeof a;
  if (ok) ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  if (ok) *port = ntohs(a.sin_port);
  return ok;
}

// A port that was free a moment ago on 127.0.0.1, below the ephemeral range
// where no test's connect() can take it before rank 0 binds it (as tidalrun
// chooses its rendezvous port).
inline int freePort() {
  int low = 0, high = 0;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 0;
    std::fclose(f);
  }
  if (low > 11000) {
    std::random_device random;  // not rand(): every test process would start alike
    for (int attempt = 0; attempt < 64; ++attempt) {
      int port = 10000 + static_cast<int>(random() % static_cast<unsigned>(low - 10000));
      if (bindablePort(&port)) return port;
    }
  }
  int port = 0;
  bindablePort(&port);
  return port;
}

struct ForkedJob {
  std::vector<pid_t> pids;
  int port = 0;

  // Runs body(rank) in each child; the child exits with its return value.
  ForkedJob(int nranks, const std::function<int(int)>& body,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
    port = freePort();
    for (int r = 0; r < nranks; ++r) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::setenv("TIDAL_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
        ::setenv("TIDAL_RANK", std::to_string(r).c_str(), 1);
        ::setenv("TIDAL_NRANKS", std::to_string(nranks).c_str(), 1);
        ::setenv("TIDAL_SECRET", "0123456789abcdef0123456789abcdef", 1);
        for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
        std::_Exit(body(r));
      }
      pids.push_back(pid);
    }
  }

  // Exit statuses (as from waitpid) by rank; children still running after
  // `limit` are killed and reported as -1.
  std::vector<int> wait(std::chrono::seconds limit) {
    std::vector<int> status(pids.size(), -1);
    std::vector<bool> done(pids.size(), false);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    size_t remaining = pids.size();
    while (remaining > 0 && std::chrono::steady_clock::now() < deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        int st = 0;
        if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
          status[i] = st;
          done[i] = true;
          --remaining;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (!done[i]) {
        // Say where it hung before it goes: a rank past the deadline is the
        // bug these tests exist to find, and it may not come back on a rerun.
        std::fprintf(stderr, "rank %zu (pid %d) still runs after %lld s; its stacks:\n", i,
                     static_cast<int>(pids[i]), static_cast<long long>(limit.count()));
        const std::string gdb = "gdb -p " + std::to_string(pids[i]) +
                                " -batch -ex 'thread apply all bt' 1>&2 2>/dev/null";
        if (std::system(gdb.c_str()) != 0) std::fprintf(stderr, "(no gdb stacks)\n");
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
      }
    }
    return status;
  }
};

}  // namespace tidal::test
