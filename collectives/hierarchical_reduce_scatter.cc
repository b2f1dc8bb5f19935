// Hierarchical ReduceScatter for ranks spread over several hosts: the
// mirror image of hierarchical AllGather.
//
// With L ranks on each of H hosts, rank (h, l) is local rank l of host h:
//   1. inside each host, a ring reduce-scatter of "columns": column l' is the
//      H blocks destined for the ranks with local index l' (scattered over
//      the buffer at their ranks' places). Afterwards (h, l) holds column l
//      reduced over its host, in scratch;
//   2. across hosts, the H ranks with local index l run a ring reduce-scatter
//      of that column: each ends with its own block reduced over every rank.
// Only host-reduced data crosses the network, once, split over L parallel
// rings. Phase 2 starts each (block, chunk) as soon as phase 1 has finished
// reducing it.
#include "collectives/host_grid.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule hierarchicalReduceScatter(const CollectiveArgs& a, const Topology& t) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  if (a.count == 0) return s;
  const HostGrid grid(t);
  const int L = grid.L, H = grid.H, l = grid.l, h = grid.h;
  // Element range of rank r's block in sendbuff (and at the same offset in scratch).
  const auto block = [&a](int r) { return Range{static_cast<size_t>(r) * a.count, a.count}; };
  s.scratchBytes = static_cast<size_t>(a.nranks) * a.count * ts;
  const size_t chunk = chunkElems(a.chunkBytes, ts);
  const int nextLocal = grid.nextLocal(), prevLocal = grid.prevLocal();
  const int nextHost = grid.nextHost(), prevHost = grid.prevHost();

  // Phase 1: inside the host, partial sums of columns; everything lands in
  // scratch (even this rank's own column: it is not final yet).
  RingEmitter inside{L, L - 1, 0, chunk, {}, {}, {}};
  inside.sendSegment = [l](int g) { return l - g - 1; };
  inside.pieceCount = H;
  inside.piece = [&](int member, int p) { return block(grid.rankAt(p, member)); };
  inside.makeSend = [&](int g, Range r) {
    return SendOp{
        nextLocal, {g == 0 ? Buffer::Send : Buffer::Scratch, r.begin * ts}, r.size * ts, -1};
  };
  inside.makeRecv = [&](int, Range r) {
    return RecvOp{prevLocal, {Buffer::Scratch, r.begin * ts}, r.size * ts,
                  true,      {Buffer::Send, r.begin * ts},    0};
  };
  const RingReceipts reduced = inside.emit(s);

  // Phase 2: across hosts, member h' owns rank (h', l)'s block of the
  // host-reduced column. Intermediate partials stay in scratch (reduced into
  // the host's own partial at the same place); the last step writes
  // recvbuff and applies the avg divisor.
  RingEmitter across{H, H - 1, 0, chunk, {}, {}, {}};
  across.sendSegment = [h](int g) { return h - g - 1; };
  across.piece = [&](int member, int) { return block(grid.rankAt(member, l)); };
  // Step 0 sends the block of member h - 1; its chunk c is final in this host
  // once phase 1 reduced piece h - 1 of this rank's column.
  across.firstStepDependency = [&](int member, int, size_t c) { return reduced.of(l, member, c); };
  across.makeSend = [&](int, Range r) {
    return SendOp{nextHost, {Buffer::Scratch, r.begin * ts}, r.size * ts, -1};
  };
  const size_t mine = block(a.rank).begin;
  across.makeRecv = [&](int g, Range r) {
    const BufferRef partial{Buffer::Scratch, r.begin * ts};
    if (g < H - 2) return RecvOp{prevHost, partial, r.size * ts, true, partial, 0};
    const int divisor = a.op == tidalAvg ? a.nranks : 0;
    return RecvOp{prevHost, {Buffer::Recv, (r.begin - mine) * ts}, r.size * ts, true, partial,
                  divisor};
  };
  across.emit(s);
  return s;
}

}  // namespace tidal::coll
