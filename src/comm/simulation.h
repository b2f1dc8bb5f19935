// tidalGroupSimulateEnd's recording: while a communicator simulates a group
// on this thread (Communicator::simulate, simulation.cc), its calls put every
// rank's schedule here instead of running.
#pragma once

#include <vector>

#include "collectives/schedule.h"

namespace tidal {
class Communicator;
}

namespace tidal::simulation {

struct Recording {
  const Communicator* comm;
  // One entry per call, in call order: every rank's schedule, by rank.
  std::vector<std::vector<coll::Schedule>> calls;
};

// The recording `comm` writes to on this thread; null when it is not
// simulating here (every call then runs).
Recording* recordingFor(const Communicator* comm);

// Makes `recording` the calling thread's for its communicator while it lives.
class Scope {
 public:
  explicit Scope(Recording& recording);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Recording* previous_;
};

}  // namespace tidal::simulation
