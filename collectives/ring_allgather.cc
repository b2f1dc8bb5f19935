// Ring AllGather: each rank first places its own block at its slot of
// recvbuff, then for n - 1 steps forwards to the right the block it received
// from the left in the previous step. Chunked so forwarding starts as soon as
// the first chunk of a block has arrived.
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule ringAllGather(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks;
  const size_t block = a.count * ts;
  if (a.count == 0) return s;
  if (!a.inPlace) {
    s.prologue.push_back(
        {{Buffer::Send, 0}, {Buffer::Recv, static_cast<size_t>(a.rank) * block}, block});
  }
  if (n == 1) return s;
  const int right = mod(a.rank + 1, n), left = mod(a.rank - 1, n);
  const size_t total = a.count * static_cast<size_t>(n);
  RingEmitter ring{n, n - 1, total, chunkElems(a.chunkBytes, ts), {}, {}, {}};
  ring.sendSegment = [&](int g) { return a.rank - g; };
  ring.makeSend = [&](int, Range r) {
    return SendOp{right, {Buffer::Recv, r.begin * ts}, r.size * ts, -1};
  };
  ring.makeRecv = [&](int, Range r) {
    return RecvOp{left, {Buffer::Recv, r.begin * ts}, r.size * ts, false, {}, 0};
  };
  ring.emit(s);
  return s;
}

}  // namespace tidal::coll
