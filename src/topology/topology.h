// What topology discovery learns about one host: its NUMA nodes, its GPUs and
// its NICs, each with the place it occupies on the PCIe tree.
//
// Plain data on purpose: sysfs_discovery.h fills it from /sys, topo_file.h
// writes and reads it as text, and every decision (path_class.h,
// nic_choice.h) is a pure function of it, so a recorded server layout tests
// the same code a real machine runs.
#pragma once

#include <string>
#include <vector>

namespace tidal::topo {

// A PCI function and the chain of bridges above it.
struct PciLocation {
  std::string busId;  // "0000:18:00.0", lower case, 4-digit domain
  // The components of the device's directory below sysfs devices/, from the
  // host bridge down: {"pci0000:15", "0000:15:01.0", ..., busId}. The host
  // bridge names the root complex; everything between it and busId is a
  // PCIe bridge (a root port or a switch port).
  std::vector<std::string> path;
  int numaNode = -1;      // -1: the firmware did not say
  std::string cpus;       // local_cpulist as read ("0-55,112-167"); "" unknown
  std::string linkSpeed;  // current_link_speed ("32.0 GT/s PCIe"); "" unknown
  std::string linkWidth;  // current_link_width ("16"); "" unknown

  const std::string& hostBridge() const { return path.front(); }
  bool operator==(const PciLocation&) const = default;
};

struct Gpu {
  PciLocation pci;
  bool operator==(const Gpu&) const = default;
};

enum class NicKind { Rdma, Ethernet };

// One network endpoint: an RDMA port (mlx5_0 port 1, an EFA device) or an
// Ethernet interface. A dual-port card is two NICs: two ports of one RDMA
// device, or two PCI functions with a device each.
struct Nic {
  std::string device;  // "mlx5_0", "rdmap79s0", "eth0"
  int port = 0;        // RDMA port number; 0 for Ethernet
  NicKind kind = NicKind::Rdma;
  PciLocation pci;

  // "mlx5_0:1" (the TIDAL_IB_HCA spelling) or "eth0".
  std::string name() const;
  bool operator==(const Nic&) const = default;
};

struct NumaNode {
  int id = 0;
  std::string cpus;  // cpulist
  bool operator==(const NumaNode&) const = default;
};

struct Topology {
  std::vector<NumaNode> numa;  // by id
  std::vector<Gpu> gpus;       // in PCI bus-id order (CUDA_DEVICE_ORDER=PCI_BUS_ID)
  std::vector<Nic> nics;       // RDMA first (by device, port), then Ethernet (by name)
  bool operator==(const Topology&) const = default;

  bool hasRdma() const;
};

// "00000000:18:00.0" (CUDA's spelling) -> "0000:18:00.0". Throws
// InvalidArgument naming `what` when the text is not a PCI bus id.
std::string normalizeBusId(const std::string& text, const std::string& what);
// True for "0000:18:00.0" (any domain width, hex digits).
bool looksLikeBusId(const std::string& text);

}  // namespace tidal::topo
