// ReduceScatter by recursive halving, for small blocks on many ranks.
//
// When it wins: the ring (ring_reduce_scatter.cc) takes n - 1 dependent
// steps, each a message start-up; here log2(p) steps (plus two where n is
// not a power of two) move the same n - 1 blocks per rank: 3 steps instead
// of 7 at 8 ranks, 14 instead of 16,383 at 16,384 hosts of one rank, where
// the ring's start-ups dominate any block of a few KiB. It loses where
// blocks are large: a step here waits for all of the previous one, while
// the ring pipelines chunks across its steps, and the partners here are up
// to p/2 ranks away rather than neighbours. This is the reduce-scatter half
// of Rabenseifner's AllReduce (rabenseifner_allreduce.cc) with the regions
// following block boundaries, so that each rank ends with its own block.
//
// With p the largest power of two <= n and e = n - p, ranks are paired into
// p "virtual" ranks: v < e stands for ranks 2v and 2v + 1 (rank 2v + 1 hands
// its whole input to 2v first, which reduces it in), v >= e for rank v + e.
// Virtual rank v then owns the contiguous blocks of the ranks it stands for.
// For mask = p/2, p/4, ..., 1, virtual ranks v and v ^ mask split the range
// of virtual ranks they share in halves, each keeping the half it lies in:
// each sends the blocks of the other half and reduces those of its own.
// After log2(p) steps each virtual rank holds its blocks reduced; rank 2v
// sends block 2v + 1 on to its pair. Partial sums a rank only forwards live
// in scratch (n blocks); the last reduction of a block lands in recvbuff,
// and applies the avg divisor. A step's blocks travel as one range cut into
// chunks (log2(p) start-ups, not one a block), so every reducing receive
// fits a staging slot; the last step cuts at block boundaries, since its
// blocks land in different places.
#include <bit>

#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule halvingReduceScatter(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks, r = a.rank;
  const size_t block = a.count * ts;
  if (a.count == 0) return s;
  if (n == 1) {
    if (!a.inPlace) s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, block});
    return s;
  }
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int e = n - p;
  // First block of virtual rank v (its real rank, or its pair's keeper);
  // firstBlock(p) == n.
  const auto firstBlock = [&](int v) { return v < e ? 2 * v : v + e; };
  const size_t chunk = chunkElems(a.chunkBytes, ts);
  // The element ranges of blocks [from, to) as messages: chunks of the whole
  // range, or, in the last step (whose blocks land in different places),
  // chunks of each block. Both sides of a message cut alike.
  const auto pieces = [&](int from, int to, bool perBlock) {
    std::vector<Range> out;
    const size_t first = static_cast<size_t>(from) * a.count;
    if (!perBlock) {
      for (const Range& c : chunksOf(static_cast<size_t>(to - from) * a.count, chunk))
        out.push_back({first + c.begin, c.size});
      return out;
    }
    for (int b = from; b < to; ++b) {
      for (const Range& c : chunksOf(a.count, chunk))
        out.push_back({static_cast<size_t>(b) * a.count + c.begin, c.size});
    }
    return out;
  };
  const int divisor = a.op == tidalAvg ? n : 0;

  // The pair's extra rank: its input goes to 2v, its block comes back.
  if (r < 2 * e && r % 2 == 1) {
    for (const Range& c : pieces(0, n, false))
      s.sends.push_back({r - 1, {Buffer::Send, c.begin * ts}, c.size * ts, -1});
    for (const Range& c : pieces(r, r + 1, true)) {
      const size_t off = (c.begin - static_cast<size_t>(r) * a.count) * ts;
      s.recvs.push_back({r - 1, {Buffer::Recv, off}, c.size * ts, false, {}, 0});
    }
    return s;
  }
  const int v = r < 2 * e ? r / 2 : r - e;
  s.scratchBytes = static_cast<size_t>(n) * block;
  // Where this rank's partial result of every block is: its input until it
  // has reduced something into scratch.
  Buffer current = Buffer::Send;
  int64_t lastRecv = -1;
  // Receives blocks [from, to) from `peer`, reducing them into scratch, or,
  // in the last step, this rank's own block into recvbuff (with the avg
  // divisor, as the pair's block it sends on).
  const auto receive = [&](int peer, int from, int to, bool last) {
    for (const Range& c : pieces(from, to, last)) {
      const bool mine = last && c.begin / a.count == static_cast<size_t>(r);
      const BufferRef dst =
          mine ? BufferRef{Buffer::Recv, (c.begin - static_cast<size_t>(r) * a.count) * ts}
               : BufferRef{Buffer::Scratch, c.begin * ts};
      lastRecv = static_cast<int64_t>(s.recvs.size());
      s.recvs.push_back(
          {peer, dst, c.size * ts, true, {current, c.begin * ts}, last ? divisor : 0});
    }
  };
  if (r < 2 * e) {
    receive(r + 1, 0, n, false);
    current = Buffer::Scratch;
  }
  int lo = 0, hi = p;  // the virtual ranks whose blocks this rank still reduces
  for (int mask = p / 2; mask >= 1; mask /= 2) {
    const int mid = lo + (hi - lo) / 2;
    const bool keepLower = v < mid;
    const int peer = firstBlock(v ^ mask);  // the real rank of the partner
    const int keepFrom = keepLower ? lo : mid, keepTo = keepLower ? mid : hi;
    const int sendFrom = keepLower ? mid : lo, sendTo = keepLower ? hi : mid;
    for (const Range& c : pieces(firstBlock(sendFrom), firstBlock(sendTo), mask == 1))
      s.sends.push_back({peer, {current, c.begin * ts}, c.size * ts, lastRecv});
    receive(peer, firstBlock(keepFrom), firstBlock(keepTo), mask == 1);
    current = Buffer::Scratch;
    lo = keepFrom;
    hi = keepTo;
  }
  if (r < 2 * e) {
    for (const Range& c : pieces(r + 1, r + 2, true))
      s.sends.push_back({r + 1, {Buffer::Scratch, c.begin * ts}, c.size * ts, lastRecv});
  }
  return s;
}

}  // namespace tidal::coll
