// A rank's signal inbox for the one-sided calls (one_sided.h): one counter
// per origin rank, in a small shared page that the ranks of the same host
// map. tidalSignal and tidalPutSignal add one to the target's counter for
// their rank; tidalWaitSignal waits until counters reach what it expects.
//
// The owner creates the page as a memfd at communicator init; a peer on the
// same host maps it through /proc/<owner pid>/fd/<fd>, which the kernel
// allows under the same rule as the process_vm_writev that puts use (same
// user, ptrace permission), so a rank that can put can also signal. The page
// starts with a token derived from the communicator's secret and the owner's
// rank: a peer that opened the wrong file (a reused pid, another PID
// namespace) sees a mismatch and fails instead of writing into a stranger.
//
// Each counter has one writer (its origin rank), so a post is one atomic
// add. Waiting spins briefly, then sleeps on a futex word in the page that
// every post bumps; sleeps are cut into short slices so that an abort or the
// timeout is noticed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace tidal {

class SignalInbox {
 public:
  // The owner's inbox: a fresh page with `nranks` counters at zero.
  static SignalInbox create(int owner, int nranks, const std::string& token);
  // Maps rank `owner`'s inbox from its process `pid`, descriptor `fd`.
  // Throws SystemError naming `what` when the kernel refuses, RemoteError
  // when the page is not that rank's inbox of this communicator.
  static SignalInbox attach(int owner, int nranks, const std::string& token, int pid, int fd,
                            const std::string& what);

  SignalInbox() = default;
  SignalInbox(SignalInbox&& other) noexcept;
  SignalInbox& operator=(SignalInbox&& other) noexcept;
  SignalInbox(const SignalInbox&) = delete;
  SignalInbox& operator=(const SignalInbox&) = delete;
  ~SignalInbox();

  // The owner's descriptor, for peers to open (-1 on an attached inbox).
  int fd() const { return fd_; }
  // One more signal from `origin`; wakes a sleeping waiter.
  void post(int origin);
  // Signals from `origin` so far.
  uint64_t arrived(int origin) const;
  // Waits until done() is true, spinning up to `spin` first. Returns false
  // when `deadline` passes or stop() turns true first.
  bool waitUntil(const std::function<bool()>& done, std::chrono::microseconds spin,
                 std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& stop) const;

 private:
  struct Header;
  static size_t bytesFor(int nranks);
  Header* header() const;
  std::atomic<uint64_t>* counters() const;

  int fd_ = -1;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  int nranks_ = 0;
};

}  // namespace tidal
