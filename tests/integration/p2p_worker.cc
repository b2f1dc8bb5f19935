// The correctness suite of the exchanges that move data without reducing it:
// AlltoAll, AllToAllv (zero and uneven counts), Gather, Scatter, Bcast,
// Send/Recv patterns in groups (ring shift both ways, every rank to every
// rank including itself, blocking pairs, a message shorter than its receive),
// a group spanning two communicators with a collective inside, split
// communicators of odd sizes used alternately with their parent, and the
// truncation error. Every byte is a function of (sender, receiver, index), so
// a misplaced, missing or extra byte shows; buffers carry guard bytes.
//
// Run like collective_worker: N processes under tidalrun or mpirun, or N
// threads (--threads N); TIDAL_NET picks the transport. Exit status 0 only if
// every check passed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "expected_values.h"
#include "tidal/tidal.h"

namespace {

using tidal::test::sizeOf;

constexpr unsigned char kGuard = 0x5a;

// The byte at `index` of what `from` sends to `to` in case `salt`.
unsigned char byteOf(int from, int to, size_t index, int salt) {
  return static_cast<unsigned char>((from * 31 + to * 17 + salt * 7 + index * 13 + index / 251) %
                                    251);
}

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
    if (r == tidalSuccess) return true;
    check(false, what + ": " + tidalGetErrorString(r) + ": " + tidalGetLastError(comm));
    return false;
  }
};

// Checks `bytes` bytes at p against byteOf(from, to, first + i, salt).
bool matches(const unsigned char* p, size_t bytes, int from, int to, size_t first, int salt) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != byteOf(from, to, first + i, salt)) return false;
  return true;
}

bool guarded(const unsigned char* p, size_t bytes) {
  return std::all_of(p, p + bytes, [](unsigned char b) { return b == kGuard; });
}

std::string name(const char* what, tidalDataType_t t, size_t count, int n, const char* extra = "") {
  return std::string(what) + " type " + std::to_string(t) + " count " + std::to_string(count) +
         " nranks " + std::to_string(n) + extra;
}

void allToAll(Checker& ck, tidalComm_t comm, int rank, int n, tidalDataType_t t, size_t count,
              bool inPlace, int salt) {
  const size_t block = count * sizeOf(t), total = block * static_cast<size_t>(n);
  std::vector<unsigned char> send(total + 1, kGuard), recv(total + 1, kGuard);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < block; ++i)
      send[static_cast<size_t>(p) * block + i] = byteOf(rank, p, i, salt);
  unsigned char* out = inPlace ? send.data() : recv.data();
  const auto what = name("AlltoAll", t, count, n, inPlace ? " in-place" : "");
  if (!ck.call(tidalAlltoAll(send.data(), out, count, t, comm, nullptr), comm, what)) return;
  bool ok = out[total] == kGuard;
  for (int q = 0; q < n && ok; ++q)
    ok = matches(out + static_cast<size_t>(q) * block, block, q, rank, 0, salt);
  ck.check(ok, what);
}

void allToAllv(Checker& ck, tidalComm_t comm, int rank, int n, tidalDataType_t t, size_t base,
               int salt) {
  // Uneven, with zeros: what p sends q is base * ((p + 2q) % 3) elements;
  // blocks are placed with a gap of 3 elements and in reverse rank order.
  const auto countOf = [base](int from, int to) {
    return base * static_cast<size_t>((from + 2 * to) % 3);
  };
  const auto un = static_cast<size_t>(n);
  const size_t ts = sizeOf(t);
  std::vector<size_t> sc(un), sd(un), rc(un), rd(un);
  size_t soff = 0, roff = 0;
  for (int k = n - 1; k >= 0; --k) {
    const auto p = static_cast<size_t>(k);
    sc[p] = countOf(rank, k);
    sd[p] = soff;
    soff += sc[p] + 3;
    rc[p] = countOf(k, rank);
    rd[p] = roff;
    roff += rc[p] + 3;
  }
  std::vector<unsigned char> send(soff * ts, kGuard), recv(roff * ts, kGuard);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < sc[static_cast<size_t>(p)] * ts; ++i)
      send[sd[static_cast<size_t>(p)] * ts + i] = byteOf(rank, p, i, salt);
  const auto what = name("AllToAllv", t, base, n);
  if (!ck.call(tidalAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                              t, comm, nullptr),
               comm, what))
    return;
  bool ok = true;
  for (int q = 0; q < n && ok; ++q) {
    const auto u = static_cast<size_t>(q);
    ok = matches(recv.data() + rd[u] * ts, rc[u] * ts, q, rank, 0, salt) &&
         guarded(recv.data() + (rd[u] + rc[u]) * ts, 3 * ts);
  }
  ck.check(ok, what);
}

void gatherScatter(Checker& ck, tidalComm_t comm, int rank, int n, tidalDataType_t t, size_t count,
                   int root, bool inPlace, int salt) {
  const size_t block = count * sizeOf(t), total = block * static_cast<size_t>(n);
  const size_t mine = static_cast<size_t>(rank) * block;
  {  // Gather: rank r's block lands at root's recvbuff + r * block.
    std::vector<unsigned char> all(total + 1, kGuard), own(block + 1, kGuard);
    for (size_t i = 0; i < block; ++i) own[i] = byteOf(rank, root, i, salt);
    const void* sendbuff = own.data();
    if (inPlace && rank == root) {
      std::memcpy(all.data() + mine, own.data(), block);
      sendbuff = all.data() + mine;
    }
    const auto what = name("Gather", t, count, n, inPlace ? " in-place" : "");
    if (ck.call(tidalGather(sendbuff, all.data(), count, t, root, comm, nullptr), comm, what)) {
      bool ok = all[total] == kGuard;
      if (rank == root) {
        for (int q = 0; q < n && ok; ++q)
          ok = matches(all.data() + static_cast<size_t>(q) * block, block, q, root, 0, salt);
      } else {
        ok = guarded(all.data(), total);  // recvbuff is not the non-roots' to write
      }
      ck.check(ok, what);
    }
  }
  {  // Scatter: root's block r lands at rank r's recvbuff.
    std::vector<unsigned char> all(total + 1, kGuard), own(block + 1, kGuard);
    if (rank == root) {
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < block; ++i)
          all[static_cast<size_t>(p) * block + i] = byteOf(root, p, i, salt + 1);
    }
    void* recvbuff = inPlace && rank == root ? all.data() + mine : own.data();
    const auto what = name("Scatter", t, count, n, inPlace ? " in-place" : "");
    if (ck.call(tidalScatter(all.data(), recvbuff, count, t, root, comm, nullptr), comm, what)) {
      const auto* got = static_cast<const unsigned char*>(recvbuff);
      // In place at the root, the byte after its block is the next rank's block.
      const bool guardAfter = !(inPlace && rank == root);
      ck.check(
          matches(got, block, root, rank, 0, salt + 1) && (!guardAfter || got[block] == kGuard),
          what);
    }
  }
}

// Send/Recv of `count` elements per message in the patterns of the issue.
void pointToPoint(Checker& ck, tidalComm_t comm, int rank, int n, tidalDataType_t t, size_t count,
                  int salt) {
  const size_t bytes = count * sizeOf(t);
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  {  // Ring shift both ways in one group.
    std::vector<unsigned char> toRight(bytes), toLeft(bytes), fromLeft(bytes + 1, kGuard),
        fromRight(bytes + 1, kGuard);
    for (size_t i = 0; i < bytes; ++i) {
      toRight[i] = byteOf(rank, right, i, salt);
      toLeft[i] = byteOf(rank, left, i, salt + 1);
    }
    tidalGroupStart();
    tidalSend(toRight.data(), count, t, right, comm, nullptr);
    tidalRecv(fromLeft.data(), count, t, left, comm, nullptr);
    tidalRecv(fromRight.data(), count, t, right, comm, nullptr);
    tidalSend(toLeft.data(), count, t, left, comm, nullptr);
    const auto what = name("Send/Recv ring shift", t, count, n);
    if (ck.call(tidalGroupEnd(), comm, what)) {
      ck.check(matches(fromLeft.data(), bytes, left, rank, 0, salt) && fromLeft[bytes] == kGuard &&
                   matches(fromRight.data(), bytes, right, rank, 0, salt + 1) &&
                   fromRight[bytes] == kGuard,
               what);
    }
  }
  {  // Every rank to every rank, itself included, in one group.
    const auto un = static_cast<size_t>(n);
    std::vector<std::vector<unsigned char>> out(un), in(un);
    tidalGroupStart();
    for (int p = 0; p < n; ++p) {
      auto& o = out[static_cast<size_t>(p)];
      auto& i = in[static_cast<size_t>(p)];
      o.resize(bytes);
      i.assign(bytes + 1, kGuard);
      for (size_t k = 0; k < bytes; ++k) o[k] = byteOf(rank, p, k, salt + 2);
      // Receives posted before sends on odd ranks, after on even ones.
      if (rank % 2) tidalRecv(i.data(), count, t, p, comm, nullptr);
      tidalSend(o.data(), count, t, p, comm, nullptr);
      if (rank % 2 == 0) tidalRecv(i.data(), count, t, p, comm, nullptr);
    }
    const auto what = name("Send/Recv all pairs", t, count, n);
    if (ck.call(tidalGroupEnd(), comm, what)) {
      bool ok = true;
      for (int q = 0; q < n && ok; ++q) {
        const auto& i = in[static_cast<size_t>(q)];
        ok = matches(i.data(), bytes, q, rank, 0, salt + 2) && i[bytes] == kGuard;
      }
      ck.check(ok, what);
    }
  }
  if (n >= 2) {  // Blocking pairs outside a group: even ranks send first.
    const int partner = rank % 2 ? rank - 1 : rank + 1;
    if (partner < n) {
      std::vector<unsigned char> o(bytes), i(bytes + 1, kGuard);
      for (size_t k = 0; k < bytes; ++k) o[k] = byteOf(rank, partner, k, salt + 3);
      const auto what = name("blocking Send then Recv", t, count, n);
      bool ok;
      if (rank % 2 == 0) {
        ok = ck.call(tidalSend(o.data(), count, t, partner, comm, nullptr), comm, what) &&
             ck.call(tidalRecv(i.data(), count, t, partner, comm, nullptr), comm, what);
      } else {
        ok = ck.call(tidalRecv(i.data(), count, t, partner, comm, nullptr), comm, what) &&
             ck.call(tidalSend(o.data(), count, t, partner, comm, nullptr), comm, what);
      }
      if (ok)
        ck.check(matches(i.data(), bytes, partner, rank, 0, salt + 3) && i[bytes] == kGuard, what);
    }
  }
  {  // A message shorter than its receive: received as it is, the rest untouched.
    const size_t roomCount = count + 5, room = roomCount * sizeOf(t);
    std::vector<unsigned char> o(bytes), i(room + 1, kGuard);
    for (size_t k = 0; k < bytes; ++k) o[k] = byteOf(rank, right, k, salt + 4);
    tidalGroupStart();
    tidalSend(o.data(), count, t, right, comm, nullptr);
    tidalRecv(i.data(), roomCount, t, left, comm, nullptr);
    const auto what = name("Send shorter than its Recv", t, count, n);
    if (ck.call(tidalGroupEnd(), comm, what))
      ck.check(matches(i.data(), bytes, left, rank, 0, salt + 4) &&
                   guarded(i.data() + bytes, room - bytes + 1),
               what);
  }
}

// A group over two communicators: a ring one way on `a`, the other way on
// `b`, and an AllReduce on `b` inside the same group.
void twoCommGroup(Checker& ck, tidalComm_t a, tidalComm_t b, int rank, int n, int salt) {
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  const size_t bytes = 100000;
  std::vector<unsigned char> oa(bytes), ob(bytes), ia(bytes + 1, kGuard), ib(bytes + 1, kGuard);
  for (size_t k = 0; k < bytes; ++k) {
    oa[k] = byteOf(rank, right, k, salt);
    ob[k] = byteOf(rank, left, k, salt + 1);
  }
  int32_t value = rank + 1, sum = 0;
  tidalGroupStart();
  tidalSend(oa.data(), bytes, tidalUint8, right, a, nullptr);
  tidalRecv(ib.data(), bytes, tidalUint8, right, b, nullptr);
  tidalAllReduce(&value, &sum, 1, tidalInt32, tidalSum, b, nullptr);
  tidalRecv(ia.data(), bytes, tidalUint8, left, a, nullptr);
  tidalSend(ob.data(), bytes, tidalUint8, left, b, nullptr);
  const auto what = "group over two communicators nranks " + std::to_string(n);
  if (!ck.call(tidalGroupEnd(), a, what)) return;
  ck.check(matches(ia.data(), bytes, left, rank, 0, salt) && ia[bytes] == kGuard &&
               matches(ib.data(), bytes, right, rank, 0, salt + 1) && ib[bytes] == kGuard &&
               sum == n * (n + 1) / 2,
           what);
}

// Split into communicators of odd sizes (color rank % 3, reversed by key; the
// last rank takes part without a color when n > 2), used alternately with
// the parent.
void split(Checker& ck, tidalComm_t parent, int rank, int n, int salt) {
  const int color = (n > 2 && rank == n - 1) ? TIDAL_SPLIT_NOCOLOR : rank % 3;
  tidalComm_t sub = nullptr;
  const auto what = "CommSplit nranks " + std::to_string(n);
  if (!ck.call(tidalCommSplit(parent, color, -rank, &sub, nullptr), parent, what)) return;
  if (color == TIDAL_SPLIT_NOCOLOR) {
    ck.check(sub == nullptr, what + ": NOCOLOR gives NULL");
    // The parent still works while the others use their split communicators.
    for (int round = 0; round < 2; ++round)
      allToAll(ck, parent, rank, n, tidalInt32, 3, false, salt + 20 + round);
    return;
  }
  // Members: ranks of my color except a NOCOLOR last rank, in decreasing rank order.
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r)
    if (r % 3 == color && !(n > 2 && r == n - 1)) members.push_back(r);
  int subRank = -1, subSize = -1;
  tidalCommUserRank(sub, &subRank);
  tidalCommCount(sub, &subSize);
  const int expectRank =
      static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  ck.check(subSize == static_cast<int>(members.size()) && subRank == expectRank,
           what + ": rank " + std::to_string(subRank) + " of " + std::to_string(subSize));
  for (int round = 0; round < 2; ++round) {
    int64_t v = rank, sum = 0;
    if (ck.call(tidalAllReduce(&v, &sum, 1, tidalInt64, tidalSum, sub, nullptr), sub, what)) {
      int64_t want = 0;
      for (int m : members) want += m;
      ck.check(sum == want, what + ": AllReduce on the split communicator");
    }
    allToAll(ck, sub, subRank, subSize, tidalFloat32, 5, round == 1, salt + round);
    pointToPoint(ck, sub, subRank, subSize, tidalUint8, 33, salt + 10 + round);
    allToAll(ck, parent, rank, n, tidalInt32, 3, false, salt + 20 + round);
  }
  tidalCommDestroy(sub);
}

// Rank 1 receives fewer elements than rank 0 sends: rank 1 must fail naming
// both sizes. Runs on a communicator of its own (the failure breaks it).
// Rank 0's Send may succeed (the bytes left before rank 1 broke off) or
// fail. With 2 ranks, if it fails, it is told rank 1's finding, and long
// before TIDAL_TIMEOUT: over libfabric a send whose receiver closed its
// endpoint stays pending, and rank 0, rank 1's successor on the bootstrap
// ring, learns from rank 1's notice instead. With more ranks the notice goes
// to rank 2, which is in no call and passes nothing on, so rank 0 may fail
// only at its timeout.
void truncation(Checker& ck, tidalComm_t comm, int rank, int n) {
  std::vector<int32_t> data(10, 7);
  if (rank == 0) {
    const auto start = std::chrono::steady_clock::now();
    const tidalResult_t r = tidalSend(data.data(), 10, tidalInt32, 1, comm, nullptr);
    if (r == tidalSuccess || n != 2) return;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const char* timeout = std::getenv("TIDAL_TIMEOUT");
    const double limit = (timeout ? std::atof(timeout) : 300.0) / 2;
    const std::string text = tidalGetLastError(comm);
    ck.check(text.find("rank 1 found that the ranks' calls disagree") != std::string::npos &&
                 waited < limit,
             "the truncating Recv's sender is told why, in " + std::to_string(waited) +
                 " s (TIDAL_TIMEOUT/2 = " + std::to_string(limit) + " s): " + text);
    return;
  }
  if (rank != 1) return;
  const tidalResult_t r = tidalRecv(data.data(), 5, tidalInt32, 0, comm, nullptr);
  const std::string text = tidalGetLastError(comm);
  ck.check(r == tidalInvalidUsage &&
               text.find("receive of 20 bytes from rank 0") != std::string::npos &&
               text.find("send of 40 bytes") != std::string::npos,
           "truncated Recv reports both sizes (got " + std::string(tidalGetErrorString(r)) + ": " +
               text + ")");
}

// A Send that succeeded is received even when its sender destroys the
// communicator at once, before the receiver has posted the Recv. Rank 0
// receives from rank 2 first (which sends late), so rank 1's small message
// reaches rank 0's provider while rank 0 waits, unmatched: libfabric 1.17's
// net provider keeps it only while rank 1's endpoint is open
// (comm/close_when_all_done.h). Runs on a communicator of its own, since
// rank 1 destroys it early.
void senderLeaves(Checker& ck, tidalComm_t parent, int rank, int n, int salt) {
  if (n < 3) return;
  tidalComm_t sub = nullptr;
  const std::string what =
      "a Send whose sender destroyed the communicator at once, nranks " + std::to_string(n);
  if (!ck.call(tidalCommSplit(parent, 0, rank, &sub, nullptr), parent, what + ": split")) return;
  const size_t bytes = 48;
  std::vector<unsigned char> buf(bytes + 1, kGuard);
  if (rank == 1 || rank == 2) {
    for (size_t k = 0; k < bytes; ++k) buf[k] = byteOf(rank, 0, k, salt);
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ck.call(tidalSend(buf.data(), bytes, tidalUint8, 0, sub, nullptr), sub, what + ": Send");
  } else if (rank == 0) {
    for (const int from : {2, 1}) {
      std::fill(buf.begin(), buf.end(), kGuard);
      if (ck.call(tidalRecv(buf.data(), bytes, tidalUint8, from, sub, nullptr), sub,
                  what + ": Recv from rank " + std::to_string(from))) {
        ck.check(matches(buf.data(), bytes, from, 0, 0, salt) && buf[bytes] == kGuard,
                 what + ": data from rank " + std::to_string(from));
      }
    }
  }
  tidalCommDestroy(sub);
}

void runSuite(Checker& ck, tidalComm_t comms[3], int rank, int n, bool big) {
  int salt = 0;
  std::vector<size_t> counts{0, 1, 7, 1023};
  for (size_t count : counts) {
    for (int ti = 0; ti < tidalNumTypes; ++ti) {
      const auto t = static_cast<tidalDataType_t>(ti);
      tidalComm_t comm = comms[(salt / 4) % 2];
      allToAll(ck, comm, rank, n, t, count, (ti % 2) == 1, ++salt);
      allToAllv(ck, comm, rank, n, t, count, ++salt);
      gatherScatter(ck, comm, rank, n, t, count, (ti + static_cast<int>(count)) % n, (ti % 2) == 0,
                    ++salt);
      pointToPoint(ck, comm, rank, n, t, count, salt += 10);
    }
  }
  if (big) {
    const size_t bigCount = (1u << 20) + 3;
    for (auto t : {tidalFloat32, tidalInt8}) {
      allToAll(ck, comms[0], rank, n, t, bigCount / static_cast<size_t>(n) + 1, false, ++salt);
      allToAllv(ck, comms[1], rank, n, t, bigCount / static_cast<size_t>(n) + 1, ++salt);
      gatherScatter(ck, comms[0], rank, n, t, bigCount / static_cast<size_t>(n) + 1, n - 1, false,
                    ++salt);
      pointToPoint(ck, comms[1], rank, n, t, bigCount, salt += 10);
    }
  }
  {  // Bcast, the in-place legacy form.
    std::vector<unsigned char> b(4097, kGuard);
    const int root = n - 1;
    if (rank == root)
      for (size_t i = 0; i < 4096; ++i) b[i] = byteOf(root, 0, i, salt);
    if (ck.call(tidalBcast(b.data(), 1024, tidalFloat32, root, comms[0], nullptr), comms[0],
                "Bcast"))
      ck.check(matches(b.data(), 4096, root, 0, 0, salt) && b[4096] == kGuard, "Bcast");
  }
  if (n >= 2) twoCommGroup(ck, comms[0], comms[1], rank, n, ++salt);
  split(ck, comms[1], rank, n, salt += 10);
  senderLeaves(ck, comms[1], rank, n, salt += 10);
  if (n >= 2) truncation(ck, comms[2], rank, n);
}

int report(const char* mode, const Checker& ck) {
  std::printf("%s rank %d: %ld passed, %ld failed\n", mode, ck.rank, ck.passed, ck.failed);
  return ck.failed == 0 ? 0 : 1;
}

int runAsProcess(bool big) {
  tidalComm_t comms[3] = {nullptr, nullptr, nullptr};
  if (tidalCommInitFromEnv(&comms[0]) != tidalSuccess) {
    std::fprintf(stderr, "FAIL tidalCommInitFromEnv: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  tidalCommUserRank(comms[0], &rank);
  tidalCommCount(comms[0], &n);
  for (int c = 1; c < 3; ++c) {
    tidalUniqueId id{};
    if (rank == 0) tidalGetUniqueId(&id);
    if (tidalBcast(&id, sizeof id, tidalUint8, 0, comms[0], nullptr) != tidalSuccess ||
        tidalCommInitRank(&comms[c], n, id, rank) != tidalSuccess) {
      std::fprintf(stderr, "rank %d: FAIL communicator %d: %s\n", rank, c,
                   tidalGetLastError(nullptr));
      return 1;
    }
  }
  Checker ck{rank};
  runSuite(ck, comms, rank, n, big);
  for (auto c : comms) tidalCommDestroy(c);
  return report("process", ck);
}

int runAsThreads(int n, bool big) {
  std::vector<tidalComm_t> a(static_cast<size_t>(n)), b(a), c(a);
  for (auto* v : {&a, &b, &c}) {
    if (tidalCommInitAll(v->data(), n, nullptr) != tidalSuccess) {
      std::fprintf(stderr, "FAIL tidalCommInitAll: %s\n", tidalGetLastError(nullptr));
      return 1;
    }
  }
  std::vector<Checker> checkers;
  for (int r = 0; r < n; ++r) checkers.push_back({r});
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const auto u = static_cast<size_t>(r);
      tidalComm_t mine[3] = {a[u], b[u], c[u]};
      runSuite(checkers[u], mine, r, n, big);
    });
  }
  for (auto& t : threads) t.join();
  int status = 0;
  for (int r = 0; r < n; ++r) {
    status |= report("thread", checkers[static_cast<size_t>(r)]);
    for (auto* v : {&a, &b, &c}) tidalCommDestroy((*v)[static_cast<size_t>(r)]);
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  bool big = false;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--big") {
      big = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--big] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  return threads > 0 ? runAsThreads(threads, big) : runAsProcess(big);
}
