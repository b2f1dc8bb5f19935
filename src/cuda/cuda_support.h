// Whether this process can use CUDA, where a pointer lives, and the factory
// of the real DeviceApi. Plain C++ (no CUDA types), so the C API and the
// communicator include it in every build; without CUDA (TIDAL_WITH_CUDA=OFF,
// no_cuda.cc) everything answers "no CUDA" and every pointer is host memory.
//
// "No driver" and "no device" are not errors: usable() is false and
// unavailableReason() says why, once, and the library runs on host memory.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/memory_kind.h"
#include "cuda/device_api.h"

namespace tidal::cuda {

// True in a build with CUDA support (TIDAL_HAVE_CUDA).
bool built();
// True when a CUDA device can be used: built(), the driver loads, there is at
// least one device, and TIDAL_CUDA_DISABLE is not set. Decided once per process.
bool usable();
// Why usable() is false ("built without CUDA", "no CUDA driver: ...", "no CUDA
// device", "TIDAL_CUDA_DISABLE=1"); empty when it is true.
const std::string& unavailableReason();
int deviceCount();

// The calling thread's current device (cudaGetDevice); nullopt without CUDA.
std::optional<int> currentDevice();
// The PCI bus id of `device` as CUDA reports it ("0000:18:00.0"); "" without
// CUDA or when the runtime cannot say.
std::string pciBusId(int device);
// Makes `device` current on the calling thread; throws InvalidArgument naming
// the device and the count when it does not exist.
void setCurrentDevice(int device);

// Where a pointer lives, from cudaPointerGetAttributes. Host covers
// pageable and page-locked host memory; managed memory is device-accessible
// (kind Cuda, managed = true) and so is treated as device memory.
struct PointerInfo {
  MemoryKind kind = MemoryKind::Host;
  bool managed = false;
  int device = -1;  // for kind Cuda
};
PointerInfo classify(const void* pointer);
// "host memory", "CUDA device memory on device 1", "CUDA managed memory".
std::string describe(const PointerInfo& info);

// Device memory on the calling thread's current device (tidalMemAlloc), its
// release, and a blocking copy of device bytes to the host (a PreMulSum
// scalar). Throw InvalidUsage naming unavailableReason() when !usable(), and
// UnhandledCudaError naming the CUDA error when the runtime call fails.
void* allocateDeviceMemory(size_t bytes);
void freeDeviceMemory(void* pointer);
void copyToHost(void* dst, const void* deviceSrc, size_t bytes);

// The real DeviceApi for `device`; throws if !usable().
std::unique_ptr<DeviceApi> createDeviceApi(int device);

}  // namespace tidal::cuda
