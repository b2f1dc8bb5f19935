// One 8-byte receive from rank 1 that the scripted "peer" answers only at a
// set time, for tests of how the engine waits (spin, yield, sleep, CPU
// moves) without a second thread.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "collectives/schedule.h"
#include "engine/engine.h"
#include "scripted_connection.h"

namespace tidal::test {

// Options whose spin (10 s) outlasts any test's wait, so that the whole
// wait is spent spinning (busy-polling or yielding as `busyPoll` says).
inline EngineOptions longSpinOptions(bool busyPoll) {
  EngineOptions options{};
  options.chunkBytes = 1 << 20;
  options.stagingSlots = 2;
  options.spin = std::chrono::seconds(10);
  options.timeout = std::chrono::seconds(30);
  options.busyPoll = busyPoll;
  return options;
}

// Runs the receive on `engine`; it completes `after` from now. `script`
// may say more (where the peer waits); its completion fields are set here.
inline void runLateReceive(Engine& engine,
                           const std::shared_ptr<ScriptedConnection::Script>& script,
                           std::chrono::milliseconds after) {
  script->completeUpTo = UINT64_MAX;
  script->completeNotBefore = std::chrono::steady_clock::now() + after;
  ScriptedConnection recv(script, 1);
  engine.addRecvConnection(1, &recv);
  coll::Schedule schedule;
  schedule.recvs.push_back({1, {coll::Buffer::Recv, 0}, 8, false, {coll::Buffer::Send, 0}, 0});
  std::vector<char> out(8);
  engine.run(schedule, nullptr, out.data(), "Recv", nullptr, nullptr);
}

}  // namespace tidal::test
