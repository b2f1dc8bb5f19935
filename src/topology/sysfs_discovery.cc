#include "topology/sysfs_discovery.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/error.h"
#include "core/log.h"

namespace tidal::topo {

namespace fs = std::filesystem;

namespace {

std::string firstLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return "";  // absent, or a sysfs read error
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

int readInt(const fs::path& file, int fallback) {
  const std::string text = firstLine(file);
  try {
    return text.empty() ? fallback : std::stoi(text, nullptr, 0);
  } catch (const std::exception&) {
    return fallback;
  }
}

std::vector<std::string> sortedEntries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Resolves `link` (a device link or a bus/pci/devices entry) to the PCI
// function it is, or is below (a virtio device sits under its PCI function).
// nullopt when it leads nowhere under devices/pci*: a platform or virtual
// device.
std::optional<PciLocation> locate(const fs::path& root, const fs::path& link) {
  std::error_code ec;
  const fs::path real = fs::canonical(link, ec);
  const fs::path devices = fs::canonical(root / "devices", ec);
  if (ec) return std::nullopt;
  const fs::path relative = real.lexically_relative(devices);
  PciLocation loc;
  for (const auto& part : relative) {
    const std::string name = part.string();
    // "pci*" opens a host bridge; a second one (an Intel VMD domain) stays on the path.
    const bool hostBridge = name.rfind("pci", 0) == 0;
    if (!hostBridge && (loc.path.empty() || !looksLikeBusId(name))) break;
    loc.path.push_back(name);
  }
  if (loc.path.size() < 2) return std::nullopt;
  loc.busId = loc.path.back();
  fs::path dir = devices;
  for (const auto& p : loc.path) dir /= p;
  loc.numaNode = readInt(dir / "numa_node", -1);
  loc.cpus = firstLine(dir / "local_cpulist");
  loc.linkSpeed = firstLine(dir / "current_link_speed");
  loc.linkWidth = firstLine(dir / "current_link_width");
  return loc;
}

std::vector<Gpu> findGpus(const fs::path& root) {
  std::vector<Gpu> gpus;
  const fs::path bus = root / "bus/pci/devices";
  for (const auto& name : sortedEntries(bus)) {
    constexpr int kNvidia = 0x10de, kDisplayClass = 0x03;
    if (readInt(bus / name / "vendor", 0) != kNvidia) continue;
    // class is 0xCCSSPP; 0x03 is a display controller (VGA 0x0300, 3D 0x0302).
    // NVSwitches (0x0680) and the GPU's audio function (0x0403) are not GPUs.
    if ((readInt(bus / name / "class", 0) >> 16) != kDisplayClass) continue;
    if (auto loc = locate(root, bus / name)) gpus.push_back(Gpu{std::move(*loc)});
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.pci.busId < b.pci.busId; });
  return gpus;
}

std::vector<Nic> findRdma(const fs::path& root) {
  std::vector<Nic> nics;
  const fs::path dir = root / "class/infiniband";
  for (const auto& name : sortedEntries(dir)) {
    const auto loc = locate(root, dir / name / "device");
    if (!loc) {
      // Soft-RoCE (rxe) has no PCI device of its own: it has no place on the
      // tree, and any choice by distance would be invented.
      TIDAL_TRACE(Init, "topology: RDMA device {} is not a PCI device; left out", name);
      continue;
    }
    std::vector<int> ports;
    for (const auto& p : sortedEntries(dir / name / "ports")) {
      if (const int n = std::atoi(p.c_str()); n > 0) ports.push_back(n);
    }
    std::sort(ports.begin(), ports.end());
    if (ports.empty()) ports.push_back(1);
    for (const int port : ports) nics.push_back(Nic{name, port, NicKind::Rdma, *loc});
  }
  return nics;
}

std::vector<Nic> findEthernet(const fs::path& root, const std::vector<Nic>& rdma) {
  std::vector<Nic> nics;
  const fs::path dir = root / "class/net";
  for (const auto& name : sortedEntries(dir)) {
    std::error_code ec;
    // lo, bridges, veth, docker0, ifb: no device link, nothing on the bus.
    if (!fs::exists(dir / name / "device", ec)) continue;
    const auto loc = locate(root, dir / name / "device");
    if (!loc) continue;
    // The netdev of a RoCE port or an IPoIB interface is the RDMA NIC again.
    const bool isRdma = std::any_of(rdma.begin(), rdma.end(),
                                    [&](const Nic& n) { return n.pci.busId == loc->busId; });
    if (!isRdma) nics.push_back(Nic{name, 0, NicKind::Ethernet, *loc});
  }
  return nics;
}

std::vector<NumaNode> findNumaNodes(const fs::path& root) {
  std::vector<NumaNode> nodes;
  const fs::path dir = root / "devices/system/node";
  for (const auto& name : sortedEntries(dir)) {
    if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
    const std::string digits = name.substr(4);
    if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    nodes.push_back(NumaNode{std::stoi(digits), firstLine(dir / name / "cpulist")});
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return nodes;
}

}  // namespace

Topology discoverFromSysfs(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(fs::path(root) / "devices", ec)) {
    fail(tidalInvalidArgument,
         "TIDAL_TOPO_SYSFS={}: no devices/ directory there; it should be a sysfs root such as "
         "/sys",
         root);
  }
  Topology t;
  t.numa = findNumaNodes(root);
  t.gpus = findGpus(root);
  t.nics = findRdma(root);
  auto ethernet = findEthernet(root, t.nics);
  t.nics.insert(t.nics.end(), ethernet.begin(), ethernet.end());
  TIDAL_TRACE(Init, "topology from {}: {} NUMA node(s), {} GPU(s), {} NIC(s)", root, t.numa.size(),
              t.gpus.size(), t.nics.size());
  return t;
}

}  // namespace tidal::topo
