// Rabenseifner's AllReduce: a reduce-scatter by recursive halving, then an
// allgather by recursive doubling, for medium messages.
//
// When it wins: recursive doubling (recursive_doubling.cc) sends the whole
// buffer log2(n) times, so its bandwidth term grows with n; the ring
// (ring_allreduce.cc) sends only 2(n-1)/n of the buffer but in 2(n-1)
// dependent steps. Here each rank sends and receives 2(p-1)/p of the buffer,
// like the ring, in 2 log2(p) steps: 6 instead of 14 at 8 ranks, 28 instead
// of 32,766 at 16,384. It loses to the ring where step count does not matter
// (very large messages, whose chunks the ring pipelines across steps while
// here a step waits for the whole previous one) and where neighbours are
// cheaper than far peers (the partners here are up to p/2 ranks away).
//
// With p the largest power of two <= n: the n - p "extra" ranks first hand
// their input to rank r - p, which reduces it in, and at the end receive the
// result back (two more steps, of the whole buffer, only where n is not a
// power of two). Then, for mask = p/2, p/4, ..., 1, rank r and r ^ mask split
// the region they share in halves: the lower rank keeps the lower half; each
// sends the other half and reduces the half it keeps. After log2(p) steps
// rank r holds the reduced result of its 1/p of the buffer. The same
// exchanges in reverse order then send each rank's finished region to the
// partner, doubling the region held, until every rank holds everything.
//
// Each block is reduced by exactly one rank and then copied, so every rank
// ends with the same bits. Exchanges are cut into chunks so every reducing
// receive fits one staging slot; a step's sends wait for the previous step's
// last receive (receives complete in order, so for all of them). Avg divides
// by n in each rank's last halving step, where its region is final.
#include <bit>

#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

namespace {

struct Halving {
  int partner;
  Range kept, sent;  // elements
};

}  // namespace

Schedule rabenseifnerAllReduce(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks, r = a.rank;
  if (n == 1 || a.count == 0) {
    if (!a.inPlace && a.count > 0)
      s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, a.count * ts});
    return s;
  }
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const size_t chunk = chunkElems(a.chunkBytes, ts);
  const Range whole{0, a.count};
  const auto sendRange = [&](int peer, Buffer from, Range range, int64_t after) {
    for (const Range& c : chunksOf(range.size, chunk))
      s.sends.push_back({peer, {from, (range.begin + c.begin) * ts}, c.size * ts, after});
  };
  // Returns the index of the last receive (unchanged when the range is empty).
  const auto recvRange = [&](int peer, Range range, bool reduce, Buffer local, int divisor,
                             int64_t last) {
    for (const Range& c : chunksOf(range.size, chunk)) {
      const size_t off = (range.begin + c.begin) * ts;
      last = static_cast<int64_t>(s.recvs.size());
      s.recvs.push_back({peer, {Buffer::Recv, off}, c.size * ts, reduce, {local, off}, divisor});
    }
    return last;
  };

  if (r >= p) {
    // Extra rank: contribute, then wait for the finished result.
    sendRange(r - p, Buffer::Send, whole, -1);
    recvRange(r - p, whole, false, Buffer::Recv, 0, -1);
    return s;
  }
  // `current` holds this rank's partial result: its input until it has
  // reduced something.
  Buffer current = Buffer::Send;
  int64_t lastRecv = -1;
  if (r < n - p) {
    lastRecv = recvRange(r + p, whole, true, Buffer::Send, 0, lastRecv);
    current = Buffer::Recv;
  }

  std::vector<Halving> halvings;
  Range region = whole;
  for (int mask = p / 2; mask >= 1; mask /= 2) {
    const Range lower{region.begin, region.size / 2};
    const Range upper{region.begin + lower.size, region.size - lower.size};
    const bool keepLower = (r & mask) == 0;
    const Halving h{r ^ mask, keepLower ? lower : upper, keepLower ? upper : lower};
    halvings.push_back(h);
    sendRange(h.partner, current, h.sent, lastRecv);
    const int divisor = mask == 1 && a.op == tidalAvg ? n : 0;
    const int64_t before = lastRecv;
    lastRecv = recvRange(h.partner, h.kept, true, current, divisor, lastRecv);
    if (lastRecv != before) current = Buffer::Recv;
    region = h.kept;
  }
  // The allgather: the same partners in reverse, each sending what this rank
  // holds finished and receiving what the partner does.
  for (auto h = halvings.rbegin(); h != halvings.rend(); ++h) {
    sendRange(h->partner, Buffer::Recv, h->kept, lastRecv);
    lastRecv = recvRange(h->partner, h->sent, false, Buffer::Recv, 0, lastRecv);
  }
  if (r < n - p) sendRange(r + p, Buffer::Recv, whole, lastRecv);
  return s;
}

}  // namespace tidal::coll
