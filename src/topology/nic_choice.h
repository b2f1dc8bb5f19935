// Which NICs a local rank uses, whether GPUDirect RDMA is on, and which CPUs
// are the rank's: pure decisions over a Topology, so that recorded server
// layouts test them.
//
// The rules, in order:
//   1. Local rank i uses GPU i (PCI bus-id order, as CUDA_DEVICE_ORDER=
//      PCI_BUS_ID numbers them), or the GPU whose bus id the caller passes
//      (ChoiceSettings::gpuBusIds: what CUDA reports for the rank's device).
//   2. A rank with a GPU takes the NICs nearest that GPU: the best class
//      (path_class.h) over RDMA NICs, or over Ethernet ones where the host has
//      no RDMA NIC; ties keep every NIC of that class.
//   3. Local ranks that got the same NIC set at the same class share it
//      evenly: k ranks over m NICs give each rank m/k of them (in NIC order)
//      when m >= k, else rank j of the group takes NIC j mod m.
//   4. GPUDirect RDMA is on when the class is within TIDAL_NET_GDR_LEVEL
//      (PXB by default) and the NIC is an RDMA NIC.
//   5. A rank's CPU set is its GPU's local_cpulist. A rank without a GPU (more
//      local ranks than GPUs, or none) keeps its own CPU set and takes the
//      NICs of the NUMA node that set lies in; when the set spans nodes, is
//      unknown, or the host has no GPU at all, every NIC (no restriction).
//   6. A choice of class SYS (across sockets) carries a warning.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/path_class.h"
#include "topology/topology.h"

namespace tidal::topo {

struct ChoiceSettings {
  PathClass gdrLevel = PathClass::PXB;
  // Local ranks on this host; 0: one per GPU (1 on a host without GPUs).
  int localRanks = 0;
  // Local rank -> the bus id of its GPU, as CUDA reports it; empty: GPU i.
  std::vector<std::string> gpuBusIds;
  // The rank's own CPUs (its affinity), used when it has no GPU; "" unknown.
  std::string rankCpus;
};

struct RankChoice {
  int localRank = 0;
  int gpu = -1;                   // index into Topology::gpus; -1: none
  std::string gpuBusId;           // "" without a GPU
  std::vector<std::string> nics;  // Nic::name()s
  std::optional<PathClass> path;  // class of GPU (or CPU set) to the NICs; none: unrestricted
  bool gdr = false;
  std::string gdrReason;
  std::string cpus;  // cpulist the rank belongs on
  std::vector<std::string> warnings;
};

struct GdrDecision {
  bool on = false;
  std::string reason;  // "PHB is beyond TIDAL_NET_GDR_LEVEL=PXB", "NIC is not RDMA"
};

// Rule 4 for a path of class `c` to a NIC (RDMA or not).
GdrDecision gdrDecision(PathClass c, bool rdmaNic, PathClass level);

// Rule 4 between the rank's GPU (`choice`) and the NIC named `nic`
// ("mlx5_0:1"), which need not be one it was given (TIDAL_IB_HCA may pick
// another); the reason names both: "GPU 0000:18:00.0 - mlx5_4:1: SYS is
// beyond TIDAL_NET_GDR_LEVEL=PXB". nullopt when the rank has no GPU or the
// topology does not list the NIC (Soft-RoCE has no PCI device): no word.
std::optional<GdrDecision> gdrForNic(const Topology& t, const RankChoice& choice,
                                     const std::string& nic, PathClass level);

// Throws InvalidArgument for a local rank outside 0..localRanks-1 or a GPU
// bus id that is not in the topology.
RankChoice chooseForRank(const Topology& t, int localRank, const ChoiceSettings& s);

// The number of local ranks `s` means for `t` (rule for localRanks == 0).
int effectiveLocalRanks(const Topology& t, const ChoiceSettings& s);

}  // namespace tidal::topo
