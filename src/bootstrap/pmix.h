// The few PMIx calls the bootstrap needs, loaded with dlopen at first use.
//
// Why dlopen rather than linking libpmix: libtidal must load and work on
// hosts without PMIx (torchrun, TIDAL_COMM_ID), and linking would make
// libpmix.so.2 a hard dependency of every user. <pmix.h> is only used for
// the types, when the build found it (TIDAL_HAVE_PMIX).
#pragma once

#include <functional>
#include <string>

namespace tidal::pmix {

// True when the environment shows a PMIx server to talk to (mpirun/srun set
// PMIX_NAMESPACE and PMIX_SERVER_URI*).
bool serverAdvertised();

// Collective over the PMIx namespace: PMIx rank 0 calls `make` and publishes
// its result; after a fence every process returns that value. Initialises
// and finalises PMIx around the exchange (init/finalize are reference
// counted, so an MPI library using PMIx too is not disturbed). Throws
// InvalidUsage when PMIx is missing or fails, with the reason.
std::string shareFromRank0(const std::function<std::string()>& make, int timeoutSeconds);

}  // namespace tidal::pmix
