// A Topology as text: TIDAL_TOPO_DUMP_FILE writes what was detected,
// TIDAL_TOPO_FILE reads it back instead of sysfs, so a machine's layout can
// be sent with a bug report and replayed anywhere (tidal-info --topo).
//
//   tidal-topology 1                         header, first non-comment line
//   numa 0 0-55,112-167                      NUMA node: id, cpulist
//   gpu 0000:18:00.0                         a GPU, then its attributes:
//     path pci0000:15/0000:15:01.0/.../0000:18:00.0
//     numa_node 0
//     local_cpulist 0-55,112-167
//     link_speed 32.0 GT/s PCIe
//     link_width 16
//   nic mlx5_0 1 rdma                        device, port (0: Ethernet), kind
//     path ...                               same attributes as a GPU
//
// '#' starts a comment line; attribute lines are indented and belong to the
// device above them; a value is the rest of its line. Absent attributes keep
// their "unknown" value. Order: as Topology keeps it.
#pragma once

#include <string>

#include "topology/topology.h"

namespace tidal::topo {

std::string formatTopology(const Topology& t);
// Throws InvalidArgument naming `where` ("TIDAL_TOPO_FILE=/x") and the line.
Topology parseTopology(const std::string& text, const std::string& where);

void writeTopologyFile(const Topology& t, const std::string& file);
Topology readTopologyFile(const std::string& file);

}  // namespace tidal::topo
