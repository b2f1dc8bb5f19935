// tidalrun: starts N ranks of a program on this host for Tidal (or torchrun-
// style) jobs. See job.h for how the job is run and options.h for the command
// line.
#include <cstdio>
#include <exception>

#include "tidalrun/job.h"
#include "tidalrun/options.h"

int main(int argc, char** argv) try {
  int exitCode = 0;
  auto options = tidalrun::parseOptions(argc, argv, exitCode);
  if (!options) return exitCode;
  tidalrun::Job job(std::move(*options));
  return job.run();
} catch (const std::exception& e) {
  // Out of memory and the like; the children die with us (PR_SET_PDEATHSIG).
  std::fprintf(stderr, "tidalrun: %s\n", e.what());
  return 1;
}
