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

const char* kTypeNames[] = {"int8",   "uint8", "int32", "uint32", "int64",
                            "uint64", "half",  "float", "double", "bfloat16"};
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };
const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce:
      return "AllReduce";
    case Coll::AllGather:
      return "AllGather";
    case Coll::ReduceScatter:
      return "ReduceScatter";
    case Coll::Broadcast:
      return "Broadcast";
    case Coll::Reduce:
      return "Reduce";
  }
  return "?";
}

struct Case {
  Coll coll;
  tidalDataType_t type;
  tidalRedOp_t op;
  size_t count;  // per-rank count for AllGather/ReduceScatter, total otherwise
  bool inPlace;
  int root;
};

// Runs one case on one rank and checks the result. Returns false on failure
// after printing what was wrong.
bool runCase(tidalComm_t comm, int rank, int n, const Case& c) {
  const size_t ts = sizeOf(c.type);
  const bool segmented = c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter;
  const size_t total = segmented ? c.count * static_cast<size_t>(n) : c.count;
  // Inputs: AllGather sends its own block; others send `total` elements.
  const size_t sendCount = c.coll == Coll::AllGather ? c.count : total;
  const size_t recvCount = c.coll == Coll::ReduceScatter ? c.count : total;
  std::vector<char> big(std::max(sendCount, total) * ts + 64);
  std::vector<char> sendv(sendCount * ts + 1), recvv(recvCount * ts + 1, 0x5a);

  const tidalRedOp_t inputOp =
      (c.coll == Coll::AllGather || c.coll == Coll::Broadcast) ? tidalSum : c.op;
  const size_t base = c.coll == Coll::AllGather ? static_cast<size_t>(rank) * c.count : 0;
  for (size_t i = 0; i < sendCount; ++i)
    storeValue(sendv.data(), i, c.type, inputValue(rank, base + i, inputOp, c.type));

  const void* sendbuff = sendv.data();
  void* recvbuff = recvv.data();
  if (c.inPlace) {
    // The documented in-place layouts, inside one buffer.
    std::fill(big.begin(), big.end(), 0);
    if (c.coll == Coll::AllGather) {
      std::memcpy(big.data() + static_cast<size_t>(rank) * c.count * ts, sendv.data(),
                  c.count * ts);
      recvbuff = big.data();
      sendbuff = big.data() + static_cast<size_t>(rank) * c.count * ts;
    } else if (c.coll == Coll::ReduceScatter) {
      std::memcpy(big.data(), sendv.data(), total * ts);
      sendbuff = big.data();
      recvbuff = big.data() + static_cast<size_t>(rank) * c.count * ts;
    } else {
      std::memcpy(big.data(), sendv.data(), total * ts);
      sendbuff = recvbuff = big.data();
    }
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
  auto describe = [&] {
    return std::string(collName(c.coll)) + " " + kTypeNames[c.type] + " " + kOpNames[c.op] +
           " count " + std::to_string(c.count) + (c.inPlace ? " in-place" : " out-of-place") +
           " root " + std::to_string(c.root) + " nranks " + std::to_string(n);
  };
  if (r != tidalSuccess) {
    std::fprintf(stderr, "rank %d: FAIL %s: %s: %s\n", rank, describe().c_str(),
                 tidalGetErrorString(r), tidalGetLastError(comm));
    return false;
  }
  if (c.coll == Coll::Reduce && rank != c.root) return true;  // only the root gets a result

  const char* got = static_cast<const char*>(recvbuff);
  std::vector<char> want(ts);
  size_t wrong = 0, firstWrong = 0;
  for (size_t i = 0; i < recvCount; ++i) {
    switch (c.coll) {
      case Coll::AllReduce:
      case Coll::Reduce:
        storeExpected(want.data(), i, c.type, c.op, n);
        break;
      case Coll::ReduceScatter:
        storeExpected(want.data(), static_cast<size_t>(rank) * c.count + i, c.type, c.op, n);
        break;
      case Coll::AllGather:
        storeValue(want.data(), 0, c.type,
                   inputValue(static_cast<int>(i / c.count), i, tidalSum, c.type));
        break;
      case Coll::Broadcast:
        storeValue(want.data(), 0, c.type, inputValue(c.root, i, tidalSum, c.type));
        break;
    }
    if (std::memcmp(got + i * ts, want.data(), ts) != 0) {
      if (wrong++ == 0) firstWrong = i;
    }
  }
  if (wrong) {
    std::fprintf(stderr, "rank %d: FAIL %s: %zu wrong elements, first at %zu\n", rank,
                 describe().c_str(), wrong, firstWrong);
    return false;
  }
  return true;
}

std::vector<Case> buildCases(int n, bool big, size_t bigCount) {
  std::vector<Case> cases;
  const size_t smallCounts[] = {0, 1, 7, 1023};
  int k = 0;
  for (size_t count : smallCounts) {
    for (int t = 0; t < tidalNumTypes; ++t) {
      const auto type = static_cast<tidalDataType_t>(t);
      for (bool inPlace : {false, true}) {
        for (int o = 0; o < tidalNumOps; ++o) {
          const auto op = static_cast<tidalRedOp_t>(o);
          cases.push_back({Coll::AllReduce, type, op, count, inPlace, 0});
          cases.push_back({Coll::ReduceScatter, type, op, count, inPlace, 0});
          cases.push_back({Coll::Reduce, type, op, count, inPlace, (k++) % n});
        }
        cases.push_back({Coll::AllGather, type, tidalSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, tidalSum, count, inPlace, (k++) % n});
      }
    }
  }
  if (big) {
    const size_t count = bigCount;
    for (bool inPlace : {false, true}) {
      for (int t = 0; t < tidalNumTypes; ++t) {
        cases.push_back(
            {Coll::AllReduce, static_cast<tidalDataType_t>(t), tidalSum, count, inPlace, 0});
      }
      for (int o = 0; o < tidalNumOps; ++o) {
        cases.push_back(
            {Coll::AllReduce, tidalFloat32, static_cast<tidalRedOp_t>(o), count, inPlace, 0});
      }
      for (auto type : {tidalFloat32, tidalBfloat16, tidalInt8}) {
        cases.push_back(
            {Coll::ReduceScatter, type, tidalSum, count / static_cast<size_t>(n) + 1, inPlace, 0});
        cases.push_back(
            {Coll::AllGather, type, tidalSum, count / static_cast<size_t>(n) + 1, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, tidalSum, count, inPlace, n - 1});
        cases.push_back({Coll::Reduce, type, tidalAvg, count, inPlace, n / 2});
      }
    }
  }
  return cases;
}

// One rank's whole suite over two communicators used alternately.
Tally runSuite(tidalComm_t comms[2], int rank, int n, const Options& opt) {
  Tally tally;
  const auto cases = buildCases(n, opt.big, opt.bigCount);
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
