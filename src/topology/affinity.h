// The CPU affinity of the calling thread, read and set through the kernel
// (sched_getaffinity / sched_setaffinity). Linux binds threads, not processes:
// a new thread starts with its creator's set, so binding the thread that
// initialises a communicator also binds the threads it starts afterwards.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "topology/cpu_set.h"

namespace tidal::topo {

// The calling thread's CPUs; nullopt (errno set) when the kernel refuses.
std::optional<CpuSet> threadAffinity();

// The number of CPUs online (sysconf), 0 when unknown. A thread whose
// affinity holds that many CPUs is unbound: nothing narrowed it.
int onlineCpuCount();

// A kernel CPU mask built ahead of time, so that a forked child can apply it
// with a single system call and no allocation.
class AffinityMask {
 public:
  // Throws SystemError when the mask cannot be allocated; `cpus` not empty.
  explicit AffinityMask(const CpuSet& cpus);
  AffinityMask(AffinityMask&&) noexcept = default;
  AffinityMask& operator=(AffinityMask&&) noexcept = default;
  ~AffinityMask();

  // Binds the calling thread; returns 0 or the errno of sched_setaffinity.
  int apply() const noexcept;

 private:
  struct Free {
    void operator()(void* mask) const noexcept;
  };
  std::unique_ptr<void, Free> mask_;
  size_t bytes_ = 0;
};

}  // namespace tidal::topo
