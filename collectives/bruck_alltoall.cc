// Bruck AllToAll: ceil(log2 n) rounds of one message each, for small blocks.
//
// Pairwise exchange (alltoall.cc) sends n - 1 messages per rank. When blocks
// are small, each message costs mostly its start-up (a system call, a
// doorbell, a round of the receiver's progress loop), and Bruck's algorithm
// trades those for log2(n) rounds that each carry about half the blocks.
//
// Name every block a rank holds by its distance j: at rank x, block j is the
// one bound for rank x - j (mod n). In round k (k = 0 .. ceil(log2 n) - 1) a
// rank sends every block whose distance has bit k set to rank - 2^k, as one
// message, and receives the same set of distances from rank + 2^k. A block
// thus moves 2^k closer for every bit k of its distance and has arrived after
// its highest bit; at every moment a rank holds exactly one block of each
// distance, so a distance names a block without ambiguity. This mirror image
// of the textbook version (which sends to rank + 2^k) makes the blocks that
// arrive for good in round k, distances [2^k, 2^(k+1)), land in ascending
// recvbuff order (block j comes from rank + j), so they go straight into
// recvbuff instead of needing a final rotation.
//
// The data that other rounds forward lives in scratch: for each round an
// outgoing message (its distances in ascending order) and a landing area for
// the blocks it receives that travel on. The prologue copies each of this
// rank's own blocks into the message of the first round that moves it; after
// round k's message has landed, each forwarded block is copied into the
// message of the next round that moves it (RecvCopy). Blocks that share their
// bits above k stay consecutive in both places, so these copies move runs of
// 2^k blocks. Round k's message waits for round k - 1's receive, and so for
// every earlier one: the rounds are sequential, as in every Bruck variant.
//
// Scratch holds about n log2(n) blocks, which is why this is for small ones;
// in place needs nothing extra, since the prologue has copied every block out
// of sendbuff before any receive is posted.
#include <bit>

#include "collectives/message_pieces.h"
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

namespace {

// Distances in [0, limit) with bit k set.
size_t withBit(size_t limit, int k) {
  const size_t d = size_t{1} << k;
  return (limit >> (k + 1)) * d + (limit % (2 * d) > d ? limit % (2 * d) - d : 0);
}

// Extends `last` by `c` when c continues it in both source and destination.
bool extend(CopyOp& last, const CopyOp& c) {
  if (last.src.buffer != c.src.buffer || last.dst.buffer != c.dst.buffer ||
      last.src.offset + last.bytes != c.src.offset || last.dst.offset + last.bytes != c.dst.offset)
    return false;
  last.bytes += c.bytes;
  return true;
}

void appendCopy(std::vector<CopyOp>& copies, const CopyOp& c) {
  if (copies.empty() || !extend(copies.back(), c)) copies.push_back(c);
}

void appendRecvCopy(std::vector<RecvCopy>& copies, int64_t afterRecv, const CopyOp& c) {
  if (copies.empty() || copies.back().afterRecv != afterRecv || !extend(copies.back().copy, c))
    copies.push_back({afterRecv, c});
}

}  // namespace

Schedule bruckAllToAll(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t block = a.count * typeSize(a.type);
  const int n = a.nranks;
  if (block == 0) return s;
  const auto un = static_cast<size_t>(n);
  const auto at = [block, n](int r) { return block * static_cast<size_t>(mod(r, n)); };
  if (!a.inPlace)
    s.prologue.push_back({{Buffer::Send, at(a.rank)}, {Buffer::Recv, at(a.rank)}, block});
  if (n == 1) return s;
  const int rounds = std::bit_width(un - 1);  // ceil(log2 n)

  // Scratch: every round's outgoing message, then every round's landing area.
  std::vector<size_t> outgoing(static_cast<size_t>(rounds)), landing(outgoing);
  size_t end = 0;
  for (int k = 0; k < rounds; ++k) {
    outgoing[static_cast<size_t>(k)] = end;
    end += withBit(un, k) * block;
  }
  for (int k = 0; k < rounds; ++k) {
    const size_t d = size_t{1} << k;
    landing[static_cast<size_t>(k)] = end;
    end += (withBit(un, k) - (std::min(2 * d, un) - d)) * block;  // all but the arriving ones
  }
  s.scratchBytes = end;
  // Where distance j sits in round k's outgoing message.
  const auto slot = [&](size_t j, int k) {
    return BufferRef{Buffer::Scratch, outgoing[static_cast<size_t>(k)] + withBit(j, k) * block};
  };

  for (size_t j = 1; j < un; ++j) {
    appendCopy(
        s.prologue,
        {{Buffer::Send, at(a.rank - static_cast<int>(j))}, slot(j, std::countr_zero(j)), block});
  }

  const size_t chunk = std::max<size_t>(a.chunkBytes, 1);
  int64_t previousRound = -1;  // the last receive of the round before
  for (int k = 0; k < rounds; ++k) {
    const size_t d = size_t{1} << k;
    const int to = mod(a.rank - static_cast<int>(d), n),
              from = mod(a.rank + static_cast<int>(d), n);
    const size_t bytes = withBit(un, k) * block;
    const size_t arriving = (std::min(2 * d, un) - d) * block;
    // The receiver's arriving blocks go to recvbuff blocks receiver + j,
    // which wrap past its last block at j = n - receiver (0: no cut).
    const auto wrapOf = [&](int receiver) {
      const size_t j = un - static_cast<size_t>(receiver);
      return j > d && (j - d) * block < arriving ? (j - d) * block : 0;
    };
    for (const Piece& p : cutMessage(bytes, chunk, {arriving, wrapOf(to)})) {
      s.sends.push_back({to,
                         {Buffer::Scratch, outgoing[static_cast<size_t>(k)] + p.offset},
                         p.bytes,
                         previousRound});
    }
    for (const Piece& p : cutMessage(bytes, chunk, {arriving, wrapOf(a.rank)})) {
      // Distance d + offset / block arrives from rank + that distance.
      const BufferRef dst =
          p.offset < arriving
              ? BufferRef{Buffer::Recv,
                          at(a.rank + static_cast<int>(d + p.offset / block)) + p.offset % block}
              : BufferRef{Buffer::Scratch, landing[static_cast<size_t>(k)] + p.offset - arriving};
      s.recvs.push_back({from, dst, p.bytes, false, {}, 0});
    }
    previousRound = static_cast<int64_t>(s.recvs.size()) - 1;
    // Blocks that travel on, into the message of the next round that moves them.
    size_t landed = 0;
    for (size_t j = 2 * d; j < un; ++j) {
      if ((j & d) == 0) continue;
      const int next = k + 1 + std::countr_zero(j >> (k + 1));
      appendRecvCopy(s.recvCopies, previousRound,
                     {{Buffer::Scratch, landing[static_cast<size_t>(k)] + landed * block},
                      slot(j, next),
                      block});
      ++landed;
    }
  }
  return s;
}

}  // namespace tidal::coll
