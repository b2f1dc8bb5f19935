// Recursive-doubling AllReduce for small messages.
//
// A ring needs 2(n-1) dependent hops; for a few bytes each hop is pure
// latency. Here, with p the largest power of two <= n, rank r exchanges its
// whole partial result with r ^ 1, r ^ 2, ..., r ^ (p/2) and reduces after
// each exchange: log2(p) hops. The n - p "extra" ranks first hand their input
// to rank r - p (which reduces it in) and at the end receive the result back,
// adding two hops only where n is not a power of two.
//
// Both partners of an exchange compute a OP b and b OP a; every supported op
// is commutative bit-for-bit in IEEE arithmetic, so all ranks still end with
// identical bits. Each exchange reduces in place into recvbuff, which the
// same step's send reads: the receive waits for that send (afterSend).
#include <bit>

#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

namespace {
int largestPowerOfTwo(int n) { return static_cast<int>(std::bit_floor(static_cast<unsigned>(n))); }
}  // namespace

std::vector<int> recursiveDoublingPeers(int rank, int n) {
  std::vector<int> peers;
  const int p = largestPowerOfTwo(n);
  if (rank >= p) return {rank - p};
  if (rank < n - p) peers.push_back(rank + p);
  for (int mask = 1; mask < p; mask <<= 1) peers.push_back(rank ^ mask);
  return peers;
}

Schedule recursiveDoublingAllReduce(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t bytes = a.count * typeSize(a.type);
  const int n = a.nranks, r = a.rank;
  if (n == 1 || a.count == 0) {
    if (!a.inPlace && a.count > 0)
      s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, bytes});
    return s;
  }
  const int p = largestPowerOfTwo(n);
  const BufferRef send{Buffer::Send, 0}, recv{Buffer::Recv, 0};
  const int avgDivisor = a.op == tidalAvg ? n : 0;

  if (r >= p) {
    // Extra rank: contribute, then wait for the finished result.
    s.sends.push_back({r - p, send, bytes, -1});
    s.recvs.push_back({r - p, recv, bytes, false, {}, 0});
    return s;
  }
  // `current` holds this rank's partial result: its input until it has reduced something.
  BufferRef current = send;
  int64_t lastRecv = -1;
  if (r < n - p) {
    s.recvs.push_back({r + p, recv, bytes, true, send, 0});
    current = recv;
    lastRecv = 0;
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int partner = r ^ mask;
    const auto sendIndex = static_cast<int64_t>(s.sends.size());
    s.sends.push_back({partner, current, bytes, lastRecv});
    const bool last = (mask << 1) >= p;
    RecvOp op{partner, recv, bytes, true, current, last ? avgDivisor : 0};
    op.afterSend = sendIndex;
    lastRecv = static_cast<int64_t>(s.recvs.size());
    s.recvs.push_back(op);
    current = recv;
  }
  if (r < n - p) s.sends.push_back({r + p, recv, bytes, lastRecv});
  return s;
}

}  // namespace tidal::coll
