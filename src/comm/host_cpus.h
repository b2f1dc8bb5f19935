// How many CPUs the communicator's ranks on this host may run on, together:
// the union of their affinity masks, gathered once at init after Tidal's own
// binding (rank_placement.h). Waits busy-poll only while a host's ranks fit
// the CPUs they can use (Communicator::chooseSpinMode): counting the
// machine's online CPUs instead, two ranks in a one-CPU cpuset (taskset -c 0,
// a container's cpuset) busy-polled against each other and each 8-byte
// AllReduce waited for the spinner's time slice (54-120 us against 1.7-2.6
// us yielding; docs/benchmarks.md).
#pragma once

namespace tidal {

class Bootstrap;

// Collective over `bootstrap`. The count of CPUs in the union of the masks of
// the ranks whose host identity is this rank's; 0 when some rank of this
// host could not read its mask or has a CPU beyond the record's 1024.
int cpusOfLocalRanks(Bootstrap& bootstrap, int nranks);

}  // namespace tidal
