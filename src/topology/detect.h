// The topology a process runs on, as the parameters say to find it:
// TIDAL_TOPO_FILE (a dump) if set, else the sysfs tree at TIDAL_TOPO_SYSFS
// (/sys); TIDAL_TOPO_DUMP_FILE, if set and `writeDump`, receives what was
// found (one process per host should write it: local rank 0).
#pragma once

#include <string>

#include "topology/nic_choice.h"
#include "topology/topology.h"

namespace tidal::topo {

struct Detected {
  Topology topology;
  std::string source;  // "sysfs /sys" or "TIDAL_TOPO_FILE=/path"
};

Detected detectTopology(bool writeDump = true);

// ChoiceSettings with TIDAL_NET_GDR_LEVEL applied (validated); the rest at
// their defaults for the caller to fill in.
ChoiceSettings choiceSettingsFromParams();

}  // namespace tidal::topo
