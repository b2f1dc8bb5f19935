// Helpers of the GPU tests: the skip convention, CUDA error checks, and
// device memory that frees itself.
//
// Every GPU test binary first calls skipWithoutDevice(): on a machine with no
// usable CUDA device it prints "skipped: no CUDA device (<why>)" and exits
// with kSkipExitCode, which CTest reports as skipped (SKIP_RETURN_CODE), not
// as passed.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tidal::gputest {

inline constexpr int kSkipExitCode = 77;

inline void skipWithoutDevice() {
  int count = 0;
  const cudaError_t r = cudaGetDeviceCount(&count);
  if (r != cudaSuccess || count == 0) {
    std::printf("skipped: no CUDA device (%s)\n",
                r != cudaSuccess ? cudaGetErrorString(r) : "0 devices");
    std::fflush(stdout);
    std::exit(kSkipExitCode);
  }
}

// Aborts the test with the call, file and line when a CUDA call fails.
#define GPU_CHECK(call)                                                         \
  do {                                                                          \
    const cudaError_t gpuCheckResult_ = (call);                                 \
    if (gpuCheckResult_ != cudaSuccess) {                                       \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(gpuCheckResult_));                        \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) : bytes_(bytes) {
    GPU_CHECK(cudaMalloc(&data_, bytes > 0 ? bytes : 1));
  }
  ~DeviceMemory() { cudaFree(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  char* data() const { return static_cast<char*>(data_); }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

}  // namespace tidal::gputest
