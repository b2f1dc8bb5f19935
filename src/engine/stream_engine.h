// Stream-ordered collectives: the communicator's progress thread.
//
// A collective on device buffers is ordered on the caller's CUDA stream, and
// the call only enqueues it (docs/architecture.md, "Stream ordering"):
//
//   caller's thread, inside the API call        progress thread, later
//   -----------------------------------        ----------------------------
//   seq = ++submitted
//   token = captureInput(stream)   [event]  ->  waitForInput(token): the
//   holdStream(stream, seq)     [GPU wait]      engine stream waits (on the
//   queue {seq, token, work}; return            GPU) for the caller's inputs
//                                               work(): runs the schedule,
//                                               copies and kernels on the
//                                               engine stream, until done
//                                               release(seq): the caller's
//                                               stream goes on
//
// Work runs in submission order, one item at a time, whatever stream each
// came from: every rank executes the same collectives in the same order,
// which is what keeps their schedules matched.
//
// Failure: the first error (a transport error, a timeout, a CUDA error, an
// abort) is handed to onFailure, which breaks the communicator; that error is
// what tidalCommGetAsyncError and the next call report. The failed item's
// stream, and the streams of every item behind it, are still released, with
// their outputs undefined: a stream held forever would hang the caller's GPU
// work with no way to report anything. Later items are not run. A stream is
// released only once the engine stream has finished what the failed run
// enqueued (bounded by the timeout), so no copy of ours touches the caller's
// buffers after the caller's stream has gone on.
//
// Nothing here blocks the host on a stream: captureInput and holdStream only
// enqueue. waitIdle (used before host-buffer calls and at destroy) blocks the
// caller's thread, bounded by the timeout and ended by abort.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "cuda/device_api.h"

namespace tidal {

class StreamEngine {
 public:
  // Runs on the progress thread; `aborted` turns true on abort(). Throws
  // tidal::Error on failure.
  using Work = std::function<void(const std::atomic<bool>& aborted)>;
  using FailureHandler = std::function<void(const Error&)>;

  // `device` must outlive the engine. `timeout` bounds waitIdle.
  StreamEngine(int rank, DeviceApi& device, FailureHandler onFailure, std::chrono::seconds timeout);
  // Finishes what is queued (bounded by the timeout, then aborts), stops.
  ~StreamEngine();
  StreamEngine(const StreamEngine&) = delete;
  StreamEngine& operator=(const StreamEngine&) = delete;

  // Enqueues `work` ordered on `userStream` (a cudaStream_t; nullptr: the
  // legacy default stream). Returns at once. Throws (and enqueues nothing)
  // when the stream cannot be used, or after a failure or abort. One caller
  // at a time (the communicator serialises its API calls).
  void submit(void* userStream, std::string what, Work work);

  // Blocks until every item submitted so far has finished. Throws the
  // failure's error if one happened, RemoteError on abort, Timeout when
  // nothing finished for the timeout.
  void waitIdle(const char* what);

  // Stops the item in progress (its work sees `aborted`), skips the rest and
  // releases every held stream. Safe from any thread.
  void abort();

  uint64_t submitted() const { return submitted_.load(); }
  uint64_t finished() const { return finished_.load(); }

 private:
  struct Item {
    uint32_t seq;
    uint64_t inputToken;
    std::string what;
    Work work;
  };
  void loop();
  void runItem(Item& item);
  // Keeps the first failure and hands it to onFailure_.
  void recordFailure(const Error& error, const std::string& what);

  int rank_;
  DeviceApi& device_;
  FailureHandler onFailure_;
  std::chrono::seconds timeout_;

  std::mutex mutex_;
  std::condition_variable wake_;        // the progress thread: an item or stop
  std::condition_variable finishedCv_;  // waitIdle: an item finished
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};
  std::string failureText_;  // under mutex_
  tidalResult_t failureCode_ = tidalSuccess;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> finished_{0};
  std::thread thread_;
};

}  // namespace tidal
