// tidal-info --tuning (tidal_info_tuning.cc).
#pragma once

#include <cstddef>
#include <string>

struct TuningOptions {
  int nranks = 8;
  int hosts = 1;
  size_t maxBytes = size_t{1} << 30;
  std::string collective;  // empty: all
};

// Prints the table; returns the process exit status.
int printTuning(const TuningOptions& options);
