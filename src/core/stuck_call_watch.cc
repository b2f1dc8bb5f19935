#include "core/stuck_call_watch.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "core/log.h"

namespace tidal {

namespace {

// How often the watch looks: a quarter of the limit, so a stuck call is
// reported between 1 and 1.25 limits after it entered, but never more often
// than every 10 ms nor less often than every second.
std::chrono::milliseconds sampleEvery(std::chrono::milliseconds limit) {
  using std::chrono::milliseconds;
  return std::clamp(limit / 4, milliseconds(10), milliseconds(1000));
}

}  // namespace

StuckCallWatch::StuckCallWatch(int rank, std::string what, std::chrono::milliseconds limit,
                               OnStuck onStuck)
    : rank_(rank), what_(std::move(what)), limit_(limit), onStuck_(std::move(onStuck)) {
  thread_ = std::thread([this] { run(); });
}

StuckCallWatch::~StuckCallWatch() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string StuckCallWatch::report(std::chrono::milliseconds inside) const {
  const int peer = peer_.load(std::memory_order_relaxed);
  const std::string about = peer >= 0 ? fmt::format(" (peer rank {})", peer) : std::string();
  return fmt::format(
      "rank {}: {}: {}{} has not returned after {:.1f} s (TIDAL_TIMEOUT={:g} s). A call into the "
      "provider cannot be interrupted, so this process ends instead of hanging. With the shm "
      "provider this happens when a process of the job died while it held a lock in shared "
      "memory; see docs/troubleshooting.md",
      rank_, what_, call_.load(std::memory_order_relaxed), about,
      static_cast<double>(inside.count()) / 1000.0, static_cast<double>(limit_.count()) / 1000.0);
}

void StuckCallWatch::run() {
  using Clock = std::chrono::steady_clock;
  uint64_t seen = calls_.load(std::memory_order_acquire);
  Clock::time_point seenSince = Clock::now();
  bool reported = false;  // the call inside now was reported (onStuck_ set)
  std::unique_lock lock(mutex_);
  for (;;) {
    if (wake_.wait_for(lock, sampleEvery(limit_), [this] { return stop_; })) return;
    const uint64_t now = calls_.load(std::memory_order_acquire);
    const Clock::time_point at = Clock::now();
    if (now != seen) {
      // Something entered or left since the last look: whatever is inside
      // now entered no earlier than the last look.
      seen = now;
      seenSince = at;
      reported = false;
      continue;
    }
    const auto inside = std::chrono::duration_cast<std::chrono::milliseconds>(at - seenSince);
    if (seen % 2 == 0 || inside < limit_ || reported) continue;
    const std::string text = report(inside);
    if (onStuck_) {
      lock.unlock();
      onStuck_(text);
      lock.lock();
      reported = true;
      continue;
    }
    TIDAL_WARN(Net, "{}", text);
    std::fprintf(stderr, "TIDAL ERROR %s\n", text.c_str());
    std::fflush(stderr);
    log::logger().flush();
    // libfabric's psm2 provider loads libpsm2, whose SIGABRT handler prints
    // a backtrace and exits with status 1: the launcher must see the abort.
    std::signal(SIGABRT, SIG_DFL);
    std::abort();
  }
}

}  // namespace tidal
