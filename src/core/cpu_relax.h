// A hint to the CPU that the caller is spinning on memory another core will
// write: it lowers power and frees pipeline resources for a sibling thread,
// and costs a few nanoseconds, not the microsecond a system call costs in a
// virtual machine.
#pragma once

namespace tidal {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

}  // namespace tidal
