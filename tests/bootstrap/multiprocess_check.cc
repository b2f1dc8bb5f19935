// One rank of a real multi-process bootstrap: detectLaunch, agreeOnUniqueId,
// Bootstrap::create, then allGather / broadcast / barrier with checked data.
//
//   multiprocess_check [--expect-launcher NAME]   run as one rank (mpirun, srun, torchrun)
//   multiprocess_check --spawn N                  fork N ranks with torchrun-style
//                                                 variables on a free loopback port
// Exits 0 when every check passed on this rank (with --spawn: on all ranks).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher_env.h"
#include "core/error.h"

namespace {

uint8_t pattern(int rank, size_t i) { return static_cast<uint8_t>(rank * 17 + i * 3 + (i >> 11)); }

int runRank(const char* expectLauncher) {
  using namespace tidal;
  const LaunchInfo launch = detectLaunch();
  if (expectLauncher != nullptr && launch.launcher != expectLauncher) {
    std::fprintf(stderr, "expected launcher %s, detected %s\n", expectLauncher,
                 launch.launcher.c_str());
    return 1;
  }
  const UniqueId id = agreeOnUniqueId(launch);
  auto b = Bootstrap::create(id, launch.rank, launch.nranks);
  const int n = b->nranks(), me = b->rank();

  // 256 KiB per rank: more than the loopback socket buffers hold at once.
  const size_t bytes = 256u << 10;
  std::vector<uint8_t> all(bytes * static_cast<size_t>(n));
  std::vector<uint8_t> mine(bytes);
  for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(me, i);
  b->allGather(mine.data(), all.data(), bytes);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < bytes; ++i) {
      if (all[static_cast<size_t>(r) * bytes + i] != pattern(r, i)) {
        std::fprintf(stderr, "rank %d: allGather block %d wrong at byte %zu\n", me, r, i);
        return 1;
      }
    }
  }
  int64_t value = me == n - 1 ? 0x5eed + n : -1;
  b->broadcast(&value, sizeof value, n - 1);
  if (value != 0x5eed + n) {
    std::fprintf(stderr, "rank %d: broadcast gave %lld\n", me, static_cast<long long>(value));
    return 1;
  }
  b->barrier();
  std::printf("rank %d of %d (%s, root %s): ok\n", me, n, launch.launcher.c_str(),
              id.root.toString().c_str());
  return 0;
}

int spawn(const char* self, int n) {
  uint16_t port = 0;
  {
    tidal::Socket probe = tidal::Socket::listenOn(tidal::SocketAddress::loopback(AF_INET, 0));
    port = probe.localAddress().port();
  }
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      // A torchrun-like environment, and nothing of an outer launcher.
      for (const char* v :
           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
            "SLURM_NTASKS", "TIDAL_COMM_ID", "TIDAL_RANK", "TIDAL_NRANKS", "PMIX_NAMESPACE"}) {
        unsetenv(v);
      }
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port - 1).c_str(), 1);
      setenv("TIDAL_MASTER_PORT_OFFSET", "1", 1);
      execl(self, self, "--expect-launcher", "torchrun", static_cast<char*>(nullptr));
      std::perror("execl");
      _exit(127);
    }
    children.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : children) {
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failures;
    }
  }
  if (failures > 0) std::fprintf(stderr, "%d of %d ranks failed\n", failures, n);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::strcmp(argv[1], "--spawn") == 0)
      return spawn(argv[0], std::atoi(argv[2]));
    if (argc == 3 && std::strcmp(argv[1], "--expect-launcher") == 0) return runRank(argv[2]);
    if (argc == 1) return runRank(nullptr);
    std::fprintf(stderr, "usage: %s [--expect-launcher NAME | --spawn N]\n", argv[0]);
    return 2;
  } catch (const tidal::Error& e) {
    std::fprintf(stderr, "error (code %d): %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
}
