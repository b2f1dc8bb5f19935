// Pieces the shm transport tests share: a connected pair of transports,
// driving one connection as the engine does (sleeping in poll()), byte
// patterns, a reducer that checks it is handed whole elements, and whether
// pulls can work on this machine.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/secret.h"
#include "transports/transport.h"

namespace tidal::test {

inline Secret secretOf(uint8_t b) {
  Secret s;
  s.fill(b);
  return s;
}

// Like the engine: progress, and when nothing moved sleep in poll() on the
// connection's fds. Returns the number of polls that ran into their timeout
// while work was pending (a lost wakeup); throws what progress() throws.
inline int driveUntilDone(Connection& c, Deadline deadline) {
  int stalls = 0;
  while (c.completed() < c.posted()) {
    if (c.progress()) continue;
    if (Clock::now() > deadline) throw std::runtime_error("driveUntilDone: deadline");
    std::vector<pollfd> fds;
    c.addPollFds(fds);
    if (::poll(fds.data(), fds.size(), 100) == 0) ++stalls;
  }
  return stalls;
}

inline std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

// Why this kernel refuses process_vm_readv (a seccomp profile may), or ""
// where shm pulls can work: tests of pulls skip with the reason instead of
// passing without having pulled.
inline std::string pullRefusedHere() {
  uint64_t word = 0x1234, seen = 0;
  iovec local{&seen, sizeof seen}, remote{&word, sizeof word};
  if (::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == sizeof seen && seen == word) {
    return "";
  }
  return std::strerror(errno);
}

// Rank 0 -> 1 over two shm transports of this process, made with the
// TIDAL_SHM_* settings in force when constructed.
struct ShmPair {
  std::unique_ptr<Transport> t0, t1;
  std::unique_ptr<Connection> send, recv;
  ShmPair() {
    t0 = createTransport("shm", {0, 2, secretOf(7)});
    t1 = createTransport("shm", {1, 2, secretOf(7)});
    const ConnectHandle h1 = t1->listen();
    t0->listen();
    const Deadline d = deadlineIn(std::chrono::milliseconds(10000));
    send = t0->connectSend(1, h1, d);
    recv = t1->acceptRecv(0, d);
  }
};

// Sums 8-byte integers, and fails the test if handed a piece that is not a
// whole number of them (a piece cut inside an element would corrupt it).
class Int64Sum final : public ArrivalReducer {
 public:
  void combine(void* dst, const void* local, const void* incoming, size_t bytes) const override {
    if (bytes % sizeof(int64_t) != 0) ADD_FAILURE() << "piece of " << bytes << " bytes";
    pieces_.fetch_add(1);
    auto* d = static_cast<int64_t*>(dst);
    const auto* a = static_cast<const int64_t*>(local);
    const auto* b = static_cast<const int64_t*>(incoming);
    for (size_t i = 0; i < bytes / sizeof(int64_t); ++i) d[i] = a[i] + b[i];
  }
  mutable std::atomic<int> pieces_{0};
};

}  // namespace tidal::test
