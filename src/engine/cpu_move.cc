#include "engine/cpu_move.h"

#include <sched.h>

#include <algorithm>
#include <exception>
#include <iterator>
#include <optional>
#include <vector>

#include "topology/affinity.h"

namespace tidal {

CpuMove moveOffCpu(int cpu) {
  // The topology layer's affinity helpers: masks of any size, not only
  // glibc's 1024-CPU cpu_set_t. They allocate, which is fine at one move a
  // millisecond at most.
  const std::optional<topo::CpuSet> mask = topo::threadAffinity();
  if (cpu < 0 || !mask || !mask->contains(cpu)) return {};
  std::vector<int> others;
  std::copy_if(mask->cpus().begin(), mask->cpus().end(), std::back_inserter(others),
               [cpu](int c) { return c != cpu; });
  if (others.empty()) return {};
  try {
    const topo::AffinityMask original(*mask);
    if (topo::AffinityMask(topo::CpuSet::of(std::move(others))).apply() != 0) return {};
    // The kernel has migrated this thread by now: it may not run on `cpu`.
    const CpuMove move{cpu, sched_getcpu()};
    // The original mask again; the thread stays where it is, as that CPU is
    // in it. Should this fail, the thread keeps a mask one CPU short, which
    // is still a mask the user allowed.
    original.apply();
    return move;
  } catch (const std::exception&) {
    return {};  // a mask that could not be allocated: no move
  }
}

}  // namespace tidal
