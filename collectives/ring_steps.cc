#include "collectives/ring_steps.h"

namespace tidal::coll {

void RingEmitter::emit(Schedule& s) const {
  const size_t maxSeg = (count + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks);
  const size_t chunks = maxSeg == 0 ? 0 : (maxSeg + chunk - 1) / chunk;
  // recvIndex[c] of the previous step, -1 where that chunk was empty.
  std::vector<int64_t> prevRecv(chunks, -1), curRecv(chunks, -1);
  for (int g = 0; g < steps; ++g) {
    const Range sendSeg = segment(count, nranks, mod(sendSegment(g), nranks));
    const Range recvSeg = segment(count, nranks, mod(sendSegment(g) - 1, nranks));
    for (size_t c = 0; c < chunks; ++c) {
      // Interleave sends and receives chunk by chunk; the engine keeps each
      // list in order, this only keeps the lists easy to read.
      const size_t off = c * chunk;
      if (off < sendSeg.size) {
        Range r{base + sendSeg.begin + off, std::min(chunk, sendSeg.size - off)};
        SendOp op = makeSend(g, r);
        op.afterRecv = g == 0 ? firstDependency : prevRecv[c];
        s.sends.push_back(op);
      }
      curRecv[c] = -1;
      if (off < recvSeg.size) {
        Range r{base + recvSeg.begin + off, std::min(chunk, recvSeg.size - off)};
        curRecv[c] = static_cast<int64_t>(s.recvs.size());
        s.recvs.push_back(makeRecv(g, r));
      }
    }
    std::swap(prevRecv, curRecv);
  }
}

}  // namespace tidal::coll
