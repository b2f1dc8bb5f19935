#include "comm/close_when_all_done.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <iterator>
#include <mutex>
#include <thread>

#include <pthread.h>

#include "core/log.h"
#include "core/socket.h"

namespace tidal {

namespace {

using Clock = std::chrono::steady_clock;

// How often what is kept open is progressed while the barrier waits.
constexpr auto kProgressEvery = std::chrono::milliseconds(2);

struct PendingClose {
  std::unique_ptr<Bootstrap> bootstrap;
  std::vector<std::shared_ptr<KeptOpen>> held;
  Clock::time_point deadline;
  bool done = false;  // guarded by PendingCloses::mutex_
  std::thread thread;
};

// Every close still waiting in this process. One instance, destroyed at exit
// after every object created before it (libfabric's handle included), so the
// waits it joins there still have what they close.
class PendingCloses {
 public:
  PendingCloses() {
    instance_ = this;
    // The forking thread holds the lock across fork(), so the child's copy
    // is not left locked by a thread the child does not have.
    ::pthread_atfork([] { instance_->mutex_.lock(); }, [] { instance_->mutex_.unlock(); },
                     &PendingCloses::forgetInChild);
  }

  ~PendingCloses() {
    std::unique_lock lock(mutex_);
    for (auto& c : closes_) {
      if (!changed_.wait_until(lock, c->deadline, [&] { return c->done; })) {
        TIDAL_INFO(Init,
                   "rank {}: exiting before every rank destroyed the communicator (TIDAL_TIMEOUT "
                   "passed since this rank did); closing its links now",
                   c->bootstrap->rank());
        c->bootstrap->abort();
      }
    }
    std::vector<std::unique_ptr<PendingClose>> all;
    all.swap(closes_);
    lock.unlock();
    for (auto& c : all) c->thread.join();
  }

  void add(std::unique_ptr<PendingClose> close) {
    std::vector<std::unique_ptr<PendingClose>> finished;
    {
      std::lock_guard lock(mutex_);
      auto done = std::stable_partition(closes_.begin(), closes_.end(),
                                        [](const auto& c) { return !c->done; });
      std::move(done, closes_.end(), std::back_inserter(finished));
      closes_.erase(done, closes_.end());
      PendingClose* raw = close.get();
      raw->thread = std::thread([this, raw] { run(*raw); });
      closes_.push_back(std::move(close));
    }
    // The finished ones have only to return.
    for (auto& c : finished) c->thread.join();
  }

  size_t waiting() const {
    std::lock_guard lock(mutex_);
    return static_cast<size_t>(
        std::count_if(closes_.begin(), closes_.end(), [](const auto& c) { return !c->done; }));
  }

 private:
  void run(PendingClose& c) {
    std::atomic<bool> stop{false};
    std::thread progress([&] {
      try {
        while (!stop.load()) {
          for (auto& h : c.held) h->progress();
          std::this_thread::sleep_for(kProgressEvery);
        }
      } catch (const std::exception& e) {
        // The provider failed: nothing more can be delivered from here.
        TIDAL_INFO(Init, "rank {}: progressing a destroyed communicator's links failed: {}",
                   c.bootstrap->rank(), e.what());
      }
    });
    try {
      c.bootstrap->barrier();
      TIDAL_TRACE(Init, "rank {}: every rank destroyed the communicator; closing its links",
                  c.bootstrap->rank());
    } catch (const std::exception& e) {
      // A peer that failed, aborted or exited: nothing it could still
      // receive is worth waiting for.
      TIDAL_INFO(Init, "rank {}: closing the communicator's links without every rank's goodbye: {}",
                 c.bootstrap->rank(), e.what());
    }
    stop = true;
    progress.join();
    c.held.clear();
    std::lock_guard lock(mutex_);
    c.done = true;
    changed_.notify_all();
  }

  // A forked child has none of the threads: it must neither join them nor
  // close what its parent still holds, so it forgets them (a small leak).
  static void forgetInChild() {
    for (auto& c : instance_->closes_) (void)c.release();
    instance_->closes_.clear();
    instance_->mutex_.unlock();
  }

  static inline PendingCloses* instance_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<PendingClose>> closes_;
};

PendingCloses& pendingCloses() {
  static PendingCloses closes;
  return closes;
}

}  // namespace

void closeWhenAllDone(std::unique_ptr<Bootstrap> bootstrap,
                      std::vector<std::shared_ptr<KeptOpen>> held) {
  auto close = std::make_unique<PendingClose>();
  close->bootstrap = std::move(bootstrap);
  close->held = std::move(held);
  close->deadline = Clock::now() + std::chrono::seconds(timeoutSeconds());
  pendingCloses().add(std::move(close));
}

size_t closesWaiting() { return pendingCloses().waiting(); }

}  // namespace tidal
