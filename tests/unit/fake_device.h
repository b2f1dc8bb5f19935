// The test double for the GPU, and nothing else: a host stand-in for one
// CUDA device, so that the code above the DeviceApi seam (stream ordering,
// the device schedule runner, host staging, the cuda_ipc protocol, the
// communicator's device path) runs in CI without a GPU.
//
// FakeGpu keeps CUDA's ordering rules, which is what those tests rely on:
//  - a stream is a FIFO; a background thread (the "GPU") runs each stream's
//    commands in order, streams independently of one another;
//  - recording an event captures the stream's position; a wait on an event
//    waits for the latest record made before the wait was enqueued (and for
//    nothing if it was never recorded);
//  - a stream waiting on a 32-bit value waits until (int32)(*flag - v) >= 0.
// Work runs later than it is enqueued (a kernel may be given a duration, in
// which the other streams go on), so code that forgets to wait for the GPU,
// or to make one stream wait for another, reads stale data and fails.
//
// "Device memory" is host memory; IPC export/import works between threads of
// one process only (the cuda_ipc transport then uses plain pointers anyway).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "cuda/device_api.h"
#include "reduce/reduce.h"

namespace tidal::test {

class FakeGpu {
 public:
  struct Event {
    std::atomic<uint64_t> recorded{0};   // records enqueued
    std::atomic<uint64_t> completed{0};  // records executed
  };
  struct Stream {
    std::deque<std::function<bool()>> commands;  // returns false: not runnable yet
    std::atomic<size_t> pending{0};
  };

  explicit FakeGpu(std::chrono::microseconds taskDelay = std::chrono::microseconds(0))
      : taskDelay_(taskDelay), legacy_(newStream()) {
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeGpu() {
    stop_ = true;
    thread_.join();
  }
  FakeGpu(const FakeGpu&) = delete;
  FakeGpu& operator=(const FakeGpu&) = delete;

  Stream* newStream() {
    std::lock_guard lock(mutex_);
    streams_.push_back(std::make_unique<Stream>());
    return streams_.back().get();
  }
  // What a NULL cudaStream_t means.
  Stream* legacyStream() const { return legacy_; }
  Stream* resolve(void* stream) const { return stream ? static_cast<Stream*>(stream) : legacy_; }
  Event* newEvent() {
    std::lock_guard lock(mutex_);
    events_.push_back(std::make_unique<Event>());
    return events_.back().get();
  }

  // A "kernel": runs on the GPU thread when the stream gets to it, after
  // `delay` (default: the GPU's taskDelay).
  void launch(Stream* s, std::function<void()> task,
              std::chrono::microseconds delay = std::chrono::microseconds(-1)) {
    if (delay.count() < 0) delay = taskDelay_;
    // The delay does not hold the GPU thread: other streams run meanwhile, as
    // they do on a GPU, which is what exposes a missing dependency.
    std::optional<std::chrono::steady_clock::time_point> due;
    enqueue(s, [delay, due, task = std::move(task)]() mutable {
      if (delay.count() > 0) {
        if (!due) due = std::chrono::steady_clock::now() + delay;
        if (std::chrono::steady_clock::now() < *due) return false;
      }
      task();
      return true;
    });
  }
  void record(Event* e, Stream* s) {
    const uint64_t generation = e->recorded.fetch_add(1) + 1;
    enqueue(s, [e, generation] {
      e->completed.store(generation);
      return true;
    });
  }
  void waitEvent(Stream* s, Event* e) {
    const uint64_t generation = e->recorded.load();
    enqueue(s, [e, generation] { return e->completed.load() >= generation; });
  }
  void waitValue(Stream* s, const std::atomic<uint32_t>* flag, uint32_t value) {
    enqueue(s, [flag, value] { return static_cast<int32_t>(flag->load() - value) >= 0; });
  }

  bool idle(Stream* s) const { return s->pending.load() == 0; }
  // Waits until `s` has run everything enqueued on it; false on timeout.
  bool synchronize(Stream* s, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!idle(s)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
  }
  // Freezes / resumes execution: lets a test see that a call returned before
  // the GPU did anything.
  void pause() { paused_ = true; }
  void resume() { paused_ = false; }
  uint64_t tasksRun() const { return tasksRun_.load(); }

 private:
  void enqueue(Stream* s, std::function<bool()> command) {
    std::lock_guard lock(mutex_);
    s->commands.push_back(std::move(command));
    s->pending.fetch_add(1);
  }

  void loop() {
    while (!stop_) {
      bool ran = false;
      if (!paused_) {
        std::vector<Stream*> streams;
        {
          std::lock_guard lock(mutex_);
          for (auto& s : streams_) streams.push_back(s.get());
        }
        for (Stream* s : streams) {
          for (;;) {
            std::function<bool()>* front = nullptr;
            {
              std::lock_guard lock(mutex_);
              // Checked here, under the lock that enqueue takes, and not only
              // once a round: a command enqueued after pause() returned must
              // not run, even by a round that began before it.
              if (paused_ || s->commands.empty()) break;
              front = &s->commands.front();  // deque: stable while only this thread pops
            }
            if (!(*front)()) break;
            {
              std::lock_guard lock(mutex_);
              s->commands.pop_front();
            }
            s->pending.fetch_sub(1);
            tasksRun_.fetch_add(1);
            ran = true;
          }
        }
      }
      if (!ran) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  std::chrono::microseconds taskDelay_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Event>> events_;
  Stream* legacy_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::atomic<uint64_t> tasksRun_{0};
  std::thread thread_;
};

// DeviceApi over a FakeGpu: one per communicator, like the real one.
class FakeDeviceApi final : public DeviceApi {
 public:
  // `live` counts this device's allocations not yet freed (shared, so a test
  // can check after the device is gone that nothing was left behind).
  // `kernelTime`: how long this device's copies and reductions take (the
  // GPU's default when negative), so that one rank's GPU can lag another's.
  explicit FakeDeviceApi(FakeGpu& gpu, int device = 0,
                         std::shared_ptr<std::atomic<int>> live = nullptr,
                         std::chrono::microseconds kernelTime = std::chrono::microseconds(-1))
      : gpu_(gpu),
        device_(device),
        engine_(gpu.newStream()),
        kernelTime_(kernelTime),
        live_(live ? std::move(live) : std::make_shared<std::atomic<int>>(0)) {}
  // As the real CudaDeviceApi: the engine stream drained, and every caller's
  // stream held behind flag_ past its wait before flag_ goes (a stream still
  // queued behind a hold reads it).
  ~FakeDeviceApi() override {
    gpu_.synchronize(engine_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (FakeGpu::Event* passed : passedHolds_) {
      while (passed->completed.load() < passed->recorded.load() &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  int device() const override { return device_; }
  std::string describe() const override { return fmt::format("fake GPU {}", device_); }

  OwnedMemory allocateDevice(size_t bytes) override { return allocate(bytes); }
  OwnedMemory allocatePinned(size_t bytes) override { return allocate(bytes); }
  IpcMemoryHandle exportMemory(void* base) override {
    IpcMemoryHandle h{};
    std::memcpy(h.data(), &base, sizeof base);
    return h;
  }
  OwnedMemory importMemory(const IpcMemoryHandle& handle, size_t bytes) override {
    void* p = nullptr;
    std::memcpy(&p, handle.data(), sizeof p);
    ++imports_;
    return OwnedMemory(p, bytes, nullptr);
  }
  bool reachPeer(int) override { return true; }
  void bindThread() override { ++bound_; }

  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    gpu_.launch(
        engine_, [dst, src, bytes] { std::memcpy(dst, src, bytes); }, kernelTime_);
  }
  void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
              tidalRedOp_t op, int divisor) override {
    if (count == 0) return;
    gpu_.launch(
        engine_, [=] { tidal::reduce(dst, a, b, count, type, op, divisor); }, kernelTime_);
  }
  uint64_t mark() override {
    FakeGpu::Event* e = gpu_.newEvent();
    gpu_.record(e, engine_);
    markers_.push_back(e);
    return markers_.size();
  }
  bool reached(uint64_t marker) override {
    if (failStream_) fail(tidalUnhandledCudaError, "fake GPU: the engine stream failed");
    if (marker == 0) return true;
    return markers_.at(marker - 1)->completed.load() > 0;
  }
  bool drain(std::chrono::milliseconds timeout) override {
    return gpu_.synchronize(engine_, timeout);
  }

  uint64_t captureInput(void* userStream) override {
    if (userStream == kBadStream) {
      fail(tidalInvalidArgument, "stream {} cannot be used on fake GPU {}", userStream, device_);
    }
    FakeGpu::Event* e = gpu_.newEvent();
    gpu_.record(e, gpu_.resolve(userStream));
    return reinterpret_cast<uint64_t>(e);
  }
  void holdStream(void* userStream, uint32_t seq) override {
    FakeGpu::Stream* s = gpu_.resolve(userStream);
    gpu_.waitValue(s, &flag_, seq);
    FakeGpu::Event* passed = gpu_.newEvent();
    gpu_.record(passed, s);
    passedHolds_.push_back(passed);
  }
  void waitForInput(uint64_t token) override {
    gpu_.waitEvent(engine_, reinterpret_cast<FakeGpu::Event*>(token));
  }
  void release(uint32_t seq) override { flag_.store(seq); }

  // A stream handle captureInput refuses, like an invalid cudaStream_t.
  static inline void* const kBadStream = reinterpret_cast<void*>(0xbad);
  // Makes reached() fail from now on, like a faulted CUDA stream.
  void failEngineStream() { failStream_ = true; }
  FakeGpu::Stream* engineStream() const { return engine_; }
  int liveAllocations() const { return live_->load(); }
  int imports() const { return imports_; }
  int threadsBound() const { return bound_.load(); }

 private:
  OwnedMemory allocate(size_t bytes) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0xcd, rounded);  // like uninitialised device memory: not zero
    live_->fetch_add(1);
    return OwnedMemory(p, bytes, [live = live_](void* q) {
      std::free(q);
      live->fetch_sub(1);
    });
  }

  FakeGpu& gpu_;
  int device_;
  FakeGpu::Stream* engine_;
  std::chrono::microseconds kernelTime_;
  std::deque<FakeGpu::Event*> markers_;
  std::vector<FakeGpu::Event*> passedHolds_;  // recorded after each hold's wait
  std::atomic<uint32_t> flag_{0};
  std::atomic<bool> failStream_{false};
  std::shared_ptr<std::atomic<int>> live_;
  int imports_ = 0;
  std::atomic<int> bound_{0};
};

}  // namespace tidal::test
