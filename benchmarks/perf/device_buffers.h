// The device side of -W cuda: device mirrors of the benchmark's host
// buffers, the stream collectives are ordered on, and copies between them.
//
// The harness keeps preparing inputs and checking results on host memory
// (data.h); with -W cuda it uploads both buffers before a checked call,
// passes the device addresses at the same offsets, and downloads after. A
// build without CUDA has the same interface and refuses -W cuda.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace tidal::perf {

class DeviceBuffers {
 public:
  // `bytes` each for send and receive, on the current device. nullStream:
  // order on the legacy default stream instead of a new one. Throws
  // std::runtime_error without CUDA or on a CUDA failure.
  static std::unique_ptr<DeviceBuffers> create(size_t bytes, bool nullStream);
  virtual ~DeviceBuffers() = default;

  virtual char* send() const = 0;
  virtual char* recv() const = 0;
  virtual void* stream() const = 0;
  // Host <-> device copies of the first `bytes` of both buffers (blocking).
  virtual void upload(const void* hostSend, const void* hostRecv, size_t bytes) = 0;
  virtual void download(void* hostSend, void* hostRecv, size_t bytes) = 0;
  // Waits until everything enqueued on the stream has finished.
  virtual void synchronize() = 0;
  // "cuda device 0 NVIDIA H200", for the "# Using devices" lines.
  virtual std::string describe() const = 0;
};

}  // namespace tidal::perf
