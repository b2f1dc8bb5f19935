// What communicator init decided about one rank's place on its host
// (src/comm/rank_placement.h): its local rank, the topology it read, and the
// topology's choice for it (GPU, NICs, class, GDR, CPU set). The transports
// get it through TransportContext::placement: ib uses the chosen NICs
// (striping over several) and lets TIDAL_NET_GDR_LEVEL turn GPUDirect RDMA
// off.
#pragma once

#include <string>

#include "topology/nic_choice.h"
#include "topology/path_class.h"
#include "topology/topology.h"

namespace tidal::topo {

struct Placement {
  int localRank = 0;   // among the communicator's ranks on this host, by rank
  int localRanks = 1;  // the communicator's ranks on this host
  Topology topology;
  std::string source;                   // "sysfs /sys", "TIDAL_TOPO_FILE=..."
  PathClass gdrLevel = PathClass::PXB;  // TIDAL_NET_GDR_LEVEL
  RankChoice choice;
};

}  // namespace tidal::topo
