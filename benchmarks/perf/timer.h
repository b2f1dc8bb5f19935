// Wall-clock stopwatch for the timed loops. steady_clock: immune to NTP steps.
#pragma once

#include <chrono>

namespace tidal::perf {

// Seconds on the same clock, from its own epoch: CLOCK_MONOTONIC on Linux,
// one clock for every process of a machine (--start-together relies on it).
inline double steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tidal::perf
