#include "topology/binding.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "core/error.h"

namespace tidal::topo {

namespace {

std::string cpuText(const CpuSet& cpus) {
  return fmt::format("{} {}", cpus.size() == 1 ? "CPU" : "CPUs", cpus.text());
}

RankBinding coreBinding(const CpuSet& allowed, size_t localRank) {
  if (allowed.empty()) return {};
  const CpuSet one = CpuSet::of({allowed.cpus()[localRank % allowed.size()]});
  return {one, cpuText(one)};
}

// The CPU-holding NUMA nodes' CPUs within `allowed`, in node order.
std::vector<std::pair<int, CpuSet>> nodesWithin(const Topology& t, const CpuSet& allowed) {
  std::vector<std::pair<int, CpuSet>> nodes;
  for (const NumaNode& n : t.numa) {
    if (n.cpus.empty()) continue;  // a memory-only node
    CpuSet mine = CpuSet::parse(n.cpus, fmt::format("NUMA node {} cpulist", n.id));
    mine = mine.intersection(allowed);
    if (!mine.empty()) nodes.emplace_back(n.id, std::move(mine));
  }
  return nodes;
}

}  // namespace

std::optional<BindPolicy> parseBindPolicy(std::string_view text) {
  for (const BindPolicy p :
       {BindPolicy::None, BindPolicy::Core, BindPolicy::Numa, BindPolicy::Gpu}) {
    if (text == bindPolicyName(p)) return p;
  }
  return std::nullopt;
}

const char* bindPolicyName(BindPolicy policy) {
  switch (policy) {
    case BindPolicy::None:
      return "none";
    case BindPolicy::Core:
      return "core";
    case BindPolicy::Numa:
      return "numa";
    case BindPolicy::Gpu:
      break;
  }
  return "gpu";
}

BindPolicy defaultBindPolicy(const Topology& t) {
  return t.gpus.empty() ? BindPolicy::Core : BindPolicy::Gpu;
}

std::vector<int> gpusOfLocalRanks(const Topology& t, int localRanks,
                                  const std::optional<std::string>& cudaVisibleDevices,
                                  std::string* note) {
  const int gpus = static_cast<int>(t.gpus.size());
  std::vector<int> order;
  bool byUuid = false;
  if (cudaVisibleDevices) {
    std::string_view rest = *cudaVisibleDevices;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (item.substr(0, 4) == "GPU-" || item.substr(0, 4) == "MIG-") {
        byUuid = order.empty();
        break;
      }
      int index = -1;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
      // CUDA ignores an entry that is not a GPU's index, and every one after it.
      if (ec != std::errc() || end != item.data() + item.size() || index < 0 || index >= gpus) {
        break;
      }
      order.push_back(index);
    }
  }
  if (!cudaVisibleDevices || byUuid) {
    if (byUuid && note != nullptr) {
      *note = fmt::format(
          "CUDA_VISIBLE_DEVICES={} names GPUs by UUID, which only the driver maps to bus ids: "
          "local rank i is taken to use GPU i in bus-id order",
          *cudaVisibleDevices);
    }
    order.clear();
    for (int g = 0; g < gpus; ++g) order.push_back(g);
  }
  std::vector<int> out(static_cast<size_t>(std::max(localRanks, 0)), -1);
  for (size_t i = 0; i < out.size() && i < order.size(); ++i) out[i] = order[i];
  return out;
}

std::vector<RankBinding> planBindings(const Topology& t, BindPolicy policy, const CpuSet& allowed,
                                      const std::vector<int>& gpuOfRank) {
  const size_t n = gpuOfRank.size();
  std::vector<RankBinding> out(n);
  if (policy == BindPolicy::None) return out;
  if (policy == BindPolicy::Numa) {
    const auto nodes = nodesWithin(t, allowed);
    for (size_t i = 0; i < n; ++i) {
      if (nodes.empty()) {
        out[i] = coreBinding(allowed, i);
        out[i].what += " (no NUMA node known)";
        continue;
      }
      const auto& [id, cpus] = nodes[i * nodes.size() / n];
      out[i] = {cpus, fmt::format("{} (NUMA node {})", cpuText(cpus), id)};
    }
    return out;
  }
  for (size_t i = 0; i < n; ++i) {
    out[i] = coreBinding(allowed, i);
    const int g = gpuOfRank[i];
    if (policy != BindPolicy::Gpu) continue;
    if (g < 0 || g >= static_cast<int>(t.gpus.size())) {
      out[i].what += " (no GPU)";
      continue;
    }
    const PciLocation& gpu = t.gpus[static_cast<size_t>(g)].pci;
    if (gpu.cpus.empty()) {
      out[i].what += fmt::format(" (the CPUs of GPU {} are unknown)", gpu.busId);
      continue;
    }
    const CpuSet near = CpuSet::parse(gpu.cpus, gpu.busId + " local_cpulist").intersection(allowed);
    if (near.empty()) {
      out[i].what += fmt::format(" (GPU {}'s CPUs {} are outside the allowed {})", gpu.busId,
                                 gpu.cpus, allowed.text());
      continue;
    }
    out[i] = {near, fmt::format("{} (GPU {})", cpuText(near), gpu.busId)};
  }
  return out;
}

bool initBindingEnabled(const std::string& setting) {
  if (setting == "auto") return true;
  if (setting == "none") return false;
  fail(tidalInvalidArgument,
       "TIDAL_BIND='{}' is not auto or none (auto binds an unbound rank with a GPU to its "
       "GPU's CPUs at init)",
       setting);
}

InitBinding decideInitBinding(bool enabled, const RankChoice& choice, const CpuSet& current,
                              int onlineCpus) {
  if (!enabled) return {{}, "not bound by Tidal: TIDAL_BIND=none"};
  if (onlineCpus <= 0 || static_cast<int>(current.size()) < onlineCpus) {
    return {{}, "bound before init, left as it is"};
  }
  if (choice.gpu < 0) return {{}, "not bound: no GPU"};
  if (choice.cpus.empty()) {
    return {{}, fmt::format("not bound: the CPUs of GPU {} are unknown", choice.gpuBusId)};
  }
  const CpuSet near = CpuSet::parse(choice.cpus, "the rank's CPU set").intersection(current);
  if (near.empty()) {
    return {{},
            fmt::format("not bound: GPU {}'s CPUs {} are not among the online ones",
                        choice.gpuBusId, choice.cpus)};
  }
  return {near, fmt::format("bound by Tidal to GPU {}'s CPUs (TIDAL_BIND=auto)", choice.gpuBusId)};
}

}  // namespace tidal::topo
