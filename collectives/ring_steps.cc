#include "collectives/ring_steps.h"

namespace tidal::coll {

Range RingEmitter::pieceOf(int member, int p) const {
  if (piece) return piece(member, p);
  const Range r = segment(count, nranks, member);
  return {base + r.begin, r.size};
}

RingReceipts RingEmitter::emit(Schedule& s) const {
  size_t maxPiece = 0;
  for (int j = 0; j < nranks; ++j) {
    for (int p = 0; p < pieceCount; ++p) maxPiece = std::max(maxPiece, pieceOf(j, p).size);
  }
  const size_t chunks = (maxPiece + chunk - 1) / chunk;
  const size_t lanes = static_cast<size_t>(pieceCount) * chunks;  // one (piece, chunk) each
  RingReceipts receipts{static_cast<size_t>(pieceCount), chunks,
                        std::vector<int64_t>(static_cast<size_t>(nranks) * lanes, -1)};
  // The receive of each lane in the previous step, -1 where that chunk was empty.
  std::vector<int64_t> prevRecv(lanes, -1), curRecv(lanes, -1);
  for (int g = 0; g < steps; ++g) {
    const int sendMember = mod(sendSegment(g), nranks);
    const int recvMember = mod(sendSegment(g) - 1, nranks);
    for (int p = 0; p < pieceCount; ++p) {
      const Range sendPiece = pieceOf(sendMember, p);
      const Range recvPiece = pieceOf(recvMember, p);
      for (size_t c = 0; c < chunks; ++c) {
        // Interleave sends and receives chunk by chunk; the engine keeps each
        // list in order, this only keeps the lists easy to read.
        const size_t lane = static_cast<size_t>(p) * chunks + c;
        const size_t off = c * chunk;
        if (off < sendPiece.size) {
          SendOp op = makeSend(g, {sendPiece.begin + off, std::min(chunk, sendPiece.size - off)});
          if (g > 0) {
            op.afterRecv = prevRecv[lane];
          } else {
            op.afterRecv =
                firstStepDependency ? firstStepDependency(sendMember, p, c) : firstDependency;
          }
          s.sends.push_back(op);
        }
        curRecv[lane] = -1;
        if (off < recvPiece.size) {
          curRecv[lane] = static_cast<int64_t>(s.recvs.size());
          receipts.index[static_cast<size_t>(recvMember) * lanes + lane] = curRecv[lane];
          s.recvs.push_back(
              makeRecv(g, {recvPiece.begin + off, std::min(chunk, recvPiece.size - off)}));
        }
      }
    }
    std::swap(prevRecv, curRecv);
  }
  return receipts;
}

}  // namespace tidal::coll
