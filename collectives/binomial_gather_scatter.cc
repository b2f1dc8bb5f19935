// Gather and Scatter over a binomial tree, for small blocks.
//
// Direct (gather_scatter.cc) has the root exchange n - 1 messages. With small
// blocks each costs mostly its start-up at the root, which the root pays n - 1
// times in a row; the tree has it exchange ceil(log2 n) messages and spreads
// the rest over the other ranks, at the price of log2(n) dependent hops. The
// bytes through the root's link are the same either way, so for large blocks
// direct wins (no store-and-forward).
//
// Ranks are renumbered so the root is 0 (binomial_tree.h): v's subtree is
// the contiguous vranks [v, v + size(v)), so a subtree travels as one
// message holding its blocks in vrank order. An inner rank keeps the blocks
// of its subtree but its own in scratch; its own block goes straight between
// the user's buffer and the message. At the root the blocks sit in rank
// order, which is the vrank order rotated by the root: a message is cut where
// its vranks pass rank n - 1, and each piece goes straight to (Gather) or
// from (Scatter) its place in the user's buffer. No copy is made, in place or
// not, except the root's own block.
//
// Gather: each rank receives its children's subtrees, nearest child first,
// and sends each piece of its own subtree upward as soon as the receive that
// filled it has landed. Scatter: each rank receives its subtree and forwards
// each child's part, largest subtree first (it has the longest way to go).
#include "collectives/binomial_tree.h"
#include "collectives/message_pieces.h"
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

namespace {

struct BinomialTree : BinomialRanks {
  size_t block;

  // The message carrying subtree c, cut after c's own block (the receiver
  // keeps the rest in scratch) and where its vranks wrap past rank n - 1.
  std::vector<Piece> pieces(int c, size_t chunkBytes) const {
    const size_t bytes = static_cast<size_t>(size(c)) * block;
    const int wrap = n - root - c;  // vranks from c on before rank n - 1 is passed
    return cutMessage(bytes, chunkBytes, {block, wrap > 0 ? static_cast<size_t>(wrap) * block : 0});
  }

  // Where the bytes at `offset` of subtree c's message live at the root
  // (its recvbuff or sendbuff) and at an inner rank v (scratch).
  BufferRef atRoot(Buffer buffer, int c, size_t offset) const {
    const int v = c + static_cast<int>(offset / block);
    return {buffer, static_cast<size_t>(rankOf(v)) * block + offset % block};
  }
  size_t inScratch(int v, int c, size_t offset) const {
    return static_cast<size_t>(c - v - 1) * block + offset;
  }
};

// Which receive completes the scratch bytes up to `end`: receives fill the
// scratch in ascending, adjacent pieces.
struct Landed {
  size_t end;
  int64_t recv;
};
int64_t landedBy(const std::vector<Landed>& landed, size_t end) {
  auto it = std::lower_bound(landed.begin(), landed.end(), end,
                             [](const Landed& l, size_t e) { return l.end < e; });
  return it->recv;
}

BinomialTree treeOf(const CollectiveArgs& a) {
  return {{a.nranks, a.root}, a.count * typeSize(a.type)};
}

}  // namespace

Schedule binomialGather(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const BinomialTree t = treeOf(a);
  if (t.block == 0) return s;
  const int v = t.vrank(a.rank);
  if (v == 0 && !a.inPlace)
    s.prologue.push_back(
        {{Buffer::Send, 0}, {Buffer::Recv, t.atRoot(Buffer::Recv, 0, 0).offset}, t.block});
  if (v != 0) s.scratchBytes = static_cast<size_t>(t.size(v) - 1) * t.block;
  std::vector<Landed> landed;
  for (int c : t.children(v)) {
    for (const Piece& p : t.pieces(c, a.chunkBytes)) {
      const BufferRef dst = v == 0 ? t.atRoot(Buffer::Recv, c, p.offset)
                                   : BufferRef{Buffer::Scratch, t.inScratch(v, c, p.offset)};
      s.recvs.push_back({t.rankOf(c), dst, p.bytes, false, {}, 0});
      if (v != 0)
        landed.push_back({dst.offset + p.bytes, static_cast<int64_t>(s.recvs.size()) - 1});
    }
  }
  if (v == 0) return s;
  const int parent = t.rankOf(t.parent(v));
  for (const Piece& p : t.pieces(v, a.chunkBytes)) {
    if (p.offset < t.block) {
      s.sends.push_back({parent, {Buffer::Send, p.offset}, p.bytes, -1});
      continue;
    }
    const size_t from = p.offset - t.block;
    s.sends.push_back({parent, {Buffer::Scratch, from}, p.bytes, landedBy(landed, from + p.bytes)});
  }
  return s;
}

Schedule binomialScatter(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const BinomialTree t = treeOf(a);
  if (t.block == 0) return s;
  const int v = t.vrank(a.rank);
  if (v == 0 && !a.inPlace)
    s.prologue.push_back({t.atRoot(Buffer::Send, 0, 0), {Buffer::Recv, 0}, t.block});
  std::vector<Landed> landed;
  if (v != 0) {
    s.scratchBytes = static_cast<size_t>(t.size(v) - 1) * t.block;
    for (const Piece& p : t.pieces(v, a.chunkBytes)) {
      const bool own = p.offset < t.block;
      const BufferRef dst{own ? Buffer::Recv : Buffer::Scratch,
                          own ? p.offset : p.offset - t.block};
      s.recvs.push_back({t.rankOf(t.parent(v)), dst, p.bytes, false, {}, 0});
      if (!own) landed.push_back({dst.offset + p.bytes, static_cast<int64_t>(s.recvs.size()) - 1});
    }
  }
  const std::vector<int> children = t.children(v);
  for (auto c = children.rbegin(); c != children.rend(); ++c) {
    for (const Piece& p : t.pieces(*c, a.chunkBytes)) {
      if (v == 0) {
        s.sends.push_back({t.rankOf(*c), t.atRoot(Buffer::Send, *c, p.offset), p.bytes, -1});
        continue;
      }
      const size_t from = t.inScratch(v, *c, p.offset);
      s.sends.push_back(
          {t.rankOf(*c), {Buffer::Scratch, from}, p.bytes, landedBy(landed, from + p.bytes)});
    }
  }
  return s;
}

}  // namespace tidal::coll
