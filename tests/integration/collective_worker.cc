// The correctness suite: every collective x type x op x count, in place and
// out of place, alternating between two communicators, checked bit-exactly.
//
// Written once and run many ways (see CMakeLists.txt): as N processes under
// tidalrun, as N threads of one process (--threads N, tidalCommInitAll), and
// with TIDAL_NET selecting the transport, so each new transport runs the same
// suite. Exit status 0 only if every check passed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collective_cases.h"
#include "expected_values.h"
#include "tidal/tidal.h"

namespace {

using namespace tidal::test;

struct Options {
  int threads = 0;   // 0: one rank per process, from the environment
  bool big = false;  // include the 1M+3 element cases
  // Element count of the --big cases: smaller for slow transports (the
  // Soft-RoCE VM), with a remainder so chunks and segments stay uneven.
  size_t bigCount = (1u << 20) + 3;
};

struct Tally {
  long passed = 0;
  long failed = 0;
};

// Runs one case on one rank and checks the result. Returns false on failure
// after printing what was wrong.
bool runCase(tidalComm_t comm, int rank, int n, const Case& c) {
  const size_t ts = sizeOf(c.type);
  const CaseLayout l = layoutOf(c, rank, n);
  // One spare byte past each buffer, and a receive buffer that starts out
  // garbage: a collective that writes too little or too much shows.
  std::vector<char> sendv(l.sendCount * ts + 1), recvv(l.recvCount * ts + 1, 0x5a);
  fillInput(c, rank, n, sendv.data());

  const void* sendbuff = sendv.data();
  void* recvbuff = recvv.data();
  std::vector<char> inPlace;
  if (c.inPlace) {
    // The documented in-place layouts, inside one buffer.
    inPlace.assign(l.inPlaceElements * ts + 64, 0);
    std::memcpy(inPlace.data() + l.inPlaceSendOffset * ts, sendv.data(), l.sendCount * ts);
    sendbuff = inPlace.data() + l.inPlaceSendOffset * ts;
    recvbuff = inPlace.data() + l.inPlaceRecvOffset * ts;
  }
  tidalResult_t r = tidalSuccess;
  switch (c.coll) {
    case Coll::AllReduce:
      r = tidalAllReduce(sendbuff, recvbuff, c.count, c.type, c.op, comm, nullptr);
      break;
    case Coll::AllGather:
      r = tidalAllGather(sendbuff, recvbuff, c.count, c.type, comm, nullptr);
      break;
    case Coll::ReduceScatter:
      r = tidalReduceScatter(sendbuff, recvbuff, c.count, c.type, c.op, comm, nullptr);
      break;
    case Coll::Broadcast:
      r = tidalBroadcast(sendbuff, recvbuff, c.count, c.type, c.root, comm, nullptr);
      break;
    case Coll::Reduce:
      r = tidalReduce(sendbuff, recvbuff, c.count, c.type, c.op, c.root, comm, nullptr);
      break;
  }
  if (r != tidalSuccess) {
    std::fprintf(stderr, "rank %d: FAIL %s: %s: %s\n", rank, describe(c, n).c_str(),
                 tidalGetErrorString(r), tidalGetLastError(comm));
    return false;
  }
  size_t firstWrong = 0;
  if (const size_t wrong = countWrongOutput(c, rank, n, recvbuff, &firstWrong)) {
    std::fprintf(stderr, "rank %d: FAIL %s: %zu wrong elements, first at %zu\n", rank,
                 describe(c, n).c_str(), wrong, firstWrong);
    return false;
  }
  return true;
}

// One rank's whole suite over two communicators used alternately.
Tally runSuite(tidalComm_t comms[2], int rank, int n, const Options& opt) {
  Tally tally;
  const auto cases = standardCases(n, opt.big ? opt.bigCount : 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    if (runCase(comms[i % 2], rank, n, cases[i])) {
      ++tally.passed;
    } else {
      ++tally.failed;
      if (tally.failed > 20) break;  // the log already tells the story
    }
  }
  // Barrier on both communicators: every rank must agree it is done.
  for (int c = 0; c < 2; ++c) {
    if (tidalBarrier(comms[c], nullptr) != tidalSuccess) {
      std::fprintf(stderr, "rank %d: FAIL Barrier: %s\n", rank, tidalGetLastError(comms[c]));
      ++tally.failed;
    } else {
      ++tally.passed;
    }
  }
  return tally;
}

int report(const char* mode, int rank, const Tally& t) {
  std::printf("%s rank %d: %ld passed, %ld failed\n", mode, rank, t.passed, t.failed);
  return t.failed == 0 ? 0 : 1;
}

// Ranks as processes: the first communicator comes from the launcher's
// environment, the second from a unique id that rank 0 broadcasts over the first.
int runAsProcess(const Options& opt) {
  tidalComm_t comms[2] = {nullptr, nullptr};
  if (tidalCommInitFromEnv(&comms[0]) != tidalSuccess) {
    std::fprintf(stderr, "FAIL tidalCommInitFromEnv: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  tidalCommUserRank(comms[0], &rank);
  tidalCommCount(comms[0], &n);
  tidalUniqueId id{};
  if (rank == 0 && tidalGetUniqueId(&id) != tidalSuccess) {
    std::fprintf(stderr, "FAIL tidalGetUniqueId: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  if (tidalBroadcast(&id, &id, sizeof id, tidalUint8, 0, comms[0], nullptr) != tidalSuccess ||
      tidalCommInitRank(&comms[1], n, id, rank) != tidalSuccess) {
    std::fprintf(stderr, "rank %d: FAIL second communicator: %s\n", rank,
                 tidalGetLastError(nullptr));
    return 1;
  }
  const Tally t = runSuite(comms, rank, n, opt);
  for (auto c : comms) tidalCommDestroy(c);
  return report("process", rank, t);
}

// Ranks as threads of this process (tidalCommInitAll).
int runAsThreads(const Options& opt) {
  const int n = opt.threads;
  std::vector<tidalComm_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  if (tidalCommInitAll(a.data(), n, nullptr) != tidalSuccess ||
      tidalCommInitAll(b.data(), n, nullptr) != tidalSuccess) {
    std::fprintf(stderr, "FAIL tidalCommInitAll: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  std::vector<Tally> tallies(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      tidalComm_t pair[2] = {a[r], b[r]};
      tallies[r] = runSuite(pair, r, n, opt);
    });
  }
  for (auto& t : threads) t.join();
  int status = 0;
  for (int r = 0; r < n; ++r) {
    status |= report("thread", r, tallies[r]);
    tidalCommDestroy(a[r]);
    tidalCommDestroy(b[r]);
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--big") {
      opt.big = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      opt.threads = std::atoi(argv[++i]);
    } else if (arg == "--big-count" && i + 1 < argc) {
      opt.big = true;
      opt.bigCount = std::strtoull(argv[++i], nullptr, 10);
      if (opt.bigCount < 16) {
        std::fprintf(stderr, "%s: --big-count must be at least 16\n", argv[0]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--big] [--big-count N] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  return opt.threads > 0 ? runAsThreads(opt) : runAsProcess(opt);
}
