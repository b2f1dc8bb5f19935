// cuda_support.h with the CUDA runtime (linked statically: with no driver the
// first call returns cudaErrorInsufficientDriver and usable() is false).
#include "cuda/cuda_support.h"

#include <cuda_runtime.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "cuda/cuda_check.h"

namespace tidal::cuda {

namespace {

struct Availability {
  int devices = 0;
  std::string reason;  // empty: usable
};

const Availability& availability() {
  static const Availability state = [] {
    Availability a;
    if (params::getBool("TIDAL_CUDA_DISABLE")) {
      a.reason = "TIDAL_CUDA_DISABLE=1";
      return a;
    }
    const cudaError_t r = cudaGetDeviceCount(&a.devices);
    if (r != cudaSuccess) {
      a.devices = 0;
      a.reason = r == cudaErrorNoDevice ? std::string("no CUDA device")
                                        : fmt::format("no usable CUDA driver ({}: {})",
                                                      cudaGetErrorName(r), cudaGetErrorString(r));
      cudaGetLastError();  // not sticky, but leave nothing behind
    } else if (a.devices == 0) {
      a.reason = "no CUDA device";
    }
    TIDAL_INFO(Init, "CUDA: {}",
               a.reason.empty() ? fmt::format("{} device(s)", a.devices) : "not used: " + a.reason);
    return a;
  }();
  return state;
}

}  // namespace

bool built() { return true; }
bool usable() { return availability().reason.empty(); }
const std::string& unavailableReason() { return availability().reason; }
int deviceCount() { return availability().devices; }

std::optional<int> currentDevice() {
  if (!usable()) return std::nullopt;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return std::nullopt;
  return device;
}

std::string pciBusId(int device) {
  if (!usable()) return {};
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return id;
}

void setCurrentDevice(int device) {
  if (!usable())
    fail(tidalInvalidUsage, "CUDA device {} requested, but {}", device, unavailableReason());
  if (device < 0 || device >= deviceCount()) {
    fail(tidalInvalidArgument, "CUDA device {} does not exist ({} device(s): 0..{})", device,
         deviceCount(), deviceCount() - 1);
  }
  check(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
}

void* allocateDeviceMemory(size_t bytes) {
  if (!usable()) fail(tidalInvalidUsage, "device memory requested, but {}", unavailableReason());
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), fmt::format("cudaMalloc({} bytes)", bytes));
  return p;
}

void freeDeviceMemory(void* pointer) {
  if (!usable()) fail(tidalInvalidUsage, "device memory freed, but {}", unavailableReason());
  check(cudaFree(pointer), fmt::format("cudaFree({})", pointer));
}

void copyToHost(void* dst, const void* deviceSrc, size_t bytes) {
  if (!usable()) fail(tidalInvalidUsage, "device memory read, but {}", unavailableReason());
  check(cudaMemcpy(dst, deviceSrc, bytes, cudaMemcpyDeviceToHost),
        fmt::format("cudaMemcpy({} bytes from device {})", bytes, deviceSrc));
}

PointerInfo classify(const void* pointer) {
  PointerInfo info;
  if (pointer == nullptr || !usable()) return info;
  cudaPointerAttributes attributes{};
  const cudaError_t r = cudaPointerGetAttributes(&attributes, pointer);
  if (r != cudaSuccess) {
    // Older drivers report unregistered host memory as an error.
    cudaGetLastError();
    return info;
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
      info.kind = MemoryKind::Cuda;
      info.device = attributes.device;
      break;
    case cudaMemoryTypeManaged:
      info.kind = MemoryKind::Cuda;
      info.managed = true;
      info.device = attributes.device;
      break;
    default:  // unregistered or page-locked host memory
      break;
  }
  return info;
}

}  // namespace tidal::cuda
