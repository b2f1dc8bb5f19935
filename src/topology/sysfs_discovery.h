// Reads a Topology from a sysfs tree: /sys on a real host, a fixture
// directory in tests (TIDAL_TOPO_SYSFS).
//
// What it reads, relative to the root:
//   bus/pci/devices/*              every PCI function (links into devices/pci*)
//     vendor, class                GPUs: vendor 0x10de, class 0x03xxxx
//     numa_node, local_cpulist     the device's NUMA node and its CPUs
//     current_link_speed/_width    the PCIe link
//   class/infiniband/*/device      RDMA devices (mlx5, EFA, rxe); ports/N
//   class/net/*/device             Ethernet interfaces; none: virtual (skipped)
//   devices/system/node/node*/cpulist
//
// Each device's place on the tree comes from resolving its link: the chain
// of directories below devices/ is host bridge, bridges, device.
#pragma once

#include <string>

#include "topology/topology.h"

namespace tidal::topo {

Topology discoverFromSysfs(const std::string& root);

}  // namespace tidal::topo
