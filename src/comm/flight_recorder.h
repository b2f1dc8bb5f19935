// A communicator's flight recorder: its last operations (what, sizes, state,
// times, and for a failed one the error, which names the peer and the step it
// waited on), kept so that a hang or a timeout can be explained after the
// fact: which ranks are behind, and where.
//
// Written by the calling thread inside execute() (one short locked update
// and two atomic stores per call, coarse clock reads); read by dumps: on a timeout when
// TIDAL_DUMP_ON_TIMEOUT=1, and on the signal named by TIDAL_DUMP_SIGNAL
// (every live communicator of the process). A dump is one JSON file per
// communicator and rank, named by TIDAL_DUMP_FILE (%h host, %p pid, %r rank);
// tools/tidal-flight merges the ranks' files and says who is behind.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/call_signature.h"

namespace tidal {

class FlightRecorder {
 public:
  enum class State : uint8_t { Running, Enqueued, Completed, Failed };

  // `capacity` entries (0: records nothing). `commId` names the
  // communicator identically on every rank (not its secret).
  FlightRecorder(size_t capacity, int rank, int nranks, std::string commId, std::string name);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // A new operation; returns its call number (1-based), the handle for end().
  // `signature` (may be null: Send/Recv, TIDAL_CHECK_CALLS=0) is kept as it
  // is and described only when dumped, so that recording formats nothing.
  uint64_t begin(const char* what, const CallSignature* signature);
  // Its outcome: error empty for success. `enqueued`: handed to the stream
  // progress thread (device buffers), whose completion is not followed here.
  void end(uint64_t call, bool enqueued, const std::string& error);

  std::string toJson() const;
  // Writes toJson() to TIDAL_DUMP_FILE's pattern; returns the path, or "" when
  // the file cannot be written (a WARN says why).
  std::string dump() const;

  bool enabled() const { return !ring_.empty(); }

  // Installs the TIDAL_DUMP_SIGNAL handler once per process (no-op when unset).
  static void armSignal();

 private:
  struct Entry {
    uint64_t call = 0;
    const char* what = "";
    bool signed_ = false;
    CallSignature signature;
    // Atomic, so that a successful end() (the common case) takes no lock:
    // the dump reads them under mutex_, the fields above it too.
    std::atomic<State> state{State::Running};
    int64_t startUs = 0;  // wall clock, microseconds since the epoch
    std::atomic<int64_t> endUs{0};
    std::string error;
  };

  mutable std::mutex mutex_;
  std::vector<Entry> ring_;
  uint64_t calls_ = 0;
  int rank_, nranks_;
  std::string commId_, name_;
};

}  // namespace tidal
