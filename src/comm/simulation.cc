// Communicator::simulate (tidalGroupSimulateEnd) and the recording its calls
// write to (simulation.h).
#include "comm/simulation.h"

#include "comm/communicator.h"
#include "tuner/link_model.h"
#include "tuner/schedule_time.h"

namespace tidal {

namespace simulation {

namespace {
// A thread's recording: a thread simulates one communicator at a time, and a
// call made on another thread (or on another communicator) runs as usual.
thread_local Recording* current = nullptr;
}  // namespace

Recording* recordingFor(const Communicator* comm) {
  return current != nullptr && current->comm == comm ? current : nullptr;
}

Scope::Scope(Recording& recording) : previous_(current) { current = &recording; }

Scope::~Scope() { current = previous_; }

}  // namespace simulation

double Communicator::simulate(const std::vector<std::function<void()>>& calls,
                              const std::vector<coll::P2pOp>& p2p, const CallMemory& p2pMemory) {
  simulation::Recording recording{this, {}};
  {
    const simulation::Scope scope(recording);
    for (const auto& call : calls) call();
    pointToPoint(p2p, p2pMemory);
  }
  // The calls run one after another, each until its last rank is done.
  const std::vector<int> hostIds = tuner::hostIdsOf(hostOfRank_);
  const tuner::LinkModel model = tuner::LinkModel::fromParams();
  double micros = 0;
  for (const auto& schedules : recording.calls) {
    micros += tuner::predictMicros(schedules, hostIds, model);
  }
  return micros;
}

}  // namespace tidal
