// What the engine needs of one GPU, behind an interface.
//
// The CUDA implementation (cuda_device_api.cc) is the only code that talks to
// the CUDA runtime for collectives; tests/unit/fake_device.h implements the
// same interface on the host, so that the stream-ordering state machine, the
// device schedule runner, host staging and the cuda_ipc protocol run in CI
// on machines without a GPU. The interface is small on purpose: copies and
// reductions on one in-order "engine stream", markers to learn from the host
// that the stream got past a point, memory, IPC export/import, and the four
// operations that order the engine's work against the caller's stream.
//
// Threads: the caller's thread (inside an API call) uses captureInput and
// holdStream; the communicator's progress thread uses everything else.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "tidal/tidal.h"

namespace tidal {

// Memory owned through a release function (cudaFree, cudaFreeHost,
// cudaIpcCloseMemHandle, or a test double's free). Move-only.
class OwnedMemory {
 public:
  OwnedMemory() = default;
  OwnedMemory(void* data, size_t bytes, std::function<void(void*)> release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  OwnedMemory(OwnedMemory&& other) noexcept { *this = std::move(other); }
  OwnedMemory& operator=(OwnedMemory&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = other.data_;
      bytes_ = other.bytes_;
      release_ = std::move(other.release_);
      other.data_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  ~OwnedMemory() { reset(); }

  char* data() const { return static_cast<char*>(data_); }
  size_t size() const { return bytes_; }
  void reset() {
    if (data_ && release_) release_(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> release_;
};

// An exported device allocation another process can map (cudaIpcMemHandle_t
// is 64 opaque bytes).
using IpcMemoryHandle = std::array<uint8_t, 64>;

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;

  virtual int device() const = 0;
  // "CUDA device 0 (NVIDIA H200, sm_90, 132 SMs)", for logs.
  virtual std::string describe() const = 0;

  // --- Memory -------------------------------------------------------------
  // Device memory of this GPU.
  virtual OwnedMemory allocateDevice(size_t bytes) = 0;
  // Page-locked host memory that copies and kernels on this GPU reach
  // directly (staging for host transports).
  virtual OwnedMemory allocatePinned(size_t bytes) = 0;
  // IPC: the handle of an allocation made by allocateDevice, and the mapping
  // of another process's allocation (closed when the OwnedMemory goes).
  virtual IpcMemoryHandle exportMemory(void* base) = 0;
  virtual OwnedMemory importMemory(const IpcMemoryHandle& handle, size_t bytes) = 0;
  // Whether kernels on this GPU can read memory of `peerDevice` (same device,
  // or peer access, which this call enables).
  virtual bool reachPeer(int peerDevice) = 0;

  // Makes this device current on the calling thread; the progress thread
  // calls it once (kernels launch only on a stream of the current device).
  virtual void bindThread() = 0;

  // --- The engine stream: work runs in the order it is enqueued -----------
  // Any direction: device, peer or pinned host memory on either side.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // dst = a op b [/ divisor], reduce.h semantics, on the GPU.
  virtual void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                      tidalRedOp_t op, int divisor) = 0;
  // A point after everything enqueued so far; markers increase.
  virtual uint64_t mark() = 0;
  // Non-blocking: has the stream finished everything before `marker`?
  // Throws tidal::Error(UnhandledCudaError) if the stream failed.
  virtual bool reached(uint64_t marker) = 0;
  // Waits (polling, up to `timeout`) until the engine stream has finished
  // everything enqueued; false on timeout. For teardown only.
  virtual bool drain(std::chrono::milliseconds timeout) = 0;

  // --- Ordering against the caller's stream (a cudaStream_t) --------------
  // Caller's thread: records the point of `userStream` the collective must
  // wait for (its inputs are written before it). Returns a token for
  // waitForInput. Throws InvalidArgument when the stream is not usable.
  virtual uint64_t captureInput(void* userStream) = 0;
  // Caller's thread: `userStream` waits until release(seq) (wrap-safe
  // comparison), so work the caller enqueues after the collective sees its
  // result. Enqueued, never blocks the host.
  virtual void holdStream(void* userStream, uint32_t seq) = 0;
  // Progress thread: the engine stream waits (on the GPU) for the point
  // captured by `token`; the token is spent.
  virtual void waitForInput(uint64_t token) = 0;
  // Progress thread: lets every stream held at seq' <= seq go on.
  virtual void release(uint32_t seq) = 0;
};

}  // namespace tidal
