// A rank's view of the host grid that hierarchical schedules work on: H hosts
// of L ranks each, this rank at (host h, local index l), and its four ring
// neighbours (inside the host and across hosts at the same local index).
#pragma once

#include "collectives/ring_steps.h"

namespace tidal::coll {

struct HostGrid {
  explicit HostGrid(const Topology& topo)
      : t(topo),
        L(static_cast<int>(topo.hosts[0].size())),
        H(static_cast<int>(topo.hosts.size())),
        l(topo.myLocal),
        h(topo.myHost) {}

  int rankAt(int host, int local) const {
    return t.hosts[static_cast<size_t>(mod(host, H))][static_cast<size_t>(mod(local, L))];
  }
  int nextLocal() const { return rankAt(h, l + 1); }
  int prevLocal() const { return rankAt(h, l - 1); }
  int nextHost() const { return rankAt(h + 1, l); }
  int prevHost() const { return rankAt(h - 1, l); }

  const Topology& t;
  const int L, H, l, h;
};

}  // namespace tidal::coll
