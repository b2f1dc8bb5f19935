// Schedule builders in one shape: (a rank's arguments, that rank's topology)
// -> that rank's schedule.
//
// The communicator builds its own rank's schedule this way, and whoever
// predicts a call's time (the tuner, tidalGroupSimulateEnd) builds every
// rank's from the same builder: a collective's arguments are the same on
// every rank but for `rank`, so one builder describes the whole call.
#pragma once

#include <functional>
#include <vector>

#include "collectives/schedule.h"

namespace tidal::coll {

using AnyRankBuilder = std::function<Schedule(const CollectiveArgs&, const Topology&)>;

// A builder that needs no topology, or one that does (the hierarchical schedules).
template <Schedule (*Build)(const CollectiveArgs&)>
inline constexpr auto flat = [](const CollectiveArgs& a, const Topology&) { return Build(a); };
template <Schedule (*Build)(const CollectiveArgs&, const Topology&)>
inline constexpr auto withHosts =
    [](const CollectiveArgs& a, const Topology& t) { return Build(a, t); };

// Every rank's schedule of one call: `a` with each rank in turn, each with
// its own topology (topologyOfRank[r], as Topology::fromHostKeys gives it).
inline std::vector<Schedule> everyRank(const AnyRankBuilder& build, CollectiveArgs a,
                                       const std::vector<Topology>& topologyOfRank) {
  std::vector<Schedule> out;
  out.reserve(topologyOfRank.size());
  for (size_t r = 0; r < topologyOfRank.size(); ++r) {
    a.rank = static_cast<int>(r);
    out.push_back(build(a, topologyOfRank[r]));
  }
  return out;
}

}  // namespace tidal::coll
