// Hierarchical AllReduce for ranks spread over several hosts.
//
// A flat ring crosses host boundaries at every host edge in every step, and
// each crossing carries a full share of the data. Here, with L ranks on each
// of H hosts:
//   1. inside each host, a ring reduce-scatter leaves local rank l with shard
//      l (1/L of the buffer) reduced over the host;
//   2. across hosts, the H ranks with local index l run a ring AllReduce of
//      shard l: between them they move each byte of the buffer across the
//      network about 2(H-1)/H times, split over L parallel rings;
//   3. inside each host, a ring allgather spreads the finished shards.
// Phases 1 and 3 run over shared memory when hosts are real hosts. A phase
// starts when the rank's previous phase has finished (its first sends wait
// for the last receive of the phase before), so the schedule stays simple;
// within a phase, chunks pipeline as in the flat ring.
#include <map>

#include "collectives/host_grid.h"
#include "core/dtype.h"

namespace tidal::coll {

Topology Topology::fromHostKeys(const std::vector<std::string>& keyOfRank, int rank) {
  Topology t;
  std::map<std::string, size_t> index;
  for (int r = 0; r < static_cast<int>(keyOfRank.size()); ++r) {
    auto [it, fresh] = index.emplace(keyOfRank[static_cast<size_t>(r)], t.hosts.size());
    if (fresh) t.hosts.emplace_back();
    t.hosts[it->second].push_back(r);
    if (r == rank) {
      t.myHost = static_cast<int>(it->second);
      t.myLocal = static_cast<int>(t.hosts[it->second].size()) - 1;
    }
  }
  for (const auto& h : t.hosts) {
    if (h.size() != t.hosts[0].size()) return Topology{};
  }
  return t;
}

std::vector<int> hierarchicalPeers(const Topology& t) {
  const HostGrid grid(t);
  return {grid.nextLocal(), grid.prevLocal(), grid.nextHost(), grid.prevHost()};
}

Schedule hierarchicalAllReduce(const CollectiveArgs& a, const Topology& t) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  if (a.count == 0) return s;
  const HostGrid grid(t);
  const int L = grid.L, H = grid.H, l = grid.l, h = grid.h;
  const int nextLocal = grid.nextLocal(), prevLocal = grid.prevLocal();
  const int nextHost = grid.nextHost(), prevHost = grid.prevHost();
  const size_t chunk = chunkElems(a.chunkBytes, ts);
  auto lastRecv = [&s] { return static_cast<int64_t>(s.recvs.size()) - 1; };

  // Phase 1: reduce-scatter inside the host; local rank l ends with shard l
  // (reduced over the host) in recvbuff.
  RingEmitter rs{L, L - 1, a.count, chunk, {}, {}, {}};
  rs.sendSegment = [&](int g) { return l - g - 1; };
  rs.makeSend = [&](int g, Range r) {
    return SendOp{nextLocal, {g == 0 ? Buffer::Send : Buffer::Recv, r.begin * ts}, r.size * ts, -1};
  };
  rs.makeRecv = [&](int, Range r) {
    return RecvOp{prevLocal, {Buffer::Recv, r.begin * ts}, r.size * ts,
                  true,      {Buffer::Send, r.begin * ts}, 0};
  };
  rs.emit(s);

  // Phase 2: AllReduce of shard l across hosts; the avg divisor is applied
  // once, at the end of its reduce-scatter half.
  const Range shard = segment(a.count, L, l);
  RingEmitter across{H, 2 * (H - 1), shard.size, chunk, {}, {}, {}};
  across.base = shard.begin;
  across.firstDependency = lastRecv();
  across.sendSegment = [&](int g) { return h - g; };
  across.makeSend = [&](int, Range r) {
    return SendOp{nextHost, {Buffer::Recv, r.begin * ts}, r.size * ts, -1};
  };
  across.makeRecv = [&](int g, Range r) {
    const BufferRef dst{Buffer::Recv, r.begin * ts};
    if (g < H - 1) {
      const int divisor = (a.op == tidalAvg && g == H - 2) ? a.nranks : 0;
      return RecvOp{prevHost, dst, r.size * ts, true, dst, divisor};
    }
    return RecvOp{prevHost, dst, r.size * ts, false, {}, 0};
  };
  across.emit(s);

  // Phase 3: allgather of the finished shards inside the host.
  RingEmitter ag{L, L - 1, a.count, chunk, {}, {}, {}};
  ag.firstDependency = lastRecv();
  ag.sendSegment = [&](int g) { return l - g; };
  ag.makeSend = [&](int, Range r) {
    return SendOp{nextLocal, {Buffer::Recv, r.begin * ts}, r.size * ts, -1};
  };
  ag.makeRecv = [&](int, Range r) {
    return RecvOp{prevLocal, {Buffer::Recv, r.begin * ts}, r.size * ts, false, {}, 0};
  };
  ag.emit(s);
  return s;
}

}  // namespace tidal::coll
