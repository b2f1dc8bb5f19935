// The stream-ordering state machine (engine/stream_engine.h) with the GPU
// played by the test double of fake_device.h: inputs written on the caller's
// stream before a collective are what it reads, work enqueued after it sees
// its result, the call never waits for the GPU, work runs in issue order,
// failures and aborts release every held stream and surface on the next call.
#include "engine/stream_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_device.h"

namespace tidal {
namespace {

using namespace std::chrono_literals;
using test::FakeDeviceApi;
using test::FakeGpu;

class StreamEngineTest : public ::testing::Test {
 protected:
  // The engine's copies take 1 ms each on the fake GPU; the caller's
  // "kernels" below take longer, so work that does not wait for them
  // overtakes them (the fake runs other streams meanwhile).
  FakeGpu gpu_{std::chrono::microseconds(1000)};
  static constexpr auto kUserKernel = std::chrono::milliseconds(20);
  FakeDeviceApi device_{gpu_};
  std::vector<Error> failures_;
  std::mutex failuresMutex_;
  std::unique_ptr<StreamEngine> engine_ = std::make_unique<StreamEngine>(
      0, device_,
      [this](const Error& e) {
        std::lock_guard lock(failuresMutex_);
        failures_.push_back(e);
      },
      std::chrono::seconds(5));

  // Work that copies n ints on the engine stream and waits for the copy, as
  // the device runner does.
  StreamEngine::Work copyWork(const int* in, int* out, size_t n) {
    return [this, in, out, n](const std::atomic<bool>&) {
      device_.copy(out, in, n * sizeof(int));
      const uint64_t m = device_.mark();
      while (!device_.reached(m)) std::this_thread::sleep_for(50us);
    };
  }
};

TEST_F(StreamEngineTest, ReadsInputsWrittenBeforeAndResultIsSeenAfter) {
  FakeGpu::Stream* stream = gpu_.newStream();
  std::vector<int> in(64, 0), out(64, -1), seen(64, -2);
  // A "kernel" on the caller's stream writes the input; it takes 1 ms.
  gpu_.launch(
      stream, [&] { std::fill(in.begin(), in.end(), 7); }, kUserKernel);
  engine_->submit(stream, "copy", copyWork(in.data(), out.data(), in.size()));
  // Another "kernel" reads the output after the collective (at once: it must
  // still come after the copy).
  gpu_.launch(
      stream, [&] { seen = out; }, std::chrono::microseconds(0));
  ASSERT_TRUE(gpu_.synchronize(stream));
  EXPECT_EQ(seen, std::vector<int>(64, 7));
  engine_->waitIdle("test");
  EXPECT_TRUE(failures_.empty());
  EXPECT_EQ(device_.threadsBound(), 1);  // the progress thread made the device current
}

TEST_F(StreamEngineTest, SubmitReturnsBeforeTheGpuRunsAnything) {
  FakeGpu::Stream* stream = gpu_.newStream();
  std::vector<int> in(8, 3), out(8, 0);
  gpu_.pause();
  const uint64_t before = gpu_.tasksRun();
  const auto start = std::chrono::steady_clock::now();
  engine_->submit(stream, "copy", copyWork(in.data(), out.data(), in.size()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(gpu_.tasksRun(), before);      // the GPU did nothing yet
  EXPECT_FALSE(gpu_.idle(stream));         // the caller's stream is held
  EXPECT_EQ(out, std::vector<int>(8, 0));  // and no result exists
  gpu_.resume();
  ASSERT_TRUE(gpu_.synchronize(stream));
  EXPECT_EQ(out, std::vector<int>(8, 3));
}

TEST_F(StreamEngineTest, WorkRunsInIssueOrderAcrossStreams) {
  FakeGpu::Stream* a = gpu_.newStream();
  FakeGpu::Stream* b = gpu_.newStream();
  std::vector<int> order;
  std::mutex m;
  // Stream a is busy for a while: b's call must still wait its turn behind a's.
  gpu_.launch(a, [] { std::this_thread::sleep_for(30ms); });
  for (int i = 0; i < 6; ++i) {
    engine_->submit(i % 2 ? b : a, "ordered", [&, i](const std::atomic<bool>&) {
      std::lock_guard lock(m);
      order.push_back(i);
    });
  }
  engine_->waitIdle("test");
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(gpu_.synchronize(a));
  EXPECT_TRUE(gpu_.synchronize(b));
}

TEST_F(StreamEngineTest, NullStreamIsTheLegacyStream) {
  std::vector<int> in(4, 9), out(4, 0);
  engine_->submit(nullptr, "copy", copyWork(in.data(), out.data(), in.size()));
  ASSERT_TRUE(gpu_.synchronize(gpu_.legacyStream()));
  EXPECT_EQ(out, std::vector<int>(4, 9));
}

TEST_F(StreamEngineTest, FailureReleasesStreamsAndSurfacesOnTheNextCall) {
  FakeGpu::Stream* stream = gpu_.newStream();
  std::atomic<int> laterRuns{0};
  std::atomic<bool> secondQueued{false};
  // The failure happens once the next call is queued behind it.
  engine_->submit(stream, "AllReduce", [&](const std::atomic<bool>&) {
    while (!secondQueued) std::this_thread::sleep_for(1ms);
    fail(tidalRemoteError, "rank 1 vanished");
  });
  engine_->submit(stream, "Broadcast", [&](const std::atomic<bool>&) { ++laterRuns; });
  secondQueued = true;
  // Both holds are released: work after them on the stream runs.
  bool after = false;
  gpu_.launch(stream, [&] { after = true; });
  ASSERT_TRUE(gpu_.synchronize(stream));
  EXPECT_TRUE(after);
  EXPECT_EQ(laterRuns.load(), 0);  // nothing runs after a failure
  {
    std::lock_guard lock(failuresMutex_);
    ASSERT_EQ(failures_.size(), 1u);
    EXPECT_EQ(failures_[0].code(), tidalRemoteError);
  }
  try {
    engine_->submit(stream, "Reduce", [](const std::atomic<bool>&) {});
    FAIL() << "submit after a failure must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 1 vanished"), std::string::npos) << e.what();
  }
  EXPECT_THROW(engine_->waitIdle("test"), Error);
}

TEST_F(StreamEngineTest, AbortEndsRunningWorkAndReleasesQueuedStreams) {
  FakeGpu::Stream* stream = gpu_.newStream();
  std::atomic<bool> started{false}, sawAbort{false};
  engine_->submit(stream, "stuck", [&](const std::atomic<bool>& aborted) {
    started = true;
    while (!aborted.load()) std::this_thread::sleep_for(1ms);
    sawAbort = true;
    fail(tidalRemoteError, "aborted");
  });
  engine_->submit(stream, "queued", [](const std::atomic<bool>&) { FAIL() << "must not run"; });
  while (!started) std::this_thread::sleep_for(1ms);
  std::thread([this] { engine_->abort(); }).join();
  ASSERT_TRUE(gpu_.synchronize(stream, 5s));  // both holds released
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!sawAbort && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(sawAbort);
  EXPECT_THROW(engine_->submit(stream, "late", [](const std::atomic<bool>&) {}), Error);
  engine_.reset();  // destruction after abort neither hangs nor throws
}

TEST_F(StreamEngineTest, DestructionFinishesQueuedWork) {
  FakeGpu::Stream* stream = gpu_.newStream();
  std::atomic<int> runs{0};
  for (int i = 0; i < 3; ++i) {
    engine_->submit(stream, "slow", [&](const std::atomic<bool>&) {
      std::this_thread::sleep_for(20ms);
      ++runs;
    });
  }
  engine_.reset();
  EXPECT_EQ(runs.load(), 3);
  EXPECT_TRUE(gpu_.synchronize(stream));
}

TEST_F(StreamEngineTest, WaitIdleTimesOutWhenNothingFinishes) {
  engine_ = std::make_unique<StreamEngine>(
      0, device_, [](const Error&) {}, std::chrono::seconds(1));
  FakeGpu::Stream* stream = gpu_.newStream();
  engine_->submit(stream, "stuck", [](const std::atomic<bool>& aborted) {
    while (!aborted.load()) std::this_thread::sleep_for(1ms);
  });
  try {
    engine_->waitIdle("tidalBarrier");
    FAIL() << "waitIdle must time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    EXPECT_NE(std::string(e.what()).find("TIDAL_TIMEOUT=1"), std::string::npos) << e.what();
  }
  engine_->abort();
  EXPECT_TRUE(gpu_.synchronize(stream, 5s));
}

TEST_F(StreamEngineTest, RefusedStreamLeavesNoGapInTheSequence) {
  EXPECT_THROW(engine_->submit(FakeDeviceApi::kBadStream, "bad", [](const std::atomic<bool>&) {}),
               Error);
  EXPECT_EQ(engine_->submitted(), 0u);
  // A gap would hold this stream forever (it waits for a sequence number that
  // the refused call took but never released).
  FakeGpu::Stream* stream = gpu_.newStream();
  std::vector<int> in(4, 5), out(4, 0);
  engine_->submit(stream, "copy", copyWork(in.data(), out.data(), in.size()));
  ASSERT_TRUE(gpu_.synchronize(stream, 5s));
  EXPECT_EQ(out, std::vector<int>(4, 5));
}

TEST_F(StreamEngineTest, EngineStreamFailureBecomesTheAsyncError) {
  FakeGpu::Stream* stream = gpu_.newStream();
  std::vector<int> in(4, 1), out(4, 0);
  device_.failEngineStream();
  engine_->submit(stream, "copy", copyWork(in.data(), out.data(), in.size()));
  ASSERT_TRUE(gpu_.synchronize(stream, 5s));
  std::lock_guard lock(failuresMutex_);
  ASSERT_EQ(failures_.size(), 1u);
  EXPECT_EQ(failures_[0].code(), tidalUnhandledCudaError);
}

}  // namespace
}  // namespace tidal
