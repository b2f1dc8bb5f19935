// The correctness suite of the one-sided calls (tidalPutSignal, tidalSignal,
// tidalWaitSignal) and the windows they write into: every rank puts into
// every rank's window (itself included) at counts 0, 1, 7, 1023 and 1M+3,
// alone and inside a group that also waits; puts and signals from one origin
// arrive in order; signal barriers repeated (wait-first, inside a group), so
// that waits count on from the earlier ones; windows of a different size on each rank, their bounds
// checked; windows registered out of step (a symmetric window of unequal
// sizes, one rank registering while the others deregister) refused on every
// rank; each
// argument checked. With --mixed (TIDAL_HOSTID splits the ranks into hosts
// of two) a rank on another host is refused, naming both hosts.
//
// Run like collective_worker: N processes under tidalrun, or N threads
// (--threads N). Exit status 0 only if every check passed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tidal/tidal.h"

namespace {

struct Checker {
  int rank;
  long passed = 0, failed = 0;
  void check(bool ok, const std::string& what) {
    if (ok) {
      ++passed;
      return;
    }
    ++failed;
    std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
  }
  bool call(tidalResult_t r, tidalComm_t comm, const std::string& what) {
    check(r == tidalSuccess, what + ": " + tidalGetErrorString(r) + ": " +
                                 (r == tidalSuccess ? "" : tidalGetLastError(comm)));
    return r == tidalSuccess;
  }
  // `r` is `want` and the communicator's last error contains `text`.
  void refused(tidalResult_t r, tidalResult_t want, tidalComm_t comm, const std::string& text,
               const std::string& what) {
    const std::string last = tidalGetLastError(comm);
    check(r == want && last.find(text) != std::string::npos,
          what + ": got " + tidalGetErrorString(r) + " '" + last + "', want '" + text + "'");
  }
};

// Element i of what `from` puts into `to`'s window in case `salt`.
float valueOf(int from, int to, size_t i, int salt) {
  return static_cast<float>((from * 131 + to * 17 + salt * 7 + static_cast<long>(i % 100003)) %
                            65521);
}

bool sameHost(int a, int b, bool mixed) { return !mixed || a / 2 == b / 2; }

std::vector<tidalWaitSignalDesc_t> fromEach(int n, int rank, bool mixed, int opCnt) {
  std::vector<tidalWaitSignalDesc_t> d;
  for (int p = 0; p < n; ++p) {
    if (sameHost(rank, p, mixed)) d.push_back({opCnt, p, 0, 0});
  }
  return d;
}

// Every rank puts `count` floats into slot `rank` of every (same-host)
// rank's window, then waits for one signal from each; the window must then
// hold each origin's values in its slot and the fill value elsewhere.
void allPairs(Checker& ck, tidalComm_t comm, int rank, int n, size_t count, bool grouped,
              bool mixed, int salt) {
  const std::string what =
      "all-pairs put of " + std::to_string(count) + (grouped ? " in a group" : " alone");
  std::vector<float> window(count * static_cast<size_t>(n) + 1, -1.0f);
  tidalWindow_t win = nullptr;
  // count 0 still needs a non-empty window: one spare element.
  if (!ck.call(tidalCommWindowRegister(comm, window.data(), window.size() * sizeof(float), &win,
                                       TIDAL_WIN_COLL_SYMMETRIC),
               comm, what + ": register")) {
    return;
  }
  void* user = nullptr;
  ck.call(tidalWinGetUserPtr(comm, win, &user), comm, what + ": WinGetUserPtr");
  ck.check(user == window.data(), what + ": WinGetUserPtr gives the registered buffer");
  std::vector<std::vector<float>> sends(static_cast<size_t>(n));
  if (grouped) tidalGroupStart();
  for (int k = 0; k < n; ++k) {
    const int peer = (rank + k) % n;  // staggered: not everyone at rank 0 first
    if (!sameHost(rank, peer, mixed)) continue;
    auto& s = sends[static_cast<size_t>(peer)];
    s.resize(count);
    for (size_t i = 0; i < count; ++i) s[i] = valueOf(rank, peer, i, salt);
    ck.call(
        tidalPutSignal(s.data(), count, tidalFloat32, peer, win,
                       static_cast<size_t>(rank) * count * sizeof(float), 0, 0, 0, comm, nullptr),
        comm, what + ": put to " + std::to_string(peer));
  }
  auto descs = fromEach(n, rank, mixed, 1);
  ck.call(tidalWaitSignal(static_cast<int>(descs.size()), descs.data(), comm, nullptr), comm,
          what + ": wait");
  if (grouped) ck.call(tidalGroupEnd(), comm, what + ": group end");
  size_t wrong = 0;
  std::string first;
  for (int from = 0; from < n; ++from) {
    for (size_t i = 0; i < count; ++i) {
      const float got = window[static_cast<size_t>(from) * count + i];
      const float want = sameHost(rank, from, mixed) ? valueOf(from, rank, i, salt) : -1.0f;
      if (got != want && wrong++ == 0) {
        first = "from rank " + std::to_string(from) + " element " + std::to_string(i) + ": " +
                std::to_string(got) + " instead of " + std::to_string(want);
      }
    }
  }
  ck.check(window.back() == -1.0f, what + ": the spare element past the slots is untouched");
  ck.check(wrong == 0, what + ": " + std::to_string(wrong) + " wrong elements, first " + first);
  // Every rank has waited for its puts: the window can go.
  ck.call(tidalCommWindowDeregister(comm, win), comm, what + ": deregister");
}

// Two puts to the same place and a signal, from each rank to the next on
// its host: after three signals the second put's value is there.
void ordering(Checker& ck, tidalComm_t comm, int rank, int n, bool mixed) {
  const int hostSize = mixed ? 2 : n;
  const int base = mixed ? rank / 2 * 2 : 0;
  const int size = std::min(hostSize, n - base);
  const int next = base + (rank - base + 1) % size;
  const int prev = base + (rank - base + size - 1) % size;
  int cell[2] = {-1, -1};
  tidalWindow_t win = nullptr;
  if (!ck.call(tidalCommWindowRegister(comm, cell, sizeof cell, &win, TIDAL_WIN_DEFAULT), comm,
               "ordering: register")) {
    return;
  }
  for (int round = 0; round < 20; ++round) {
    const int first[2] = {round * 10 + 1, rank};
    const int second[2] = {round * 10 + 2, rank};
    ck.call(tidalPutSignal(first, 2, tidalInt32, next, win, 0, 0, 0, 0, comm, nullptr), comm,
            "ordering: first put");
    ck.call(tidalPutSignal(second, 2, tidalInt32, next, win, 0, 0, 0, 0, comm, nullptr), comm,
            "ordering: second put");
    ck.call(tidalSignal(next, 0, 0, 0, comm, nullptr), comm, "ordering: signal");
    tidalWaitSignalDesc_t d{3, prev, 0, 0};
    ck.call(tidalWaitSignal(1, &d, comm, nullptr), comm, "ordering: wait");
    ck.check(cell[0] == round * 10 + 2 && cell[1] == prev,
             "ordering round " + std::to_string(round) + ": cell holds " + std::to_string(cell[0]) +
                 "," + std::to_string(cell[1]));
    // Nobody puts the next round before everyone has read this one: a
    // barrier written wait-first inside a group, which must not wait for
    // its own signals (the group keeps the wait for tidalGroupEnd).
    auto descs = fromEach(n, rank, mixed, 1);
    tidalGroupStart();
    ck.call(tidalWaitSignal(static_cast<int>(descs.size()), descs.data(), comm, nullptr), comm,
            "ordering: barrier wait");
    for (const auto& e : descs) tidalSignal(e.peer, 0, 0, 0, comm, nullptr);
    ck.call(tidalGroupEnd(), comm, "ordering: barrier group");
  }
  ck.call(tidalCommWindowDeregister(comm, win), comm, "ordering: deregister");
}

// Windows whose size differs by rank: rank r's part is (r + 1) * 64 bytes.
// Each rank fills every peer's part exactly, and one byte more is refused.
void unevenWindows(Checker& ck, tidalComm_t comm, int rank, int n, bool mixed) {
  std::vector<unsigned char> part(static_cast<size_t>(rank + 1) * 64, 0);
  tidalWindow_t win = nullptr;
  if (!ck.call(tidalCommWindowRegister(comm, part.data(), part.size(), &win, TIDAL_WIN_DEFAULT),
               comm, "uneven: register")) {
    return;
  }
  const int peer = (rank + 1) % n;
  if (sameHost(rank, peer, mixed)) {
    std::vector<unsigned char> data(static_cast<size_t>(peer + 1) * 64 + 1,
                                    static_cast<unsigned char>(rank + 1));
    ck.refused(
        tidalPutSignal(data.data(), data.size(), tidalUint8, peer, win, 0, 0, 0, 0, comm, nullptr),
        tidalInvalidArgument, comm,
        "past the end of rank " + std::to_string(peer) + "'s window (" +
            std::to_string(data.size() - 1) + " bytes)",
        "uneven: one byte past the peer's part");
    ck.refused(
        tidalPutSignal(data.data(), 1, tidalUint8, peer, win, data.size(), 0, 0, 0, comm, nullptr),
        tidalInvalidArgument, comm, "peerWinOffset " + std::to_string(data.size()),
        "uneven: offset past the peer's part");
    ck.call(tidalPutSignal(data.data(), data.size() - 1, tidalUint8, peer, win, 0, 0, 0, 0, comm,
                           nullptr),
            comm, "uneven: the peer's whole part");
  }
  const int prev = (rank + n - 1) % n;
  if (sameHost(rank, prev, mixed)) {
    tidalWaitSignalDesc_t d{1, prev, 0, 0};
    ck.call(tidalWaitSignal(1, &d, comm, nullptr), comm, "uneven: wait");
    size_t wrong = 0;
    for (unsigned char b : part) wrong += b != static_cast<unsigned char>(prev + 1);
    ck.check(wrong == 0, "uneven: " + std::to_string(wrong) + " wrong bytes in this rank's part");
  }
  ck.call(tidalCommWindowDeregister(comm, win), comm, "uneven: deregister");
}

// Arguments refused, each named; none of them breaks the communicator.
void badArguments(Checker& ck, tidalComm_t comm, int rank, int n) {
  float x[4] = {0, 0, 0, 0};
  tidalWindow_t win = nullptr;
  if (!ck.call(tidalCommWindowRegister(comm, x, sizeof x, &win, TIDAL_WIN_DEFAULT), comm,
               "errors: register")) {
    return;
  }
  void* handle = nullptr;
  ck.call(tidalCommRegister(comm, x, sizeof x, &handle), comm, "errors: buffer registration");
  const int peer = (rank + 1) % n;
  const auto put = [&](int p, tidalWindow_t w, int sig, int ctx, unsigned flags, void* stream) {
    return tidalPutSignal(x, 1, tidalFloat32, p, w, 0, sig, ctx, flags, comm, stream);
  };
  ck.refused(put(n, win, 0, 0, 0, nullptr), tidalInvalidArgument, comm,
             "tidalPutSignal: peer " + std::to_string(n) + " is out of range", "put: peer n");
  ck.refused(put(peer, nullptr, 0, 0, 0, nullptr), tidalInvalidArgument, comm, "peerWin is NULL",
             "put: NULL window");
  ck.refused(put(peer, static_cast<tidalWindow_t>(handle), 0, 0, 0, nullptr), tidalInvalidArgument,
             comm, "is not a window of this communicator", "put: a buffer registration as window");
  ck.refused(put(peer, win, 1, 0, 0, nullptr), tidalInvalidArgument, comm, "sigIdx 1",
             "put: sigIdx");
  ck.refused(put(peer, win, 0, 2, 0, nullptr), tidalInvalidArgument, comm, "ctx 2", "put: ctx");
  ck.refused(put(peer, win, 0, 0, 4, nullptr), tidalInvalidArgument, comm, "flags 0x4",
             "put: flags");
  ck.refused(put(peer, win, 0, 0, 0, &x), tidalInvalidUsage, comm, "pass NULL", "put: a stream");
  ck.refused(tidalPutSignal(nullptr, 1, tidalFloat32, peer, win, 0, 0, 0, 0, comm, nullptr),
             tidalInvalidArgument, comm, "localbuff is NULL", "put: NULL localbuff");
  ck.refused(tidalSignal(-1, 0, 0, 0, comm, nullptr), tidalInvalidArgument, comm,
             "tidalSignal: peer -1 is out of range", "signal: peer -1");
  tidalWaitSignalDesc_t d{1, peer, 0, 0};
  ck.refused(tidalWaitSignal(0, &d, comm, nullptr), tidalInvalidArgument, comm, "nDesc 0",
             "wait: nDesc 0");
  ck.refused(tidalWaitSignal(1, nullptr, comm, nullptr), tidalInvalidArgument, comm,
             "signalDescs is NULL", "wait: NULL descriptors");
  tidalWaitSignalDesc_t two[2] = {{1, peer, 0, 0}, {0, peer, 0, 0}};
  ck.refused(tidalWaitSignal(2, two, comm, nullptr), tidalInvalidArgument, comm,
             "signalDescs[1].opCnt 0 is not positive", "wait: opCnt 0");
  two[1] = {1, n + 3, 0, 0};
  ck.refused(tidalWaitSignal(2, two, comm, nullptr), tidalInvalidArgument, comm,
             "signalDescs[1].peer " + std::to_string(n + 3), "wait: peer out of range");
  two[1] = {1, peer, 0, 1};
  ck.refused(tidalWaitSignal(2, two, comm, nullptr), tidalInvalidArgument, comm,
             "signalDescs[1].ctx 1", "wait: ctx");
  void* user = &x;
  ck.refused(tidalWinGetUserPtr(comm, static_cast<tidalWindow_t>(handle), &user),
             tidalInvalidArgument, comm, "is not a window", "WinGetUserPtr: not a window");
  ck.check(user == nullptr, "WinGetUserPtr: NULL after a failure");
  ck.call(tidalCommDeregister(comm, handle), comm, "errors: deregister buffer");
  ck.call(tidalCommWindowDeregister(comm, win), comm, "errors: deregister window");
}

// A TIDAL_WIN_COLL_SYMMETRIC window whose size differs on rank 0: every rank
// is told, naming the sizes.
void asymmetricSymmetricWindow(Checker& ck, tidalComm_t comm, int rank, int n) {
  if (n < 2) return;
  std::vector<char> part(rank == 0 ? 96 : 64);
  tidalWindow_t win = nullptr;
  const tidalResult_t r =
      tidalCommWindowRegister(comm, part.data(), part.size(), &win, TIDAL_WIN_COLL_SYMMETRIC);
  ck.refused(r, tidalInvalidUsage, comm,
             rank == 0 ? "rank 1 registers 64 bytes and this rank 96"
                       : "rank 0 registers 96 bytes and this rank 64",
             "symmetric window of unequal sizes");
  ck.check(win == nullptr, "symmetric window of unequal sizes: win stays NULL");
}

// Rank 0 registers a second window while the others deregister the first:
// every rank is told both what it did and what the other did, nothing
// changes, and deregistering the first window together then works.
void outOfStep(Checker& ck, tidalComm_t comm, int rank, int n) {
  if (n < 2) return;
  char a[16] = {}, b[16] = {};
  tidalWindow_t first = nullptr, second = nullptr;
  if (!ck.call(tidalCommWindowRegister(comm, a, sizeof a, &first, 0), comm, "step: register")) {
    return;
  }
  if (rank == 0) {
    ck.refused(tidalCommWindowRegister(comm, b, sizeof b, &second, 0), tidalInvalidUsage, comm,
               "this rank registers its window #", "step: rank 0 registers");
    ck.check(second == nullptr, "step: no second window");
    ck.refused(tidalCommWindowRegister(comm, b, sizeof b, &second, 0), tidalInvalidUsage, comm,
               "and rank 1 deregisters its window #", "step: rank 0 hears rank 1");
  } else {
    ck.refused(tidalCommWindowDeregister(comm, first), tidalInvalidUsage, comm,
               "this rank deregisters its window #", "step: rank deregisters");
    ck.refused(tidalCommWindowDeregister(comm, first), tidalInvalidUsage, comm,
               "and rank 0 registers its window #", "step: rank hears rank 0");
  }
  ck.call(tidalCommWindowDeregister(comm, first), comm, "step: deregister together");
}

// --mixed: a peer on another host is refused by each call, naming both hosts.
void otherHost(Checker& ck, tidalComm_t comm, int rank, int n) {
  const int far = (rank + 2) % n;
  if (n < 3 || sameHost(rank, far, true)) return;
  char c[8] = {};
  tidalWindow_t win = nullptr;
  if (!ck.call(tidalCommWindowRegister(comm, c, sizeof c, &win, 0), comm, "far: register")) return;
  const std::string text = "rank " + std::to_string(far) + " is on host 'host" +
                           std::to_string(far / 2) + "' and this rank on 'host" +
                           std::to_string(rank / 2) + "'";
  ck.refused(tidalPutSignal(c, 1, tidalInt8, far, win, 0, 0, 0, 0, comm, nullptr),
             tidalInvalidUsage, comm, text, "far: put");
  ck.refused(tidalSignal(far, 0, 0, 0, comm, nullptr), tidalInvalidUsage, comm, text,
             "far: signal");
  tidalWaitSignalDesc_t d{1, far, 0, 0};
  ck.refused(tidalWaitSignal(1, &d, comm, nullptr), tidalInvalidUsage, comm, text, "far: wait");
  ck.call(tidalCommWindowDeregister(comm, win), comm, "far: deregister");
}

void runSuite(Checker& ck, tidalComm_t comm, int rank, int n, bool mixed) {
  int salt = 0;
  for (const size_t count :
       {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, (size_t{1} << 20) + 3}) {
    allPairs(ck, comm, rank, n, count, false, mixed, ++salt);
    allPairs(ck, comm, rank, n, count, true, mixed, ++salt);
  }
  ordering(ck, comm, rank, n, mixed);
  unevenWindows(ck, comm, rank, n, mixed);
  badArguments(ck, comm, rank, n);
  asymmetricSymmetricWindow(ck, comm, rank, n);
  outOfStep(ck, comm, rank, n);
  if (mixed) otherHost(ck, comm, rank, n);
  // Still in step after all of it.
  int one = 1, sum = 0;
  ck.call(tidalAllReduce(&one, &sum, 1, tidalInt32, tidalSum, comm, nullptr), comm,
          "AllReduce afterwards");
  ck.check(sum == n, "AllReduce afterwards: " + std::to_string(sum));
}

int report(const char* mode, const Checker& ck) {
  std::printf("%s rank %d: %ld passed, %ld failed\n", mode, ck.rank, ck.passed, ck.failed);
  return ck.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool mixed = false;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mixed") {
      mixed = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--mixed] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  if (threads == 0) {
    tidalComm_t comm = nullptr;
    if (tidalCommInitFromEnv(&comm) != tidalSuccess) {
      std::fprintf(stderr, "FAIL tidalCommInitFromEnv: %s\n", tidalGetLastError(nullptr));
      return 1;
    }
    int rank = 0, n = 0;
    tidalCommUserRank(comm, &rank);
    tidalCommCount(comm, &n);
    Checker ck{rank};
    runSuite(ck, comm, rank, n, mixed);
    tidalCommDestroy(comm);
    return report("process", ck);
  }
  std::vector<tidalComm_t> comms(static_cast<size_t>(threads));
  if (tidalCommInitAll(comms.data(), threads, nullptr) != tidalSuccess) {
    std::fprintf(stderr, "FAIL tidalCommInitAll: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  std::vector<Checker> checkers;
  for (int r = 0; r < threads; ++r) checkers.push_back({r});
  std::vector<std::thread> workers;
  for (int r = 0; r < threads; ++r) {
    workers.emplace_back([&, r] {
      runSuite(checkers[static_cast<size_t>(r)], comms[static_cast<size_t>(r)], r, threads, false);
    });
  }
  for (auto& t : workers) t.join();
  int status = 0;
  for (int r = 0; r < threads; ++r) {
    status |= report("thread", checkers[static_cast<size_t>(r)]);
    tidalCommDestroy(comms[static_cast<size_t>(r)]);
  }
  return status;
}
