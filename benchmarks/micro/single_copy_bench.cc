// Is a single kernel copy (cross-memory attach, process_vm_readv) faster than
// the shm transport's two user-space copies (sender into the ring, receiver
// out of it)? Prints, per size, the time of one process_vm_readv from a child
// process's memory and of two memcpys through a bounce buffer, each over the
// same buffers again and again (warm caches, as in a ring pipeline).
//
//   build/benchmarks/single_copy_bench [max-bytes]
//
// On the 2-core development VM the two memcpys won at every size (see
// docs/transports.md), which is why the shm transport copies twice.
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double secondsPer(int iterations, const auto& body) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         iterations;
}

// "64M", "256K", "1048576".
size_t parseBytes(const char* text) {
  char* end = nullptr;
  size_t v = std::strtoull(text, &end, 0);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t maxBytes = argc > 1 ? parseBytes(argv[1]) : size_t{64} << 20;
  std::vector<char> source(maxBytes, 1), bounce(maxBytes, 0), target(maxBytes, 0);
  int pipeFds[2];
  if (::pipe(pipeFds) != 0) return 1;
  const pid_t child = ::fork();
  if (child == 0) {
    // The child owns the memory the parent reads; it tells the parent where.
    const char* address = source.data();
    if (::write(pipeFds[1], &address, sizeof address) != sizeof address) _exit(1);
    ::pause();
    _exit(0);
  }
  char* remote = nullptr;
  if (::read(pipeFds[0], &remote, sizeof remote) != sizeof remote) return 1;
  std::printf("%10s %14s %10s %18s %10s\n", "bytes", "cma (us)", "GB/s", "2x memcpy (us)", "GB/s");
  int status = 0;
  for (size_t bytes = 16 << 10; bytes <= maxBytes; bytes *= 4) {
    const int iterations = bytes < (size_t{1} << 20) ? 2000 : 50;
    const double cma = secondsPer(iterations, [&] {
      iovec local{target.data(), bytes}, far{remote, bytes};
      if (::process_vm_readv(child, &local, 1, &far, 1, 0) != static_cast<ssize_t>(bytes)) {
        std::perror("process_vm_readv");
        std::exit(2);
      }
    });
    const double twice = secondsPer(iterations, [&] {
      std::memcpy(bounce.data(), source.data(), bytes);
      std::memcpy(target.data(), bounce.data(), bytes);
    });
    std::printf("%10zu %14.1f %10.2f %18.1f %10.2f\n", bytes, cma * 1e6, bytes / cma / 1e9,
                twice * 1e6, bytes / twice / 1e9);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return 0;
}
