// Gather and Scatter: the root exchanges one message with every other rank.
//
// Every byte of a Gather or Scatter has to cross the root's link anyway, so a
// binomial tree (binomial_gather_scatter.cc) saves no bandwidth; what it saves
// is the root's per-message start-up cost at small sizes, at the price of
// log2(n) dependent hops. The root posts all its messages at once and the
// transports move them concurrently, so direct is the choice for large blocks
// and also the latency choice up to the rank counts one host holds. Messages
// are cut into chunks like every other transfer (bounded staging on the
// receiving side of device paths).
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

namespace {

void chunked(size_t bytes, size_t chunkBytes, const std::function<void(size_t, size_t)>& each) {
  const size_t chunk = std::max<size_t>(chunkBytes, 1);
  for (size_t off = 0; off < bytes; off += chunk) each(off, std::min(chunk, bytes - off));
}

// The root's side: `each(rank, offset, bytes)` for every chunk of every
// other rank's block, starting after the root so no rank is always first.
void fromRoot(const CollectiveArgs& a, size_t block,
              const std::function<void(int, size_t, size_t)>& each) {
  for (int step = 1; step < a.nranks; ++step) {
    const int peer = mod(a.root + step, a.nranks);
    chunked(block, a.chunkBytes, [&](size_t off, size_t bytes) { each(peer, off, bytes); });
  }
}

}  // namespace

Schedule directGather(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t block = a.count * typeSize(a.type);
  if (block == 0) return s;
  const auto at = [block](int r) { return block * static_cast<size_t>(r); };
  if (a.rank != a.root) {
    chunked(block, a.chunkBytes, [&](size_t off, size_t bytes) {
      s.sends.push_back({a.root, {Buffer::Send, off}, bytes, -1});
    });
    return s;
  }
  // In place: the root's block already sits at recvbuff + root * block.
  if (!a.inPlace) s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, at(a.root)}, block});
  fromRoot(a, block, [&](int from, size_t off, size_t bytes) {
    s.recvs.push_back({from, {Buffer::Recv, at(from) + off}, bytes, false, {}, 0});
  });
  return s;
}

Schedule directScatter(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t block = a.count * typeSize(a.type);
  if (block == 0) return s;
  const auto at = [block](int r) { return block * static_cast<size_t>(r); };
  if (a.rank != a.root) {
    chunked(block, a.chunkBytes, [&](size_t off, size_t bytes) {
      s.recvs.push_back({a.root, {Buffer::Recv, off}, bytes, false, {}, 0});
    });
    return s;
  }
  // In place: the root's own block is recvbuff = sendbuff + root * block.
  if (!a.inPlace) s.prologue.push_back({{Buffer::Send, at(a.root)}, {Buffer::Recv, 0}, block});
  fromRoot(a, block, [&](int to, size_t off, size_t bytes) {
    s.sends.push_back({to, {Buffer::Send, at(to) + off}, bytes, -1});
  });
  return s;
}

}  // namespace tidal::coll
