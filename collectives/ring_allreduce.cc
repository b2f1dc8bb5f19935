// Ring AllReduce = ring reduce-scatter followed by ring allgather.
//
// With n ranks the buffer is cut into n segments. In the reduce-scatter half
// (steps 0 .. n-2) rank r sends segment r - g and receives segment r - g - 1,
// adding its own contribution, so after n - 1 steps it holds segment r + 1
// fully reduced. In the allgather half (steps n-1 .. 2n-3) the same send/recv
// pattern circulates the finished segments. Each rank sends and receives
// 2(n-1)/n of the buffer, which is optimal in bandwidth, and because every
// step is cut into chunks, chunk c of step g+1 leaves as soon as chunk c of
// step g has been reduced: sending, receiving and reducing overlap.
//
// The final reduction of a segment (step n-2) applies the avg divisor, so the
// allgather half circulates finished values and every rank ends bit-identical.
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule ringAllReduce(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks;
  if (n == 1 || a.count == 0) {
    if (!a.inPlace && a.count > 0)
      s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, a.count * ts});
    return s;
  }
  const int right = mod(a.rank + 1, n), left = mod(a.rank - 1, n);
  RingEmitter ring{n, 2 * (n - 1), a.count, chunkElems(a.chunkBytes, ts), {}, {}, {}};
  ring.sendSegment = [&](int g) { return a.rank - g; };
  ring.makeSend = [&](int g, Range r) {
    // Step 0 sends the rank's own input; later steps forward what it reduced
    // or received into recvbuff.
    const Buffer src = g == 0 ? Buffer::Send : Buffer::Recv;
    return SendOp{right, {src, r.begin * ts}, r.size * ts, -1};
  };
  ring.makeRecv = [&](int g, Range r) {
    const BufferRef dst{Buffer::Recv, r.begin * ts};
    if (g < n - 1) {
      const int divisor = (a.op == tidalAvg && g == n - 2) ? n : 0;
      return RecvOp{left, dst, r.size * ts, true, {Buffer::Send, r.begin * ts}, divisor};
    }
    return RecvOp{left, dst, r.size * ts, false, {}, 0};
  };
  ring.emit(s);
  return s;
}

}  // namespace tidal::coll
