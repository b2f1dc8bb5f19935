#include "topology/nic_choice.h"

#include <algorithm>

#include "core/error.h"
#include "topology/cpu_set.h"

namespace tidal::topo {

namespace {

// The NICs the decisions may pick from: RDMA where there is any, since a
// host with RDMA NICs sends over them; Ethernet only on hosts without.
std::vector<size_t> candidateNics(const Topology& t) {
  const bool rdma = t.hasRdma();
  std::vector<size_t> out;
  for (size_t i = 0; i < t.nics.size(); ++i) {
    if ((t.nics[i].kind == NicKind::Rdma) == rdma) out.push_back(i);
  }
  return out;
}

int gpuOfRank(const Topology& t, int localRank, const ChoiceSettings& s) {
  if (s.gpuBusIds.empty()) return localRank < static_cast<int>(t.gpus.size()) ? localRank : -1;
  if (localRank >= static_cast<int>(s.gpuBusIds.size()) || s.gpuBusIds[localRank].empty()) {
    return -1;
  }
  const std::string wanted =
      normalizeBusId(s.gpuBusIds[localRank], fmt::format("local rank {}'s GPU", localRank));
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    if (t.gpus[g].pci.busId == wanted) return static_cast<int>(g);
  }
  fail(tidalInvalidArgument,
       "local rank {}: its GPU {} (as CUDA reports it) is not among the {} NVIDIA GPU(s) the "
       "topology lists; check TIDAL_TOPO_SYSFS / TIDAL_TOPO_FILE",
       localRank, wanted, t.gpus.size());
}

struct Nearest {
  std::optional<PathClass> path;
  std::vector<size_t> nics;  // indices into Topology::nics, in NIC order
};

Nearest nearestToGpu(const Topology& t, int gpu) {
  Nearest best;
  for (const size_t n : candidateNics(t)) {
    const PathClass c = classify(t.gpus[gpu].pci, t.nics[n].pci);
    if (!best.path || c < *best.path) best = Nearest{c, {}};
    if (c == *best.path) best.nics.push_back(n);
  }
  return best;
}

// Rule 3: this rank's share of `group` ranks (this is member `index`).
std::vector<size_t> share(const std::vector<size_t>& nics, size_t members, size_t index) {
  if (nics.empty() || members <= 1) return nics;
  const size_t m = nics.size();
  if (m < members) return {nics[index % m]};
  // Contiguous blocks whose sizes differ by at most one.
  const size_t begin = index * m / members, end = (index + 1) * m / members;
  return {nics.begin() + static_cast<std::ptrdiff_t>(begin),
          nics.begin() + static_cast<std::ptrdiff_t>(end)};
}

// Rule 5 for a rank without a GPU.
void chooseWithoutGpu(const Topology& t, const ChoiceSettings& s, RankChoice& c) {
  CpuSet all;
  for (const auto& node : t.numa) all.add(CpuSet::parse(node.cpus, "NUMA node cpulist"));
  const CpuSet mine = s.rankCpus.empty() ? all : CpuSet::parse(s.rankCpus, "the rank's CPU set");
  c.cpus = mine.text();
  c.gdrReason = "no GPU";
  const auto nics = candidateNics(t);
  std::optional<int> node;
  if (!t.gpus.empty() && !mine.empty()) {
    for (const auto& n : t.numa) {
      if (mine.isSubsetOf(CpuSet::parse(n.cpus, "NUMA node cpulist"))) node = n.id;
    }
  }
  std::vector<size_t> picked;
  if (node) {
    for (const size_t n : nics) {
      if (t.nics[n].pci.numaNode == *node || t.nics[n].pci.numaNode < 0) picked.push_back(n);
    }
    c.path = PathClass::NODE;
    if (picked.empty()) {
      picked = nics;
      c.path = PathClass::SYS;
    }
  } else {
    picked = nics;  // no restriction: today's behaviour
  }
  if (picked.empty()) c.path.reset();
  for (const size_t n : picked) c.nics.push_back(t.nics[n].name());
  if (c.path == PathClass::SYS && !picked.empty()) {
    c.warnings.push_back(fmt::format(
        "local rank {}: no NIC on NUMA node {} of its CPUs {}; its NICs are across sockets (SYS)",
        c.localRank, *node, c.cpus));
  }
}

}  // namespace

GdrDecision gdrDecision(PathClass c, bool rdmaNic, PathClass level) {
  if (!rdmaNic) return {false, "NIC is not RDMA"};
  const bool on = gdrAllowed(c, level);
  return {on, fmt::format("{} {} TIDAL_NET_GDR_LEVEL={}", className(c),
                          on ? "is within" : "is beyond", className(level))};
}

std::optional<GdrDecision> gdrForNic(const Topology& t, const RankChoice& choice,
                                     const std::string& nic, PathClass level) {
  if (choice.gpu < 0 || choice.gpu >= static_cast<int>(t.gpus.size())) return std::nullopt;
  for (const Nic& n : t.nics) {
    if (n.name() != nic) continue;
    GdrDecision d =
        gdrDecision(classify(t.gpus[choice.gpu].pci, n.pci), n.kind == NicKind::Rdma, level);
    d.reason = fmt::format("GPU {} - {}: {}", choice.gpuBusId, nic, d.reason);
    return d;
  }
  return std::nullopt;
}

int effectiveLocalRanks(const Topology& t, const ChoiceSettings& s) {
  if (s.localRanks > 0) return s.localRanks;
  return std::max<int>(1, static_cast<int>(t.gpus.size()));
}

RankChoice chooseForRank(const Topology& t, int localRank, const ChoiceSettings& s) {
  const int ranks = effectiveLocalRanks(t, s);
  if (localRank < 0 || localRank >= ranks) {
    fail(tidalInvalidArgument, "local rank {} is outside 0..{} (local ranks: {})", localRank,
         ranks - 1, ranks);
  }
  RankChoice c;
  c.localRank = localRank;
  c.gpu = gpuOfRank(t, localRank, s);
  if (c.gpu < 0) {
    chooseWithoutGpu(t, s, c);
    return c;
  }
  const PciLocation& gpu = t.gpus[c.gpu].pci;
  c.gpuBusId = gpu.busId;
  c.cpus = gpu.cpus.empty() ? "" : CpuSet::parse(gpu.cpus, gpu.busId + " local_cpulist").text();
  const Nearest mine = nearestToGpu(t, c.gpu);
  c.path = mine.path;
  if (mine.nics.empty()) {
    c.gdrReason = "no NIC";
    c.warnings.push_back(fmt::format("local rank {}: GPU {} has no NIC", localRank, gpu.busId));
    return c;
  }
  // Rule 3: the local ranks whose GPUs got the same set at the same class.
  size_t members = 0, index = 0;
  for (int r = 0; r < ranks; ++r) {
    const int g = gpuOfRank(t, r, s);
    if (g < 0) continue;
    const Nearest theirs = nearestToGpu(t, g);
    if (theirs.path != mine.path || theirs.nics != mine.nics) continue;
    if (r == localRank) index = members;
    ++members;
  }
  for (const size_t n : share(mine.nics, members, index)) c.nics.push_back(t.nics[n].name());

  const PathClass cls = *mine.path;
  const GdrDecision gdr =
      gdrDecision(cls, t.nics[mine.nics.front()].kind == NicKind::Rdma, s.gdrLevel);
  c.gdr = gdr.on;
  c.gdrReason = gdr.reason;
  if (cls == PathClass::SYS) {
    c.warnings.push_back(
        fmt::format("local rank {}: GPU {} and its NICs are on different NUMA nodes (SYS): "
                    "traffic crosses the inter-socket link",
                    localRank, gpu.busId));
  }
  return c;
}

}  // namespace tidal::topo
