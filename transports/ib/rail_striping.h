// How a multi-rail ib connection spreads its transfers over its rails: a
// rule both ends compute from the sizes alone, so no header travels.
//
// The receiver posts exactly the sizes the sender posts, in the same order
// (transport.h), so a striper on each end fed the same sequence of sizes
// makes the same plan: the k-th piece a rail's sender writes is the k-th
// piece that rail's receiver waits for.
//
//   - A transfer of at least rails x kRailPieceMinBytes is cut into one
//     piece per rail, 4 KiB-aligned (every piece has bytes): a large chunk
//     moves over every NIC at once, so one chunk in flight already uses them
//     all.
//   - A smaller one goes whole to the next rail in turn (round-robin): with
//     several chunks in flight (staging slots) the rails share them, and a
//     small transfer pays for one rail's work requests, not for n.
//
// Pieces of 128 KiB keep each rail's own per-QP striping (64 KiB and more)
// and its clear-to-send round trip worth their cost.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "transports/ib/protocol.h"

namespace tidal::ib {

inline constexpr size_t kRailPieceMinBytes = 128 * 1024;
inline constexpr size_t kRailPieceAlign = 4096;

struct RailPiece {
  uint32_t rail = 0;
  size_t offset = 0;
  size_t bytes = 0;
};

struct RailPlan {
  uint32_t count = 0;  // pieces used
  std::array<RailPiece, kMaxRails> pieces{};
};

class RailStriper {
 public:
  // `rails` is 1..kMaxRails.
  explicit RailStriper(uint32_t rails) : rails_(rails) {}
  uint32_t rails() const { return rails_; }
  // The pieces of the next transfer, of `bytes` (0 allowed: one empty piece).
  RailPlan plan(size_t bytes);

 private:
  uint32_t rails_;
  uint32_t next_ = 0;  // rail of the next whole transfer
};

}  // namespace tidal::ib
