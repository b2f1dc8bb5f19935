// The watchdog for provider calls (core/stuck_call_watch.h), with real
// threads: a call that stays inside past the limit is reported once, with
// the rank, the library, the call and the peer; calls that return are never
// reported, however long the caller runs; the default ends the process.
#include "core/stuck_call_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidal {
namespace {

using namespace std::chrono_literals;

// Collects the watch's reports.
struct Reports {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::string> texts;

  StuckCallWatch::OnStuck sink() {
    return [this](const std::string& text) {
      std::lock_guard lock(mutex);
      texts.push_back(text);
      arrived.notify_all();
    };
  }
  bool waitForOne(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return arrived.wait_for(lock, limit, [this] { return !texts.empty(); });
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return texts.size();
  }
};

TEST(StuckCallWatch, ACallInsidePastTheLimitIsReportedOnceWithWhatAndWho) {
  Reports reports;
  StuckCallWatch watch(3, "ofi shm", 100ms, reports.sink());
  const auto entered = std::chrono::steady_clock::now();
  {
    StuckCallWatch::Scope inside(watch, "fi_tsend", 2);
    ASSERT_TRUE(reports.waitForOne(5s)) << "no report after 5 s for a 100 ms limit";
    EXPECT_GE(std::chrono::steady_clock::now() - entered, 100ms);
    // Still inside: the watch must not report the same call again.
    std::this_thread::sleep_for(300ms);
  }
  EXPECT_EQ(reports.count(), 1u);
  const std::string text = reports.texts.front();
  EXPECT_NE(text.find("rank 3: ofi shm: fi_tsend (peer rank 2) has not returned after "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("TIDAL_TIMEOUT=0.1 s"), std::string::npos) << text;
}

TEST(StuckCallWatch, CallsThatReturnAreNeverReported) {
  Reports reports;
  StuckCallWatch watch(0, "ofi tcp;ofi_rxm", 50ms, reports.sink());
  // Ten limits of short calls back to back, as a polling loop makes them,
  // then ten limits with no call inside at all.
  const auto until = std::chrono::steady_clock::now() + 500ms;
  uint64_t calls = 0;
  while (std::chrono::steady_clock::now() < until) {
    StuckCallWatch::Scope inside(watch, "fi_cq_read");
    ++calls;
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(reports.count(), 0u) << reports.texts.front();
}

TEST(StuckCallWatch, ASecondStuckCallIsReportedAgain) {
  Reports reports;
  StuckCallWatch watch(1, "ofi shm", 50ms, reports.sink());
  for (int i = 0; i < 2; ++i) {
    StuckCallWatch::Scope inside(watch, i == 0 ? "fi_cq_read" : "fi_cancel");
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (reports.count() < static_cast<size_t>(i + 1) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(5ms);
    }
  }
  ASSERT_EQ(reports.count(), 2u);
  EXPECT_NE(reports.texts[0].find("fi_cq_read has not returned"), std::string::npos)
      << reports.texts[0];
  EXPECT_NE(reports.texts[1].find("fi_cancel has not returned"), std::string::npos)
      << reports.texts[1];
}

TEST(StuckCallWatchDeathTest, ByDefaultAStuckCallEndsTheProcessWithTheReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        StuckCallWatch watch(5, "ofi shm", 50ms);
        StuckCallWatch::Scope inside(watch, "fi_tsend", 6);
        std::this_thread::sleep_for(10s);
      },
      "TIDAL ERROR rank 5: ofi shm: fi_tsend \\(peer rank 6\\) has not returned after");
}

}  // namespace
}  // namespace tidal
