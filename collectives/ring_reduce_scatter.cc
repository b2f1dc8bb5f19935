// Ring ReduceScatter: the reduce-scatter half of ring AllReduce, shifted by
// one segment so that rank r finishes with segment r. Partial sums that a
// rank only forwards live in the communicator's scratch buffer; the last step
// reduces straight into recvbuff and applies the avg divisor.
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule ringReduceScatter(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks;
  const size_t block = a.count * ts;
  if (a.count == 0) return s;
  if (n == 1) {
    if (!a.inPlace) s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, block});
    return s;
  }
  const int right = mod(a.rank + 1, n), left = mod(a.rank - 1, n);
  const size_t total = a.count * static_cast<size_t>(n);
  s.scratchBytes = total * ts;
  const size_t mine = static_cast<size_t>(a.rank) * a.count;  // first element of my segment
  RingEmitter ring{n, n - 1, total, chunkElems(a.chunkBytes, ts), {}, {}, {}};
  ring.sendSegment = [&](int g) { return a.rank - g - 1; };
  ring.makeSend = [&](int g, Range r) {
    const Buffer src = g == 0 ? Buffer::Send : Buffer::Scratch;
    return SendOp{right, {src, r.begin * ts}, r.size * ts, -1};
  };
  ring.makeRecv = [&](int g, Range r) {
    const BufferRef input{Buffer::Send, r.begin * ts};
    if (g < n - 2) {
      return RecvOp{left, {Buffer::Scratch, r.begin * ts}, r.size * ts, true, input, 0};
    }
    // Last step: segment r lands in recvbuff (offset relative to my segment).
    const int divisor = a.op == tidalAvg ? n : 0;
    return RecvOp{left, {Buffer::Recv, (r.begin - mine) * ts}, r.size * ts, true, input, divisor};
  };
  ring.emit(s);
  return s;
}

}  // namespace tidal::coll
