// The topology a process runs on, as the parameters say to find it:
// TIDAL_TOPO_FILE (a dump) if set, else the sysfs tree at TIDAL_TOPO_SYSFS
// (/sys); TIDAL_TOPO_DUMP_FILE, if set, receives what was found.
#pragma once

#include <string>

#include "topology/nic_choice.h"
#include "topology/topology.h"

namespace tidal::topo {

struct Detected {
  Topology topology;
  std::string source;  // "sysfs /sys" or "TIDAL_TOPO_FILE=/path"
};

Detected detectTopology();

// ChoiceSettings with TIDAL_NET_GDR_LEVEL applied (validated); the rest at
// their defaults for the caller to fill in.
ChoiceSettings choiceSettingsFromParams();

}  // namespace tidal::topo
