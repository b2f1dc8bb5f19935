// How far apart two PCI devices are, in the classes nvidia-smi topo -m and
// NCCL use, nearest first:
//
//   LOC   the same device
//   PIX   the same PCIe switch: each device is at most one bridge below the
//         lowest bridge they share (a switch is an upstream port with its
//         downstream ports), or the same root port
//   PXB   a shared bridge, but through more than one switch; the traffic does
//         not reach the root complex
//   PHB   the same host bridge (root complex), no bridge shared: the traffic
//         crosses the CPU's PCIe root
//   NODE  different host bridges of one NUMA node
//   SYS   different NUMA nodes: the traffic crosses the inter-socket link
//
// GPUDirect RDMA moves data between NIC and GPU memory directly; through the
// root complex that is often slower than staging in host memory, which is why
// it is used only up to a level (TIDAL_NET_GDR_LEVEL, PXB by default).
#pragma once

#include <string>

#include "topology/topology.h"

namespace tidal::topo {

enum class PathClass { LOC, PIX, PXB, PHB, NODE, SYS };

const char* className(PathClass c);

PathClass classify(const PciLocation& a, const PciLocation& b);

// TIDAL_NET_GDR_LEVEL: a class name (LOC, PIX, PXB, PHB, NODE, SYS) or
// NCCL's numeric form (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and 5 SYS). Throws
// InvalidArgument naming the variable and the value otherwise.
PathClass parseGdrLevel(const std::string& text);

// Whether GPUDirect RDMA is used on a path of class `c` under `level`: when c
// is at most the level. LOC disables it. PHB also admits NODE, because NCCL's
// PHB means "the same NUMA node, through the CPU" and has no NODE class.
bool gdrAllowed(PathClass c, PathClass level);

}  // namespace tidal::topo
