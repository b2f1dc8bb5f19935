// How one logical message is cut into the transfers that carry it.
//
// A message that gathers several blocks (a Bruck round, a binomial subtree)
// is one run of bytes on the sender's side but may land in several places on
// the receiver's: a transfer must not cross such a boundary. It must not
// exceed a chunk either (bounded staging). Sender and receiver cut the same
// message with the same arguments, so the sequence of transfer sizes on the
// connection agrees on both ends.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace tidal::coll {

struct Piece {
  size_t offset;  // bytes from the start of the message
  size_t bytes;
};

// Cuts [0, bytes) at every multiple of chunkBytes and at each of
// `boundaries` (offsets outside (0, bytes) are ignored).
inline std::vector<Piece> cutMessage(size_t bytes, size_t chunkBytes,
                                     std::initializer_list<size_t> boundaries) {
  const size_t chunk = std::max<size_t>(chunkBytes, 1);
  std::vector<Piece> pieces;
  for (size_t off = 0; off < bytes;) {
    size_t end = std::min(bytes, (off / chunk + 1) * chunk);
    for (size_t b : boundaries)
      if (b > off && b < end) end = b;
    pieces.push_back({off, end - off});
    off = end;
  }
  return pieces;
}

}  // namespace tidal::coll
