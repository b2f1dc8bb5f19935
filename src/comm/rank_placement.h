// Where a rank sits on its host, decided once at communicator init, before
// any transport listens (src/topology/ has the rules; this applies them):
//
//  1. One bootstrap allGather of every rank's host identity and the PCI bus
//     id CUDA reports for its device (none without CUDA). A rank's local
//     rank is its position among the communicator's ranks of its host, by
//     rank; the launcher's environment is not consulted.
//  2. The topology (TIDAL_TOPO_FILE, else sysfs at TIDAL_TOPO_SYSFS) and the
//     rank's choice: the GPU with its bus id (without one, local rank i uses
//     GPU i in bus-id order), its NICs, their class, GDR and the CPU set.
//     Local rank 0 writes TIDAL_TOPO_DUMP_FILE.
//  3. TIDAL_BIND=auto binds the calling thread (and so the threads it starts
//     later, Tidal's progress thread among them) to the GPU's CPUs when
//     nothing bound it before; the pages of staging buffers allocated after
//     that are first touched there and so land on the GPU's NUMA node.
//  4. One INFO line names the local rank, GPU, NICs, class, GDR and why, the
//     CPU set and whether Tidal bound it; a SYS choice is a WARN.
//
// A topology that cannot be read or does not list the rank's GPU is a WARN
// and no placement (transports keep their defaults); a bad TIDAL_BIND or
// TIDAL_NET_GDR_LEVEL is an error, as a typo must not pass silently.
#pragma once

#include <memory>

#include "topology/placement.h"

namespace tidal {

class Bootstrap;

// Collective over `bootstrap`. `askCuda`: take the GPU from the CUDA device
// current on this thread (false when a test supplies the device). Returns
// nullptr when the topology was not usable.
std::shared_ptr<const topo::Placement> placeRank(Bootstrap& bootstrap, int rank, int nranks,
                                                 bool askCuda);

}  // namespace tidal
