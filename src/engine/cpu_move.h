// Moving the calling thread off one CPU, for a busy-polling wait whose peer
// waits on that same CPU (Engine, "moving off a shared CPU").
//
// Two unbound ranks that the scheduler has put on one CPU cannot both run:
// while one busy-polls for the other's answer, the other waits for a time
// slice, and each hop costs the spinner's whole spin (50 us and more). The
// load balancer does not separate them when busy processes fill the other
// CPUs (each CPU has as many runnable tasks), and yielding instead keeps
// them together for good (docs/benchmarks.md). So the thread moves itself:
// its affinity mask without this CPU makes the kernel migrate it before
// sched_setaffinity returns, and the mask as it was is put back at once, so
// what the user or launcher set stays set and later balancing is free to
// move the thread again.
#pragma once

namespace tidal {

struct CpuMove {
  int from = -1;  // the CPU left; -1: no move
  int to = -1;    // the CPU the thread ran on right after
};

// Moves the calling thread off `cpu` onto another CPU of its affinity mask,
// then restores the mask. No move (from = -1) when the mask holds no other
// CPU or the kernel refuses; the mask is unchanged either way.
CpuMove moveOffCpu(int cpu);

}  // namespace tidal
