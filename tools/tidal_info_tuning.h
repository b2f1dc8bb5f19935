// tidal-info --tuning (tidal_info_tuning.cc).
#pragma once

#include <cstddef>
#include <string>

struct TuningOptions {
  int nranks = 8;
  int hosts = 1;
  size_t minBytes = 8;
  size_t maxBytes = size_t{1} << 30;
  size_t stepFactor = 8;   // each row's size times this is the next row's
  std::string collective;  // empty: all
};

// Prints the table; returns the process exit status.
int printTuning(const TuningOptions& options);
