// cuda_support.h in a build without CUDA: nothing is usable, every pointer
// is host memory.
#include "core/error.h"
#include "cuda/cuda_support.h"

namespace tidal::cuda {

namespace {
const std::string kReason = "this build has no CUDA support (TIDAL_WITH_CUDA=OFF or no toolkit)";
}  // namespace

bool built() { return false; }
bool usable() { return false; }
const std::string& unavailableReason() { return kReason; }
int deviceCount() { return 0; }
std::optional<int> currentDevice() { return std::nullopt; }
std::string pciBusId(int) { return {}; }

void setCurrentDevice(int device) {
  fail(tidalInvalidUsage, "CUDA device {} requested, but {}", device, kReason);
}

PointerInfo classify(const void*) { return {}; }

void* allocateDeviceMemory(size_t) {
  fail(tidalInvalidUsage, "device memory requested, but {}", kReason);
}

void freeDeviceMemory(void*) { fail(tidalInvalidUsage, "device memory freed, but {}", kReason); }

void copyToHost(void*, const void*, size_t) {
  fail(tidalInvalidUsage, "device memory read, but {}", kReason);
}

std::unique_ptr<DeviceApi> createDeviceApi(int device) {
  fail(tidalInvalidUsage, "CUDA device {}: {}", device, kReason);
}

}  // namespace tidal::cuda
