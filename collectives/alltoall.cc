// AllToAll and AllToAllv as pairwise exchanges with staggered partners.
//
// Step s (1 .. n-1) sends this rank's block for rank+s and receives the
// block of rank-s. Every rank starts with a different partner, so no rank is
// everybody's first target (the hot spot a naive "send to 0, then 1, ..."
// order creates), and every link carries one block in each direction. The
// engine posts all of a rank's sends and receives at once (none depends on
// another), so the steps overlap; the order only decides which transfers a
// transport starts first. The rank's own block is a local copy. For small
// blocks on many ranks, Bruck's log2(n) rounds (bruck_alltoall.cc) cost fewer
// message start-ups.
//
// Blocks go as payload pieces (Connection::postPayload), so on shm each
// moves by one copy out of the sender's buffer (a pull).
//
// In place (sendbuff == recvbuff), a block received could overwrite a block
// not yet sent, so the input is first copied to scratch and sent from there.
#include "collectives/ring_steps.h"
#include "core/dtype.h"
#include "core/error.h"

namespace tidal::coll {

namespace {

// One block of `bytes` from src to peer, cut into chunks: payload pieces,
// each of which may move by one copy out of the sender's buffer. Unlike a
// Send/Recv (kSingleCopyBelow, schedule.h), every block size: with every pair
// exchanging at once the ring's cached copies lose their edge (8 MiB, 4
// ranks: 1.72-1.74 ms single-copy against 2.26-2.28 ms through the ring;
// 32 MiB: 12.9 against 13.8-14.2 ms; docs/benchmarks.md).
void sendChunks(Schedule& s, int peer, BufferRef src, size_t bytes, size_t chunkBytes) {
  for (size_t off = 0; off < bytes; off += chunkBytes) {
    SendOp piece{peer, {src.buffer, src.offset + off}, std::min(chunkBytes, bytes - off), -1};
    piece.payload = true;
    piece.singleCopy = true;
    s.sends.push_back(piece);
  }
}

void recvChunks(Schedule& s, int peer, BufferRef dst, size_t bytes, size_t chunkBytes) {
  for (size_t off = 0; off < bytes; off += chunkBytes) {
    RecvOp piece{peer, {dst.buffer, dst.offset + off}, std::min(chunkBytes, bytes - off), false, {},
                 0};
    piece.payload = true;
    s.recvs.push_back(piece);
  }
}

}  // namespace

Schedule pairwiseAllToAll(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t block = a.count * typeSize(a.type);
  const int n = a.nranks;
  if (block == 0) return s;
  const Buffer from = a.inPlace ? Buffer::Scratch : Buffer::Send;
  if (a.inPlace) {
    s.scratchBytes = block * static_cast<size_t>(n);
    s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Scratch, 0}, s.scratchBytes});
  }
  const auto at = [block](int r) { return block * static_cast<size_t>(r); };
  if (!a.inPlace) s.prologue.push_back({{from, at(a.rank)}, {Buffer::Recv, at(a.rank)}, block});
  const size_t chunk = std::max<size_t>(a.chunkBytes, 1);
  for (int step = 1; step < n; ++step) {
    const int to = mod(a.rank + step, n), source = mod(a.rank - step, n);
    sendChunks(s, to, {from, at(to)}, block, chunk);
    recvChunks(s, source, {Buffer::Recv, at(source)}, block, chunk);
  }
  return s;
}

Schedule pairwiseAllToAllv(const CollectiveArgs& a, const AllToAllvLayout& layout,
                           std::vector<uint64_t>& sizes) {
  Schedule s;
  s.type = a.type;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks;
  const auto u = [](int r) { return static_cast<size_t>(r); };
  // Size messages: this rank's byte counts from `sizes` (sent), the peers'
  // land in scratch (received and checked).
  sizes.assign(u(n), 0);
  for (int r = 0; r < n; ++r) sizes[u(r)] = layout.sendCounts[u(r)] * ts;
  s.scratchBytes = u(n) * sizeof(uint64_t);
  const size_t receivedSizes = 0;
  const size_t self = u(a.rank);
  const size_t selfSend = layout.sendCounts[self] * ts, selfRecv = layout.recvCounts[self] * ts;
  if (selfSend > selfRecv) {
    fail(tidalInvalidUsage,
         "rank {}: AllToAllv sends {} elements to itself but receives {} from itself", a.rank,
         layout.sendCounts[self], layout.recvCounts[self]);
  }
  if (selfSend > 0) {
    s.prologue.push_back({{Buffer::Send, layout.sendDispls[self] * ts},
                          {Buffer::Recv, layout.recvDispls[self] * ts},
                          selfSend});
  }
  const size_t chunk = std::max<size_t>(a.chunkBytes, 1);
  for (int step = 1; step < n; ++step) {
    const int to = mod(a.rank + step, n), source = mod(a.rank - step, n);
    s.sends.push_back({to, addressOf(&sizes[u(to)]), sizeof(uint64_t), -1});
    sendChunks(s, to, {Buffer::Send, layout.sendDispls[u(to)] * ts}, layout.sendCounts[u(to)] * ts,
               chunk);
    const auto header = static_cast<int64_t>(s.recvs.size());
    RecvOp size{source,
                {Buffer::Scratch, receivedSizes + u(source) * sizeof(uint64_t)},
                sizeof(uint64_t),
                false,
                {},
                0};
    size.sizeLimit = layout.recvCounts[u(source)] * ts;
    s.recvs.push_back(size);
    const size_t bytes = layout.recvCounts[u(source)] * ts;
    for (size_t off = 0; off < bytes; off += chunk) {
      RecvOp piece{source,
                   {Buffer::Recv, layout.recvDispls[u(source)] * ts + off},
                   std::min(chunk, bytes - off),
                   false,
                   {},
                   0};
      piece.sizedBy = header;
      piece.messageOffset = off;
      piece.payload = true;
      s.recvs.push_back(piece);
    }
  }
  return s;
}

}  // namespace tidal::coll
