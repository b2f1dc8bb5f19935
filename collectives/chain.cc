// Broadcast and Reduce as pipelined chains along the ring order.
//
// Broadcast: root -> root+1 -> ... -> root-1. Each rank stores chunk c and
// forwards it at once, so with k chunks the whole message arrives after about
// (n - 2 + k) chunk times: for large messages every link runs at full speed
// and the cost approaches one message time, independent of n.
//
// Reduce: root+1 -> root+2 -> ... -> root. Each rank adds its input to the
// partial sum from the left and forwards it; ranks that are not the root keep
// the partial in scratch because recvbuff only matters at the root.
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule chainBroadcast(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks;
  if (a.count == 0) return s;
  const int pos = mod(a.rank - a.root, n);  // 0 at the root
  if (pos == 0 && !a.inPlace)
    s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, a.count * ts});
  if (n == 1) return s;
  const int right = mod(a.rank + 1, n), left = mod(a.rank - 1, n);
  for (const Range& r : chunksOf(a.count, chunkElems(a.chunkBytes, ts))) {
    const size_t off = r.begin * ts, bytes = r.size * ts;
    if (pos == 0) {
      s.sends.push_back({right, {Buffer::Send, off}, bytes, -1});
      continue;
    }
    const auto recvIndex = static_cast<int64_t>(s.recvs.size());
    s.recvs.push_back({left, {Buffer::Recv, off}, bytes, false, {}, 0});
    if (pos < n - 1) s.sends.push_back({right, {Buffer::Recv, off}, bytes, recvIndex});
  }
  return s;
}

Schedule chainReduce(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks;
  if (a.count == 0) return s;
  if (n == 1) {
    if (!a.inPlace) s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, a.count * ts});
    return s;
  }
  const int pos = mod(a.rank - a.root - 1, n);  // 0 starts the chain, n-1 is the root
  const int right = mod(a.rank + 1, n), left = mod(a.rank - 1, n);
  const bool isRoot = pos == n - 1;
  if (!isRoot && pos > 0) s.scratchBytes = a.count * ts;
  for (const Range& r : chunksOf(a.count, chunkElems(a.chunkBytes, ts))) {
    const size_t off = r.begin * ts, bytes = r.size * ts;
    if (pos == 0) {
      s.sends.push_back({right, {Buffer::Send, off}, bytes, -1});
      continue;
    }
    const auto recvIndex = static_cast<int64_t>(s.recvs.size());
    const BufferRef dst{isRoot ? Buffer::Recv : Buffer::Scratch, off};
    const int divisor = (isRoot && a.op == tidalAvg) ? n : 0;
    s.recvs.push_back({left, dst, bytes, true, {Buffer::Send, off}, divisor});
    if (!isRoot) s.sends.push_back({right, dst, bytes, recvIndex});
  }
  return s;
}

}  // namespace tidal::coll
