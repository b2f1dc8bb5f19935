// Shared arithmetic of the ring schedules: how a buffer is cut into one
// segment per rank and each segment into pipeline chunks, and how a ring step
// is emitted so that the chunk a rank forwards at step g waits for exactly the
// chunk it received at step g - 1.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "collectives/schedule.h"

namespace tidal::coll {

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// Element range of segment j when `count` elements are split over n ranks as
// evenly as possible (the first count % n segments get one more).
struct Range {
  size_t begin;
  size_t size;
};
inline Range segment(size_t count, int n, int j) {
  const size_t base = count / static_cast<size_t>(n);
  const size_t extra = count % static_cast<size_t>(n);
  const size_t uj = static_cast<size_t>(j);
  return {uj * base + std::min(uj, extra), base + (uj < extra ? 1 : 0)};
}

inline size_t chunkElems(size_t chunkBytes, size_t typeSize) {
  return std::max<size_t>(1, chunkBytes / typeSize);
}

// `count` elements cut into consecutive chunks of at most `chunk` elements
// (the pipeline steps of the chains and trees).
inline std::vector<Range> chunksOf(size_t count, size_t chunk) {
  std::vector<Range> out;
  for (size_t off = 0; off < count; off += chunk)
    out.push_back({off, std::min(chunk, count - off)});
  return out;
}

// Which receive of a ring delivered each (member segment, piece, chunk):
// lets a later phase start a chunk as soon as the chunk it needs has landed
// instead of waiting for the whole earlier phase.
struct RingReceipts {
  size_t pieces = 1, chunks = 0;
  std::vector<int64_t> index;  // [member][piece][chunk] -> receive index, -1: never received
  int64_t of(int member, int piece, size_t chunk) const {
    return index[(static_cast<size_t>(member) * pieces + static_cast<size_t>(piece)) * chunks +
                 chunk];
  }
};

// Emits the ring: for g in [0, steps), send segment sendSegment(g) to the right
// and receive segment sendSegment(g) - 1 from the left, chunk by chunk.
// `makeSend` and `makeRecv` fill in buffers for (step, element range);
// dependencies are wired here: send (g, c) waits for recv (g - 1, c). Empty
// chunks are skipped on both sides consistently because both compute the
// same ranges.
//
// By default member j's segment is the j-th of nranks even splits of
// [base, base + count). Hierarchical AllGather and ReduceScatter need
// segments that are scattered over the buffer: there `piece(j, p)` gives
// piece p of member j's segment (pieceCount pieces, the same shape for every
// member), and each piece is chunked and forwarded on its own.
struct RingEmitter {
  int nranks, steps;
  size_t count;  // elements in the whole (segmented) buffer
  size_t chunk;  // elements per chunk
  std::function<int(int step)> sendSegment;
  std::function<SendOp(int step, Range r)> makeSend;
  std::function<RecvOp(int step, Range r)> makeRecv;
  // For rings over part of a buffer (hierarchical phases): the region starts
  // at element `base`, and step 0 sends wait for receive `firstDependency`
  // of an earlier phase (-1: none), or, where `firstStepDependency` is set,
  // for the receive it names for (member, piece, chunk).
  size_t base = 0;
  int64_t firstDependency = -1;
  std::function<int64_t(int member, int piece, size_t chunk)> firstStepDependency{};
  int pieceCount = 1;
  std::function<Range(int member, int piece)> piece{};

  RingReceipts emit(Schedule& s) const;

 private:
  Range pieceOf(int member, int p) const;
};

}  // namespace tidal::coll
