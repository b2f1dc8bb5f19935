// Bruck's AllGather, for small blocks.
//
// When it wins: the ring (ring_allgather.cc) takes n - 1 dependent steps, so
// a small block pays n - 1 message start-ups. Here round k doubles what each
// rank holds: ceil(log2 n) rounds of one message each, for any n (3 instead
// of 7 at 8 ranks, 14 instead of 16,383 at 16,384). Every rank still
// receives n - 1 blocks in all, so the bandwidth term equals the ring's; what
// it gives up is the ring's neighbour-only traffic and its pipelining of
// large blocks across steps, which is why the communicator takes it for
// small blocks only (TIDAL_ALLGATHER_BRUCK_BYTES, src/comm/algorithm_choice.h).
//
// Rank r keeps the blocks it holds in scratch, rotated so that its own block
// comes first: scratch block j is block (r + j) mod n. Before round k it
// holds the first have = 2^k of them; it sends the first min(have, n - have)
// to rank r - 2^k and receives as many from rank r + 2^k into scratch blocks
// have onwards: they are that rank's first ones, blocks (r + have + i) mod n.
// So each round is one message (cut into chunks), whatever n is. After the
// last round, two local copies (the run up to block n - 1 and the run that
// wraps to block 0) put the blocks in their places in recvbuff. A round's
// sends wait for the previous round's last receive; the first round sends
// the own block straight from sendbuff.
#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

Schedule bruckAllGather(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks, r = a.rank;
  const size_t block = a.count * ts;
  const auto at = [block](int blocks) { return static_cast<size_t>(blocks) * block; };
  if (block == 0) return s;
  if (!a.inPlace) s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, at(r)}, block});
  if (n == 1) return s;
  s.scratchBytes = at(n);
  s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Scratch, 0}, block});
  const size_t chunk = chunkElems(a.chunkBytes, ts) * ts;
  int64_t lastRecv = -1;
  for (int have = 1; have < n; have *= 2) {
    const size_t bytes = at(std::min(have, n - have));
    const int to = mod(r - have, n), from = mod(r + have, n);
    for (size_t off = 0; off < bytes; off += chunk) {
      const BufferRef src =
          have == 1 ? BufferRef{Buffer::Send, off} : BufferRef{Buffer::Scratch, off};
      s.sends.push_back({to, src, std::min(chunk, bytes - off), lastRecv});
    }
    for (size_t off = 0; off < bytes; off += chunk) {
      lastRecv = static_cast<int64_t>(s.recvs.size());
      s.recvs.push_back(
          {from, {Buffer::Scratch, at(have) + off}, std::min(chunk, bytes - off), false, {}, 0});
    }
  }
  // Scratch blocks 1 .. n - 1 - r are blocks r + 1 .. n - 1; the rest wrap to 0 .. r - 1.
  if (r + 1 < n)
    s.recvCopies.push_back(
        {lastRecv, {{Buffer::Scratch, at(1)}, {Buffer::Recv, at(r + 1)}, at(n - 1 - r)}});
  if (r > 0)
    s.recvCopies.push_back({lastRecv, {{Buffer::Scratch, at(n - r)}, {Buffer::Recv, 0}, at(r)}});
  return s;
}

}  // namespace tidal::coll
