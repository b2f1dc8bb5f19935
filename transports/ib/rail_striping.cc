#include "transports/ib/rail_striping.h"

#include <algorithm>

namespace tidal::ib {

RailPlan RailStriper::plan(size_t bytes) {
  RailPlan p;
  if (rails_ > 1 && bytes >= rails_ * kRailPieceMinBytes) {
    // share <= bytes / rails + align, so the last piece keeps at least
    // bytes / rails - (rails - 1) * align > 0 bytes for pieces this large.
    size_t share = (bytes + rails_ - 1) / rails_;
    share = (share + kRailPieceAlign - 1) / kRailPieceAlign * kRailPieceAlign;
    for (uint32_t r = 0; r < rails_; ++r) {
      const size_t offset = r * share;
      p.pieces[r] = {r, offset, std::min(share, bytes - offset)};
    }
    p.count = rails_;
    return p;
  }
  p.pieces[0] = {next_, 0, bytes};
  p.count = 1;
  next_ = (next_ + 1) % rails_;
  return p;
}

}  // namespace tidal::ib
