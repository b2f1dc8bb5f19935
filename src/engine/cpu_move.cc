#include "engine/cpu_move.h"

#include <sched.h>

namespace tidal {

CpuMove moveOffCpu(int cpu) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof mask, &mask) != 0) return {};
  cpu_set_t elsewhere = mask;
  CPU_CLR(cpu, &elsewhere);
  if (CPU_COUNT(&elsewhere) == 0) return {};
  if (sched_setaffinity(0, sizeof elsewhere, &elsewhere) != 0) return {};
  // The kernel has migrated this thread by now: it may not run on `cpu`.
  const CpuMove move{cpu, sched_getcpu()};
  // The original mask again; the thread stays where it is, as that CPU is
  // in it. Should this fail, the thread keeps a mask one CPU short, which
  // is still a mask the user allowed.
  sched_setaffinity(0, sizeof mask, &mask);
  return move;
}

}  // namespace tidal
