// The DeviceApi of a real GPU.
//
// The engine stream is created non-blocking: it must not synchronise with
// the legacy default stream, which a caller may have passed as its own
// stream and which is then held waiting for this very engine.
//
// Holding the caller's stream: a CUDA event cannot be waited on before it is
// recorded, and the engine's completion is known only later, on the progress
// thread. So the caller's stream waits instead on a 32-bit sequence number in
// page-locked host memory (cuStreamWaitValue32, reached through
// cudaGetDriverEntryPointByVersion: libtidal never links libcuda), which
// release() stores from the host. After each wait an event records that the
// stream got past it; the flag's memory is freed only once every such event
// has completed, since a stream still queued behind its wait reads it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_support.h"
#include "reduce/cuda/cuda_reduce.h"

namespace tidal::cuda {

namespace {

using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

WaitValueFn waitValueEntryPoint() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  // 12000: the stream memory operations that are enabled by default (the
  // "v2" API; the original ones needed a kernel-module parameter).
  const cudaError_t r = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000,
                                                         cudaEnableDefault, &status);
  if (r != cudaSuccess || status != cudaDriverEntryPointSuccess || fn == nullptr) {
    fail(tidalUnhandledCudaError,
         "the CUDA driver has no cuStreamWaitValue32 (needed to order collectives on streams): {}",
         r != cudaSuccess ? cudaGetErrorString(r) : "symbol not found");
  }
  return reinterpret_cast<WaitValueFn>(fn);
}

// Events without timing, reused: creating one costs a driver call.
class EventPool {
 public:
  ~EventPool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  cudaEvent_t take() {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void give(cudaEvent_t e) {
    std::lock_guard lock(mutex_);
    free_.push_back(e);
  }

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

class CudaDeviceApi final : public DeviceApi {
 public:
  explicit CudaDeviceApi(int device) : device_(device) {
    DeviceGuard guard(device_);
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    multiprocessors_ = prop.multiProcessorCount;
    description_ = fmt::format("CUDA device {} ({}, sm_{}{}, {} SMs)", device_, prop.name,
                               prop.major, prop.minor, multiprocessors_);
    waitValue_ = waitValueEntryPoint();
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    void* flag = nullptr;
    check(cudaHostAlloc(&flag, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc (stream-order flag)");
    flag_ = static_cast<uint32_t*>(flag);
    *flag_ = 0;
    void* deviceView = nullptr;
    check(cudaHostGetDevicePointer(&deviceView, flag_, 0), "cudaHostGetDevicePointer");
    flagOnDevice_ = reinterpret_cast<CUdeviceptr>(deviceView);
  }

  ~CudaDeviceApi() override {
    DeviceGuard guard(device_);
    if (!drain(std::chrono::seconds(10))) {
      TIDAL_WARN(Init, "{}: the engine stream did not finish within 10 s of teardown",
                 description_);
    }
    for (auto& [id, e] : markers_) events_.give(e);
    // Streams still queued behind a hold read the flag: free it only after
    // every hold has been passed, and leak it (a page) rather than free it
    // under a GPU that may still read it.
    bool passed = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    {
      std::lock_guard lock(holdMutex_);
      for (cudaEvent_t e : passedHolds_) {
        while (cudaEventQuery(e) == cudaErrorNotReady) {
          if (std::chrono::steady_clock::now() > deadline) {
            passed = false;
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (!passed) break;
      }
      for (cudaEvent_t e : passedHolds_) events_.give(e);
    }
    if (passed) {
      cudaFreeHost(flag_);
    } else {
      TIDAL_WARN(Init,
                 "{}: a stream still waits behind a collective after teardown; its flag is left "
                 "allocated",
                 description_);
    }
    cudaStreamDestroy(stream_);
  }

  int device() const override { return device_; }
  std::string describe() const override { return description_; }

  OwnedMemory allocateDevice(size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<size_t>(bytes, 1)),
          fmt::format("cudaMalloc of {} bytes on device {}", bytes, device_));
    return OwnedMemory(p, bytes, [](void* q) { cudaFree(q); });
  }

  OwnedMemory allocatePinned(size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    check(
        cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable | cudaHostAllocMapped),
        fmt::format("cudaHostAlloc of {} bytes", bytes));
    return OwnedMemory(p, bytes, [](void* q) { cudaFreeHost(q); });
  }

  IpcMemoryHandle exportMemory(void* base) override {
    DeviceGuard guard(device_);
    cudaIpcMemHandle_t h{};
    check(cudaIpcGetMemHandle(&h, base), "cudaIpcGetMemHandle");
    IpcMemoryHandle out{};
    static_assert(sizeof(h) == sizeof(out));
    std::memcpy(out.data(), &h, sizeof h);
    return out;
  }

  OwnedMemory importMemory(const IpcMemoryHandle& handle, size_t bytes) override {
    DeviceGuard guard(device_);
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, handle.data(), sizeof h);
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
    return OwnedMemory(p, bytes, [](void* q) { cudaIpcCloseMemHandle(q); });
  }

  bool reachPeer(int peerDevice) override {
    if (peerDevice == device_) return true;
    DeviceGuard guard(device_);
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device_, peerDevice) != cudaSuccess || !can) return false;
    const cudaError_t r = cudaDeviceEnablePeerAccess(peerDevice, 0);
    if (r == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
    return r == cudaSuccess || r == cudaErrorPeerAccessAlreadyEnabled;
  }

  void bindThread() override { check(cudaSetDevice(device_), "cudaSetDevice (progress thread)"); }

  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
          fmt::format("cudaMemcpyAsync of {} bytes on the engine stream", bytes));
  }

  void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
              tidalRedOp_t op, int divisor) override {
    const int r = gpu::launchReduce(dst, a, b, count, type, op, divisor, multiprocessors_, stream_);
    check(static_cast<cudaError_t>(r), fmt::format("reduction kernel launch ({} elements)", count));
  }

  uint64_t mark() override {
    cudaEvent_t e = events_.take();
    const cudaError_t r = cudaEventRecord(e, stream_);
    if (r != cudaSuccess) {
      events_.give(e);
      check(r, "cudaEventRecord on the engine stream");
    }
    markers_.emplace_back(++lastMarker_, e);
    return lastMarker_;
  }

  bool reached(uint64_t marker) override {
    while (!markers_.empty() && markers_.front().first <= marker) {
      const cudaError_t r = cudaEventQuery(markers_.front().second);
      if (r == cudaErrorNotReady) return false;
      check(r, "the engine stream (a copy or reduction failed on the GPU)");
      events_.give(markers_.front().second);
      markers_.pop_front();
    }
    return true;
  }

  bool drain(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const cudaError_t r = cudaStreamQuery(stream_);
      if (r != cudaErrorNotReady) return true;  // done, or failed: nothing more will run
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  uint64_t captureInput(void* userStream) override {
    DeviceGuard guard(device_);
    cudaEvent_t e = events_.take();
    const cudaError_t r = cudaEventRecord(e, static_cast<cudaStream_t>(userStream));
    if (r != cudaSuccess) {
      events_.give(e);
      cudaGetLastError();
      fail(tidalInvalidArgument, "stream {} cannot be used on device {}: {} ({})", userStream,
           device_, cudaGetErrorName(r), cudaGetErrorString(r));
    }
    return reinterpret_cast<uint64_t>(e);
  }

  void holdStream(void* userStream, uint32_t seq) override {
    DeviceGuard guard(device_);
    const auto stream = static_cast<cudaStream_t>(userStream);
    const CUresult r = waitValue_(reinterpret_cast<CUstream>(stream), flagOnDevice_, seq,
                                  CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) {
      fail(tidalUnhandledCudaError, "cuStreamWaitValue32 on stream {} failed (CUresult {})",
           userStream, static_cast<int>(r));
    }
    cudaEvent_t passed = events_.take();
    check(cudaEventRecord(passed, stream), "cudaEventRecord after the stream's wait");
    std::lock_guard lock(holdMutex_);
    // Reclaim the events of holds already passed, so the list stays short.
    while (!passedHolds_.empty() && cudaEventQuery(passedHolds_.front()) == cudaSuccess) {
      events_.give(passedHolds_.front());
      passedHolds_.pop_front();
    }
    passedHolds_.push_back(passed);
  }

  void waitForInput(uint64_t token) override {
    auto e = reinterpret_cast<cudaEvent_t>(token);
    const cudaError_t r = cudaStreamWaitEvent(stream_, e, 0);
    events_.give(e);  // a later record does not affect the wait already enqueued
    check(r, "cudaStreamWaitEvent (engine stream on the caller's stream)");
  }

  void release(uint32_t seq) override {
    std::atomic_ref<uint32_t>(*flag_).store(seq, std::memory_order_release);
  }

 private:
  int device_;
  int multiprocessors_ = 1;
  std::string description_;
  WaitValueFn waitValue_ = nullptr;
  cudaStream_t stream_ = nullptr;
  uint32_t* flag_ = nullptr;
  CUdeviceptr flagOnDevice_ = 0;
  EventPool events_;
  std::deque<std::pair<uint64_t, cudaEvent_t>> markers_;
  uint64_t lastMarker_ = 0;
  std::mutex holdMutex_;
  std::deque<cudaEvent_t> passedHolds_;
};

}  // namespace

std::unique_ptr<DeviceApi> createDeviceApi(int device) {
  if (!usable()) fail(tidalInvalidUsage, "CUDA device {}: {}", device, unavailableReason());
  return std::make_unique<CudaDeviceApi>(device);
}

}  // namespace tidal::cuda
