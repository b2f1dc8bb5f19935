// Command line of tidalrun: `tidalrun -np N [options] [--] PROGRAM ARGS...`.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tidalrun {

// Where each rank may run (--bind).
enum class Binding {
  None,  // inherit tidalrun's CPU set
  Core,  // local rank i: the i-th CPU tidalrun may run on (modulo their count)
};

struct Options {
  int nranks = 0;
  Binding bind = Binding::Core;
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
