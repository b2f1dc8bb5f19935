// Works out rank, size and rendezvous from whatever launched this process.
#pragma once

#include <optional>
#include <string>

#include "bootstrap/unique_id.h"

namespace tidal {

struct LaunchInfo {
  int rank = -1;
  int nranks = -1;
  int localRank = -1;  // -1 when the launcher does not say
  int localNranks = -1;
  std::string launcher;  // "tidal", "torchrun", "openmpi", "mpich", "slurm"
  // Set when the environment names a rendezvous (TIDAL_COMM_ID, MASTER_ADDR/PORT).
  std::optional<SocketAddress> root;
  // The rendezvous as written ("host:port") and the variables it came from,
  // for messages and to decide what rank 0 binds to.
  std::string rootText;
  std::string rootSource;
  // Set when TIDAL_SECRET is present.
  std::optional<Secret> secret;
};

// Reads the environment in the order of docs/env.md. Rank and size come from
// the first complete set of: TIDAL_RANK/TIDAL_NRANKS, torchrun (RANK,
// WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK/SIZE), MPICH/PMI (PMI_RANK,
// PMI_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS). The rendezvous address from
// TIDAL_COMM_ID, else MASTER_ADDR + MASTER_PORT (+ TIDAL_MASTER_PORT_OFFSET,
// since torch's own TCPStore holds MASTER_PORT). Throws InvalidUsage naming
// the variables it looked for when no rank/size is set, and InvalidArgument
// naming the variable and value when one does not parse.
LaunchInfo detectLaunch();

// Agrees on a unique id with the other ranks of this launch. With a
// rendezvous address, rank 0 starts the root there and everyone uses it; the
// secret is TIDAL_SECRET, else derived from the address and job variables
// (weak; logged at INFO). Without one, PMIx rank 0 creates a fresh id
// (random secret, root on localInterfaceAddress()) and publishes it through
// PMIx; the others read it. Throws InvalidUsage when neither is available.
UniqueId agreeOnUniqueId(const LaunchInfo& launch);

// The weak secret used when TIDAL_SECRET is absent (exposed for tests):
// a hash of the rendezvous text, nranks and the job-id variables set.
Secret derivedSecret(const std::string& rootText, int nranks);

}  // namespace tidal
