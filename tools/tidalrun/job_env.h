// What each rank finds in its environment: the contract between tidalrun and
// tidalCommInitFromEnv (and torchrun-style programs).
#pragma once

#include <string>
#include <vector>

#include "tidalrun/options.h"

namespace tidalrun {

// The rendezvous every rank of one job shares.
struct JobIdentity {
  std::string address = "127.0.0.1";
  int port = 0;
  std::string secret;  // 32 lowercase hex digits
};

// A port on 127.0.0.1 that is free now, chosen at random below the kernel's
// ephemeral range (ip_local_port_range; bind(0) where that range starts too
// low), and released so that rank 0 can listen there. A process that binds
// the same port by number could still take it in between; --port is the way
// out when that matters. Throws std::system_error.
int pickFreePort();

// 128 random bits from getrandom(), as 32 hex digits. Throws std::system_error.
std::string makeSecret();

// The complete environment ("NAME=VALUE" strings) for one rank: `inherited`
// (normally environ), then tidalrun's variables, then the user's -x settings;
// later settings replace earlier ones of the same name.
std::vector<std::string> rankEnvironment(const Options& options, const JobIdentity& job, int rank,
                                         char* const* inherited);

}  // namespace tidalrun
