// Which CPUs a rank runs on: the policies of `tidalrun --bind` and the
// library's own binding at init (TIDAL_BIND), as pure decisions over a
// Topology and a CPU set, so that recorded server layouts test them.
//
// tidalrun's policies, for local rank i of n inside `allowed` (the CPUs
// tidalrun itself may use, as taskset and cgroup cpusets narrow them):
//   core  the (i mod |allowed|)-th CPU of allowed;
//   numa  the NUMA nodes with CPUs in allowed share the ranks in contiguous
//         blocks (rank i takes node i*m/n of m, so 8 ranks on 2 nodes put 0-3
//         on the first), and a rank gets its node's CPUs; core when the
//         topology knows no such node;
//   gpu   a rank with a GPU gets the GPU's local_cpulist (within allowed); a
//         rank without one, or whose GPU's CPUs are unknown or outside
//         allowed, gets core.
// The default is gpu on a host whose topology lists GPUs, core elsewhere.
//
// At init (TIDAL_BIND=auto) the library binds the calling thread to the
// rank's CPU set (nic_choice.h rule 5: its GPU's local_cpulist) only when
// nothing bound it yet, i.e. its affinity still holds every online CPU, and
// the rank has a GPU; TIDAL_BIND=none never binds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/cpu_set.h"
#include "topology/nic_choice.h"
#include "topology/topology.h"

namespace tidal::topo {

enum class BindPolicy { None, Core, Numa, Gpu };

// "none", "core", "numa", "gpu"; nullopt for anything else.
std::optional<BindPolicy> parseBindPolicy(std::string_view text);
const char* bindPolicyName(BindPolicy policy);
BindPolicy defaultBindPolicy(const Topology& t);

// The GPU (index into Topology::gpus, -1: none) each of `localRanks` ranks
// uses: local rank i takes the i-th GPU CUDA shows it. Without
// CUDA_VISIBLE_DEVICES (nullopt) that is GPU i in bus-id order; with it, the
// i-th index of its list, read as CUDA reads it (up to the first entry that
// is not a GPU's index; "" shows none). A list of UUIDs cannot be mapped
// without the driver: GPU i, and `note` says so.
std::vector<int> gpusOfLocalRanks(const Topology& t, int localRanks,
                                  const std::optional<std::string>& cudaVisibleDevices,
                                  std::string* note);

struct RankBinding {
  CpuSet cpus;       // empty: not bound
  std::string what;  // "CPU 3", "NUMA node 1", "GPU 0000:18:00.0", "CPU 3 (no GPU)"
};

// One binding per local rank (gpuOfRank.size() of them) under `policy`.
std::vector<RankBinding> planBindings(const Topology& t, BindPolicy policy, const CpuSet& allowed,
                                      const std::vector<int>& gpuOfRank);

// TIDAL_BIND: true for "auto", false for "none"; InvalidArgument naming the
// variable and the value otherwise.
bool initBindingEnabled(const std::string& setting);

struct InitBinding {
  CpuSet bindTo;    // empty: leave the thread as it is
  std::string why;  // for the INFO line
};

// The library's decision at init for the rank of `choice`, whose calling
// thread runs on `current` of `onlineCpus` CPUs.
InitBinding decideInitBinding(bool enabled, const RankChoice& choice, const CpuSet& current,
                              int onlineCpus);

}  // namespace tidal::topo
