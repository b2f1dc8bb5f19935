// A watchdog for calls into a library that cannot be interrupted.
//
// Tidal's own waits poll, so each has a timeout and an abort path. A call
// into a provider library (libfabric) is different: it is meant to return at
// once, but if it does not, nothing in this process can make it. libfabric's
// shm provider is the case seen here: a sender takes a spin lock that lives
// in the receiver's shared memory, and a process SIGKILLed while it holds
// such a lock leaves it held forever, so every survivor that touches the
// region spins in fi_tsend or fi_cq_read with no way out.
//
// The watch turns that silent hang into a loud failure. The calling thread
// brackets each call with enter()/leave() (two counter stores, cheap enough
// for fi_cq_read in a polling loop); a thread of the watch's
// own samples the counter, and when one call has been inside for `limit`
// (TIDAL_TIMEOUT) it reports the call, the peer, and how long, then runs
// `onStuck`. The default ends the process with abort(): a thread spinning
// in a provider can never return an error, and a process that dies with a
// message lets the launcher (torchrun, srun, mpirun) end the job instead of
// holding its hosts until someone notices. PyTorch does the same to NCCL
// collectives it cannot abort (its watchdog, TORCH_NCCL_ASYNC_ERROR_HANDLING).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tidal {

class StuckCallWatch {
 public:
  // Receives the report ("rank 1: ofi shm: fi_tsend (peer rank 2) has
  // not returned after 5.0 s ..."); runs on the watch's thread.
  using OnStuck = std::function<void(const std::string& report)>;

  // `what` names the library for the report ("ofi shm"). `onStuck` empty
  // means: write the report to stderr and the log, then abort().
  StuckCallWatch(int rank, std::string what, std::chrono::milliseconds limit, OnStuck onStuck = {});
  ~StuckCallWatch();
  StuckCallWatch(const StuckCallWatch&) = delete;
  StuckCallWatch& operator=(const StuckCallWatch&) = delete;

  // Brackets one call. `call` must be a string literal; `peer` is the rank
  // the call concerns, or -1. Not nested, one thread at a time (the caller
  // holds its own lock around the call).
  // One writer (the caller's lock), so a plain load and store replace a
  // locked read-modify-write: this runs around every fi_cq_read of a
  // polling loop.
  void enter(const char* call, int peer) noexcept {
    call_.store(call, std::memory_order_relaxed);
    peer_.store(peer, std::memory_order_relaxed);
    bump();
  }
  void leave() noexcept { bump(); }

  // enter() now, leave() at the end of the scope (also when it throws).
  class Scope {
   public:
    Scope(StuckCallWatch& watch, const char* call, int peer = -1) noexcept : watch_(watch) {
      watch_.enter(call, peer);
    }
    ~Scope() { watch_.leave(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StuckCallWatch& watch_;
  };

 private:
  void bump() noexcept {
    calls_.store(calls_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void run();
  std::string report(std::chrono::milliseconds inside) const;

  const int rank_;
  const std::string what_;
  const std::chrono::milliseconds limit_;
  const OnStuck onStuck_;
  // Odd while a call is inside; each enter and leave adds one.
  std::atomic<uint64_t> calls_{0};
  std::atomic<const char*> call_{""};
  std::atomic<int> peer_{-1};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tidal
