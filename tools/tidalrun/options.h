// Command line of tidalrun: `tidalrun -np N [options] [--] PROGRAM ARGS...`.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topology/binding.h"

namespace tidalrun {

struct Options {
  int nranks = 0;
  // Where each rank may run (--bind, rules in topology/binding.h); nullopt:
  // gpu on a host whose topology lists GPUs, core elsewhere.
  std::optional<tidal::topo::BindPolicy> bind;
  bool tagOutput = false;
  bool verbose = false;
  // -x NAME=VALUE, in command-line order; applied after tidalrun's own variables
  // so that a user can override any of them deliberately.
  std::vector<std::pair<std::string, std::string>> extraEnv;
  double timeoutSeconds = 0;  // 0: no limit
  double abortGraceSeconds = 10;
  double killGraceSeconds = 5;
  int port = 0;                      // 0: pick a free one
  std::vector<std::string> command;  // PROGRAM ARGS...
};

// Exit code tidalrun uses for errors on its command line.
inline constexpr int kUsageExitCode = 2;

// Parses argv. Returns the options, or nullopt with `exitCode` set when the
// process should exit right away: 0 after --help, kUsageExitCode after an error
// (message and usage already printed to stderr).
std::optional<Options> parseOptions(int argc, char** argv, int& exitCode);

}  // namespace tidalrun
