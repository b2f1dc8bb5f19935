#include "topology/affinity.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "core/error.h"

namespace tidal::topo {

std::optional<CpuSet> threadAffinity() {
  // The kernel's mask may be larger than glibc's 1024-CPU cpu_set_t: grow
  // until sched_getaffinity accepts the size.
  for (size_t ncpus = 1024; ncpus <= (size_t{1} << 20); ncpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    if (set == nullptr) return std::nullopt;
    const size_t bytes = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) != 0) {
      const int err = errno;
      CPU_FREE(set);
      if (err == EINVAL) continue;
      errno = err;
      return std::nullopt;
    }
    std::vector<int> cpus;
    for (size_t c = 0; c < ncpus; ++c) {
      if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(static_cast<int>(c));
    }
    CPU_FREE(set);
    return CpuSet::of(std::move(cpus));
  }
  errno = EINVAL;
  return std::nullopt;
}

int onlineCpuCount() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 0;
}

void AffinityMask::Free::operator()(void* mask) const noexcept {
  CPU_FREE(static_cast<cpu_set_t*>(mask));
}

AffinityMask::AffinityMask(const CpuSet& cpus) {
  const size_t ncpus = cpus.empty() ? 1 : static_cast<size_t>(cpus.cpus().back()) + 1;
  mask_.reset(CPU_ALLOC(ncpus));
  if (!mask_) fail(tidalSystemError, "cannot allocate a CPU mask for CPUs {}", cpus.text());
  bytes_ = CPU_ALLOC_SIZE(ncpus);
  auto* set = static_cast<cpu_set_t*>(mask_.get());
  CPU_ZERO_S(bytes_, set);
  for (const int c : cpus.cpus()) CPU_SET_S(static_cast<size_t>(c), bytes_, set);
}

AffinityMask::~AffinityMask() = default;

int AffinityMask::apply() const noexcept {
  if (::sched_setaffinity(0, bytes_, static_cast<const cpu_set_t*>(mask_.get())) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace tidal::topo
