// Hierarchical AllGather for ranks spread over several hosts.
//
// With L ranks on each of H hosts, rank (h, l) is local rank l of host h:
//   1. across hosts, the H ranks with local index l run a ring allgather of
//      their own blocks: afterwards (h, l) holds "column" l, the blocks of
//      every rank with local index l;
//   2. inside each host, a ring allgather of the columns: each step forwards
//      a whole column (H blocks, scattered over recvbuff at their ranks'
//      places), piece by piece.
// Every block crosses the network once per host that lacks it, split over L
// parallel rings, where a flat ring funnels all of it through the one rank
// at each host edge. Phase 2 starts each (block, chunk) of its own column as
// soon as phase 1 delivered it, so the phases overlap.
#include "collectives/host_grid.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule hierarchicalAllGather(const CollectiveArgs& a, const Topology& t) {
  Schedule s;
  s.type = a.type;
  const size_t ts = typeSize(a.type);
  if (a.count == 0) return s;
  const HostGrid grid(t);
  const int L = grid.L, H = grid.H, l = grid.l, h = grid.h;
  // Element range of rank r's block in recvbuff.
  const auto block = [&a](int r) { return Range{static_cast<size_t>(r) * a.count, a.count}; };
  if (!a.inPlace) {
    s.prologue.push_back(
        {{Buffer::Send, 0}, {Buffer::Recv, block(a.rank).begin * ts}, a.count * ts});
  }
  const size_t chunk = chunkElems(a.chunkBytes, ts);
  auto send = [ts](int peer) {
    return [ts, peer](int, Range r) {
      return SendOp{peer, {Buffer::Recv, r.begin * ts}, r.size * ts, -1};
    };
  };
  auto recv = [ts](int peer) {
    return [ts, peer](int, Range r) {
      return RecvOp{peer, {Buffer::Recv, r.begin * ts}, r.size * ts, false, {}, 0};
    };
  };

  // Phase 1: across hosts, member h' of this column ring owns rank (h', l)'s block.
  RingEmitter across{H, H - 1, 0, chunk, {}, {}, {}};
  across.sendSegment = [h](int g) { return h - g; };
  across.piece = [&](int member, int) { return block(grid.rankAt(member, l)); };
  across.makeSend = send(grid.nextHost());
  across.makeRecv = recv(grid.prevHost());
  const RingReceipts arrived = across.emit(s);

  // Phase 2: inside the host, member l' owns column l': piece p is rank (p, l')'s block.
  RingEmitter inside{L, L - 1, 0, chunk, {}, {}, {}};
  inside.sendSegment = [l](int g) { return l - g; };
  inside.pieceCount = H;
  inside.piece = [&](int member, int p) { return block(grid.rankAt(p, member)); };
  // Step 0 sends this rank's column: its own block is there from the start,
  // the others once phase 1 has delivered them.
  inside.firstStepDependency = [&](int, int p, size_t c) -> int64_t {
    return p == h ? -1 : arrived.of(p, 0, c);
  };
  inside.makeSend = send(grid.nextLocal());
  inside.makeRecv = recv(grid.prevLocal());
  inside.emit(s);
  return s;
}

}  // namespace tidal::coll
