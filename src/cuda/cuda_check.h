// Turns a failed CUDA runtime call into tidal::Error(UnhandledCudaError)
// whose text names the call's purpose, the CUDA error's name and its text.
// For the CUDA translation units of src/cuda only.
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "core/error.h"

namespace tidal::cuda {

inline void check(cudaError_t result, std::string_view what) {
  if (result == cudaSuccess) return;
  fail(tidalUnhandledCudaError, "{}: {} ({})", what, cudaGetErrorName(result),
       cudaGetErrorString(result));
}

// Restores the calling thread's current device when it goes out of scope:
// API calls made on the caller's thread must not change its device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) {
      cudaSetDevice(previous_);
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace tidal::cuda
