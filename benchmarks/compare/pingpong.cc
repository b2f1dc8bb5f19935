// Point-to-point latency and bandwidth between two ranks, in the manner of the
// OSU micro-benchmarks' osu_latency and osu_bw, built twice from this one
// file so that both programs time exactly the same loops and print the same
// table:
//
//   tidal_pingpong  tidalSend / tidalRecv       tidalrun -np 2 build/benchmarks/tidal_pingpong
//   mpi_pingpong    MPI_Send / MPI_Recv         mpirun -np 2 build/benchmarks/mpi_pingpong
//                   (built with PINGPONG_MPI)
//
// Latency: rank 0 sends `size` bytes, rank 1 sends them back; half the round
// trip, averaged over the timed iterations after the warm-up ones. Both
// directions are blocking calls (Tidal: outside any group).
//
// Bandwidth: rank 0 posts a window of back-to-back sends of `size` bytes
// (Tidal: one group of `window` tidalSend; MPI: `window` MPI_Isend and one
// MPI_Waitall), rank 1 receives them the same way and answers with a 4-byte
// ack; bytes sent / time, in MB/s (10^6 bytes per second).
//
// tidal_pingpong --one-sided times NCCL 2.29's one-sided calls instead: each
// message is a tidalPutSignal into the peer's receive buffer (registered as
// a window), received by tidalWaitSignal; the bandwidth ack is a tidalSignal.
//
// Flags: the *_perf ones that apply (-b -e -f -i sizes, -n iterations, -w
// warm-up, -c check), plus --window and --budget-mib (and --one-sided). Large sizes run fewer
// iterations: each measurement moves about --budget-mib MiB (at least 2
// iterations), so that 64 MiB with a window of 64 stays within seconds. Each
// size is checked once before timing: a patterned message goes each way and
// every byte is compared; the #wrong column counts the bytes that differ.
#ifdef PINGPONG_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#else
#include "tidal/tidal.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "host_buffer.h"
#include "options.h"
#include "timer.h"

namespace {

#ifdef PINGPONG_MPI
// The library under test: blocking sends and receives of bytes to the other
// rank, a window of them in flight at once, and a barrier.
class Peer {
 public:
  Peer(int* argc, char*** argv) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~Peer() { MPI_Finalize(); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string name() const {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, static_cast<size_t>(std::max(length, 0)));
    text = text.substr(0, text.find_first_of("\n,"));
    return "MPI_Send / MPI_Recv, window: MPI_Isend / MPI_Irecv + MPI_Waitall (" + text + ")";
  }

  void send(const void* buf, size_t bytes) {
    MPI_Send(buf, static_cast<int>(bytes), MPI_BYTE, other(), 0, MPI_COMM_WORLD);
  }
  void recv(void* buf, size_t bytes) {
    MPI_Recv(buf, static_cast<int>(bytes), MPI_BYTE, other(), 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  void sendWindow(const void* buf, size_t bytes, int window) {
    requests_.resize(static_cast<size_t>(window));
    for (MPI_Request& request : requests_) {
      MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, other(), 1, MPI_COMM_WORLD, &request);
    }
    MPI_Waitall(window, requests_.data(), MPI_STATUSES_IGNORE);
  }
  void recvWindow(void* buf, size_t bytes, int window) {
    requests_.resize(static_cast<size_t>(window));
    for (MPI_Request& request : requests_) {
      MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, other(), 1, MPI_COMM_WORLD, &request);
    }
    MPI_Waitall(window, requests_.data(), MPI_STATUSES_IGNORE);
  }
  void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
  [[noreturn]] void abort() {
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
  }

 private:
  int other() const { return 1 - rank_; }
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> requests_;
};
#else
class Peer {
 public:
  Peer(int*, char***) {
    check(tidalCommInitFromEnv(&comm_));
    check(tidalCommUserRank(comm_, &rank_));
    check(tidalCommCount(comm_, &size_));
  }
  ~Peer() {
    if (comm_) tidalCommDestroy(comm_);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string name() const {
    int version = 0;
    tidalGetVersion(&version);
    const char* net = std::getenv("TIDAL_NET");
    return fmt::format(
        "tidalSend / tidalRecv outside groups, window: one group of tidalSend / tidalRecv "
        "(Tidal {}, TIDAL_NET={})",
        version, net ? net : "unset");
  }

  void send(const void* buf, size_t bytes) {
    check(tidalSend(buf, bytes, tidalUint8, other(), comm_, nullptr));
  }
  void recv(void* buf, size_t bytes) {
    check(tidalRecv(buf, bytes, tidalUint8, other(), comm_, nullptr));
  }
  void sendWindow(const void* buf, size_t bytes, int window) {
    check(tidalGroupStart());
    for (int i = 0; i < window; ++i)
      check(tidalSend(buf, bytes, tidalUint8, other(), comm_, nullptr));
    check(tidalGroupEnd());
  }
  void recvWindow(void* buf, size_t bytes, int window) {
    check(tidalGroupStart());
    for (int i = 0; i < window; ++i)
      check(tidalRecv(buf, bytes, tidalUint8, other(), comm_, nullptr));
    check(tidalGroupEnd());
  }
  void barrier() {
    float token = 0;
    check(tidalAllReduce(&token, &token, 1, tidalFloat, tidalSum, comm_, nullptr));
  }
  [[noreturn]] void abort() { std::exit(1); }

  // One-sided: `in` becomes the window the other rank's puts land in.
  void openWindow(void* in, size_t bytes) {
    check(tidalCommWindowRegister(comm_, in, bytes, &win_, TIDAL_WIN_COLL_SYMMETRIC));
  }
  void closeWindow() { check(tidalCommWindowDeregister(comm_, win_)); }
  void put(const void* buf, size_t bytes) {
    check(tidalPutSignal(buf, bytes, tidalUint8, other(), win_, 0, 0, 0, 0, comm_, nullptr));
  }
  void signal() { check(tidalSignal(other(), 0, 0, 0, comm_, nullptr)); }
  void waitSignals(int count) {
    tidalWaitSignalDesc_t d{count, other(), 0, 0};
    check(tidalWaitSignal(1, &d, comm_, nullptr));
  }

 private:
  int other() const { return 1 - rank_; }
  void check(tidalResult_t result) {
    if (result == tidalSuccess) return;
    std::fprintf(stderr, "rank %d: %s: %s\n", rank_, tidalGetErrorString(result),
                 tidalGetLastError(comm_));
    abort();
  }
  tidalComm_t comm_ = nullptr;
  tidalWindow_t win_ = nullptr;
  int rank_ = 0, size_ = 1;
};
#endif

using Bytes = tidal::compare::HostBuffer<unsigned char>;

unsigned char pattern(int rank, size_t i) {
  return static_cast<unsigned char>((i * 7 + static_cast<size_t>(rank) * 13 + 1) % 251);
}

struct Settings {
  tidal::perf::PerfOptions perf;
  int window = 64;
  size_t budgetMiB = 1024;
  bool oneSided = false;  // tidalPutSignal / tidalWaitSignal (Tidal only)
};

class PingPong {
 public:
  PingPong(Peer& peer, const Settings& s)
      : peer_(peer), s_(s), out_(s.perf.maxBytes), in_(s.perf.maxBytes) {
#ifndef PINGPONG_MPI
    if (s_.oneSided) peer_.openWindow(in_.data.get(), s_.perf.maxBytes);
#endif
  }
#ifndef PINGPONG_MPI
  ~PingPong() {
    if (s_.oneSided) peer_.closeWindow();
  }
#endif
  PingPong(const PingPong&) = delete;
  PingPong& operator=(const PingPong&) = delete;

  int run() {
    if (peer_.rank() == 0) {
      std::printf("# %s\n", tidal::perf::optionsBanner(s_.perf).c_str());
      std::printf("# Ping-pong between 2 ranks: %s\n",
                  s_.oneSided ? "tidalPutSignal into the peer's window / tidalWaitSignal, "
                                "window: that many puts, one wait; ack: tidalSignal"
                              : peer_.name().c_str());
      std::printf(
          "# latency = half the round trip; bandwidth = window of %d sends + 4-byte ack; about "
          "%zu MiB per measurement\n",
          s_.window, s_.budgetMiB);
      std::printf("# %10s  %9s  %12s  %9s  %15s  %6s\n", "size (B)", "lat iters", "latency (us)",
                  "bw iters", "bandwidth (MB/s)", "#wrong");
    }
    int64_t failed = 0;
    for (size_t bytes : tidal::perf::sweepSizes(s_.perf)) {
      const int64_t wrong = s_.perf.check ? check(bytes) : 0;
      failed += wrong != 0;
      const int latIters = iterations(2 * bytes, s_.perf.iters);
      const int bwIters =
          iterations(bytes * static_cast<size_t>(s_.window), std::max(1, s_.perf.iters / 10));
      const double latency = timeRoundTrips(bytes, latIters) / (2.0 * latIters) * 1e6;
      const double seconds = timeWindows(bytes, bwIters);
      const double bandwidth = static_cast<double>(bytes) * s_.window * bwIters / seconds / 1e6;
      if (peer_.rank() == 0) {
        std::printf("%12zu  %9d  %12.2f  %9d  %15.2f  %6s\n", bytes, latIters, latency, bwIters,
                    bandwidth, s_.perf.check ? std::to_string(wrong).c_str() : "N/A");
      }
    }
    if (peer_.rank() == 0)
      std::printf("# Wrong sizes : %lld %s\n", static_cast<long long>(failed),
                  failed ? "FAILED" : "OK");
    peer_.barrier();
    return failed ? 1 : 0;
  }

 private:
  // Iterations of a loop moving `bytesPerIteration`: `most` for small
  // messages, fewer once the loop would move more than the budget.
  int iterations(size_t bytesPerIteration, int most) const {
    const size_t budget = s_.budgetMiB << 20;
    const size_t fit = budget / std::max<size_t>(bytesPerIteration, 1);
    return static_cast<int>(std::clamp<size_t>(fit, 2, static_cast<size_t>(std::max(most, 2))));
  }
  int warmups(int iters) const {
    return std::max(1, static_cast<int>(static_cast<int64_t>(iters) * s_.perf.warmupIters /
                                        std::max(s_.perf.iters, 1)));
  }

  // One patterned message each way; rank 1 reports what it found wrong.
  int64_t check(size_t bytes) {
    unsigned char* out = out_.data.get();
    unsigned char* in = in_.data.get();
    const int me = peer_.rank();
    for (size_t i = 0; i < bytes; ++i) out[i] = pattern(me, i);
    std::memset(in, 0, bytes);
    int64_t wrong = 0;
    auto countWrong = [&] {
      for (size_t i = 0; i < bytes; ++i) wrong += in[i] != pattern(1 - me, i);
    };
    // One-sided: the data goes by put into the peer's window (in_); what
    // rank 1 found wrong comes back two-sided, so it cannot land on the data.
    const auto send = [&] { s_.oneSided ? put(out, bytes) : peer_.send(out, bytes); };
    const auto recv = [&] { s_.oneSided ? waitPuts(1) : peer_.recv(in, bytes); };
    if (me == 0) {
      send();
      recv();
      countWrong();
      int64_t theirs = 0;
      peer_.recv(&theirs, sizeof theirs);
      wrong += theirs;
    } else {
      recv();
      countWrong();
      send();
      peer_.send(&wrong, sizeof wrong);
    }
    return wrong;
  }

  // The one-sided calls, or nothing in the MPI build (which has no --one-sided).
  void put([[maybe_unused]] const void* buf, [[maybe_unused]] size_t bytes) {
#ifndef PINGPONG_MPI
    peer_.put(buf, bytes);
#endif
  }
  void waitPuts([[maybe_unused]] int count) {
#ifndef PINGPONG_MPI
    peer_.waitSignals(count);
#endif
  }
  void ack() {
#ifndef PINGPONG_MPI
    peer_.signal();
#endif
  }

  double timeRoundTrips(size_t bytes, int iters) {
    auto loop = [&](int n) {
      for (int i = 0; i < n; ++i) {
        if (s_.oneSided) {
          if (peer_.rank() == 0) {
            put(out_.data.get(), bytes);
            waitPuts(1);
          } else {
            waitPuts(1);
            put(out_.data.get(), bytes);
          }
        } else if (peer_.rank() == 0) {
          peer_.send(out_.data.get(), bytes);
          peer_.recv(in_.data.get(), bytes);
        } else {
          peer_.recv(in_.data.get(), bytes);
          peer_.send(out_.data.get(), bytes);
        }
      }
    };
    return timed(loop, iters);
  }

  double timeWindows(size_t bytes, int iters) {
    uint32_t ackBytes = 0;
    auto loop = [&](int n) {
      for (int i = 0; i < n; ++i) {
        if (s_.oneSided) {
          if (peer_.rank() == 0) {
            for (int w = 0; w < s_.window; ++w) put(out_.data.get(), bytes);
            waitPuts(1);  // rank 1's ack
          } else {
            waitPuts(s_.window);
            ack();
          }
        } else if (peer_.rank() == 0) {
          peer_.sendWindow(out_.data.get(), bytes, s_.window);
          peer_.recv(&ackBytes, sizeof ackBytes);
        } else {
          peer_.recvWindow(in_.data.get(), bytes, s_.window);
          peer_.send(&ackBytes, sizeof ackBytes);
        }
      }
    };
    return timed(loop, iters);
  }

  // Warm-up, barrier, then rank 0's time for `iters` rounds of `loop`.
  template <typename Loop>
  double timed(Loop& loop, int iters) {
    loop(warmups(iters));
    peer_.barrier();
    tidal::perf::Stopwatch watch;
    loop(iters);
    return watch.seconds();
  }

  Peer& peer_;
  const Settings& s_;
  Bytes out_, in_;
};

}  // namespace

int main(int argc, char** argv) {
  Peer peer(&argc, &argv);
  Settings s;
  s.perf.minBytes = 8;
  s.perf.maxBytes = 64 << 20;
  s.perf.stepFactor = 2;
  s.perf.iters = 10000;
  s.perf.warmupIters = 1000;
  CLI::App app{"Two-rank ping-pong latency and windowed bandwidth (osu_latency / osu_bw style)."};
  tidal::perf::addPerfOptions(app, s.perf);
  app.add_option("--window", s.window, "Sends in flight per bandwidth iteration")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--budget-mib", s.budgetMiB, "MiB moved per measurement before fewer iterations")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
#ifndef PINGPONG_MPI
  app.add_flag("--one-sided", s.oneSided,
               "Time tidalPutSignal / tidalWaitSignal instead of tidalSend / tidalRecv");
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    if (rc != 0) peer.abort();
    return 0;
  }
  if (const std::string error = tidal::perf::validateOptions(s.perf); !error.empty()) {
    if (peer.rank() == 0) std::fprintf(stderr, "%s\n", error.c_str());
    peer.abort();
  }
  if (peer.size() != 2) {
    if (peer.rank() == 0) std::fprintf(stderr, "run with exactly 2 ranks (got %d)\n", peer.size());
    peer.abort();
  }
  setlinebuf(stdout);
  try {
    PingPong bench(peer, s);
    return bench.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", peer.rank(), e.what());
    peer.abort();
  }
}
