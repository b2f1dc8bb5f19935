// Broadcast and Reduce over a binomial tree rooted at the root, for small
// messages.
//
// When it wins: the chain (chain.cc) is n - 1 dependent hops, so a message
// that fits in one chunk reaches the far end after n - 1 message times. The
// tree (binomial_tree.h) is ceil(log2 n) levels deep, and each rank sends to
// its children largest subtree first (Broadcast) or reduces its children
// nearest first (Reduce, the nearest finish first), so with every rank doing
// one message per step the whole collective takes ceil(log2 n) steps: 3
// instead of 7 at 8 ranks, 14 instead of 16,383 at 16,384. Small messages
// cost mostly their start-up per hop, so that is their whole cost.
//
// When the chain wins: large messages. The chain is pipelined in chunks and
// every link carries the message once, so once there are many chunks its
// time approaches one message time whatever n is. The tree is pipelined too,
// but the root (and each inner rank) sends every chunk to up to ceil(log2 n)
// children (Broadcast) or reduces that many incoming copies (Reduce) through
// its one link, so its bandwidth term is log2(n) message times. The
// communicator picks the tree up to TIDAL_BROADCAST_TREE_BYTES /
// TIDAL_REDUCE_TREE_BYTES (src/comm/algorithm_choice.h).
//
// Broadcast: each non-root rank receives every chunk from its parent into
// recvbuff and forwards it to its children as soon as it has landed; the root
// sends from sendbuff (in place or not) after copying it to recvbuff.
//
// Reduce: a rank's partial result lives in recvbuff at the root and in
// scratch at inner ranks (recvbuff matters only at the root); leaves send
// their input straight from sendbuff. For each chunk the first child's data
// is reduced with the rank's own input (which nothing writes, so the engine
// may reduce it as it arrives), every later child's into the partial, and
// the partial goes to the parent once the last child's chunk is in. Every
// reducing receive is one chunk, so it fits one staging slot, and chunks
// pipeline up the tree. Avg is a sum divided by n in the root's last
// reduction of each chunk, as in the chain.
#include "collectives/binomial_tree.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule binomialBroadcast(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t ts = typeSize(a.type);
  if (a.count == 0) return s;
  const BinomialRanks t{a.nranks, a.root};
  const int v = t.vrank(a.rank);
  if (v == 0 && !a.inPlace)
    s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, a.count * ts});
  if (a.nranks == 1) return s;
  const std::vector<int> children = t.children(v);
  for (const Range& r : chunksOf(a.count, chunkElems(a.chunkBytes, ts))) {
    const size_t off = r.begin * ts, bytes = r.size * ts;
    int64_t landed = -1;
    if (v != 0) {
      landed = static_cast<int64_t>(s.recvs.size());
      s.recvs.push_back(
          {t.rankOf(BinomialRanks::parent(v)), {Buffer::Recv, off}, bytes, false, {}, 0});
    }
    const BufferRef src{v == 0 ? Buffer::Send : Buffer::Recv, off};
    for (auto c = children.rbegin(); c != children.rend(); ++c)
      s.sends.push_back({t.rankOf(*c), src, bytes, landed});
  }
  return s;
}

Schedule binomialReduce(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  if (a.count == 0) return s;
  if (a.nranks == 1) {
    if (!a.inPlace) s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, a.count * ts});
    return s;
  }
  const BinomialRanks t{a.nranks, a.root};
  const int v = t.vrank(a.rank);
  const std::vector<int> children = t.children(v);
  // Where this rank's partial result builds up.
  const Buffer partial = v == 0 ? Buffer::Recv : Buffer::Scratch;
  if (v != 0 && !children.empty()) s.scratchBytes = a.count * ts;
  for (const Range& r : chunksOf(a.count, chunkElems(a.chunkBytes, ts))) {
    const size_t off = r.begin * ts, bytes = r.size * ts;
    for (size_t i = 0; i < children.size(); ++i) {
      const bool last = i + 1 == children.size();
      const int divisor = (v == 0 && last && a.op == tidalAvg) ? a.nranks : 0;
      const BufferRef input{i == 0 ? Buffer::Send : partial, off};
      s.recvs.push_back({t.rankOf(children[i]), {partial, off}, bytes, true, input, divisor});
    }
    if (v == 0) continue;
    const int parent = t.rankOf(BinomialRanks::parent(v));
    if (children.empty()) {
      s.sends.push_back({parent, {Buffer::Send, off}, bytes, -1});
    } else {
      s.sends.push_back({parent, {partial, off}, bytes, static_cast<int64_t>(s.recvs.size()) - 1});
    }
  }
  return s;
}

std::vector<int> binomialPeers(int rank, int nranks) {
  // Rank r's parent under root q is r - lowBit(r - q), its children r + 2^k.
  std::vector<int> out;
  for (int step = 1; step < nranks; step *= 2) {
    for (const int p : {mod(rank + step, nranks), mod(rank - step, nranks)}) {
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  }
  return out;
}

}  // namespace tidal::coll
