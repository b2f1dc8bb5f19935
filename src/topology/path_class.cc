#include "topology/path_class.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"

namespace tidal::topo {

namespace {

constexpr std::array<const char*, 6> kNames = {"LOC", "PIX", "PXB", "PHB", "NODE", "SYS"};

}  // namespace

const char* className(PathClass c) { return kNames[static_cast<size_t>(c)]; }

PathClass classify(const PciLocation& a, const PciLocation& b) {
  if (a.busId == b.busId) return PathClass::LOC;
  if (a.path.empty() || b.path.empty() || a.hostBridge() != b.hostBridge()) {
    // An unknown NUMA node (-1) on a side is taken as the same node: a
    // single-socket machine whose firmware does not fill numa_node in.
    const bool sameNode = a.numaNode < 0 || b.numaNode < 0 || a.numaNode == b.numaNode;
    return sameNode ? PathClass::NODE : PathClass::SYS;
  }
  // Bridges are the path between the host bridge (front) and the device
  // (back). Count the ones both devices sit under.
  const size_t aBridges = a.path.size() - 2, bBridges = b.path.size() - 2;
  size_t shared = 0;
  while (shared < aBridges && shared < bBridges && a.path[shared + 1] == b.path[shared + 1]) {
    ++shared;
  }
  if (shared == 0) return PathClass::PHB;
  // Below the lowest shared bridge a device within the same switch has at
  // most one more bridge (its downstream port); more means another switch.
  const bool oneSwitch = aBridges - shared <= 1 && bBridges - shared <= 1;
  return oneSwitch ? PathClass::PIX : PathClass::PXB;
}

PathClass parseGdrLevel(const std::string& text) {
  std::string upper = text;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (upper == kNames[i]) return static_cast<PathClass>(i);
  }
  // NCCL's legacy numbers predate NODE: 3 is PHB and 4 is SYS; 5 is accepted
  // as SYS too, as later NCCL numbering reaches it.
  static constexpr std::array<PathClass, 6> kNumeric = {PathClass::LOC, PathClass::PIX,
                                                        PathClass::PXB, PathClass::PHB,
                                                        PathClass::SYS, PathClass::SYS};
  if (upper.size() == 1 && upper[0] >= '0' && upper[0] <= '5') return kNumeric[upper[0] - '0'];
  fail(tidalInvalidArgument,
       "TIDAL_NET_GDR_LEVEL='{}' is not a level: use LOC, PIX, PXB, PHB, NODE, SYS or 0..5 "
       "(GPUDirect RDMA is used when GPU and NIC are at most that far apart)",
       text);
}

bool gdrAllowed(PathClass c, PathClass level) {
  if (level == PathClass::LOC) return false;
  if (level == PathClass::PHB) level = PathClass::NODE;
  return static_cast<int>(c) <= static_cast<int>(level);
}

}  // namespace tidal::topo
