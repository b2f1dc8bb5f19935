#include "engine/device_data_plane.h"

#include <cstring>
#include <thread>

#include "core/error.h"

namespace tidal {

DeviceDataPlane::DeviceDataPlane(DeviceApi& device, size_t stagingBytes,
                                 std::chrono::seconds timeout)
    : device_(device), timeout_(timeout) {
  staging_ = device_.allocateDevice(stagingBytes);
}

void DeviceDataPlane::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) device_.copy(dst, src, bytes);
}

void DeviceDataPlane::reduce(void* dst, const void* a, const void* b, size_t count,
                             tidalDataType_t type, tidalRedOp_t op, int divisor) {
  device_.reduce(dst, a, b, count, type, op, divisor);
}

char* DeviceDataPlane::scratch(size_t bytes) {
  if (scratch_.size() < bytes) {
    scratch_.reset();  // the GPU finished with it: every run ends on a reached marker
    scratch_ = device_.allocateDevice(bytes);
  }
  return scratch_.data();
}

uint64_t DeviceDataPlane::readSize(const void* where) {
  if (sizeWord_.size() == 0) sizeWord_ = device_.allocatePinned(sizeof(uint64_t));
  device_.copy(sizeWord_.data(), where, sizeof(uint64_t));
  // In stream order after the receive that wrote the size, which completed:
  // this waits for one 8-byte copy.
  const uint64_t marker = device_.mark();
  const auto giveUp = Clock::now() + timeout_;
  while (!device_.reached(marker)) {
    if (Clock::now() > giveUp) {
      fail(tidalTimeout, "the GPU did not finish an 8-byte copy of a message size in {} s",
           timeout_.count());
    }
    std::this_thread::yield();
  }
  uint64_t size;
  std::memcpy(&size, sizeWord_.data(), sizeof size);
  return size;
}

}  // namespace tidal
