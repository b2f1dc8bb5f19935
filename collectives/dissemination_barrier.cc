// Barrier by dissemination.
//
// When it wins: always, for a barrier. In round k rank r sends one byte to
// r + 2^k and receives one from r - 2^k (mod n), and round k's send waits for
// round k - 1's receive. After round k a rank has heard, directly or through
// the ranks it heard from, from the 2^(k+1) - 1 ranks before it, so after
// ceil(log2 n) rounds it has heard from every rank: no rank leaves before
// every rank has arrived. That is ceil(log2 n) dependent messages for any n,
// where an AllReduce-based barrier takes log2(p) exchanges plus two more
// when n is not a power of two p, and a tree takes 2 log2(n) (up and down).
//
// The bytes carry nothing: the send reads byte 0 of the barrier buffer and
// receive k lands in byte 1 + k; the buffer has n bytes, and
// 1 + ceil(log2 n) <= n for every n >= 2. The peers are the binomial trees'
// (rank +- 2^k, binomialPeers), which the communicator connects at init.
#include "collectives/ring_steps.h"

namespace tidal::coll {

Schedule disseminationBarrier(const CollectiveArgs& a) {
  Schedule s;
  s.type = tidalUint8;
  s.op = tidalMax;
  const int n = a.nranks, r = a.rank;
  int64_t lastRecv = -1;
  size_t slot = 1;
  for (int distance = 1; distance < n; distance *= 2, ++slot) {
    s.sends.push_back({mod(r + distance, n), {Buffer::Recv, 0}, 1, lastRecv});
    lastRecv = static_cast<int64_t>(s.recvs.size());
    s.recvs.push_back({mod(r - distance, n), {Buffer::Recv, slot}, 1, false, {}, 0});
  }
  return s;
}

}  // namespace tidal::coll
