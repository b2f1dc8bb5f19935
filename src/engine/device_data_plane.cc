#include "engine/device_data_plane.h"

#include <algorithm>
#include <cstring>
#include <memory>
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

CallSignature* DeviceDataPlane::signatureRecords(size_t count) {
  const size_t bytes = count * sizeof(CallSignature);
  if (records_.size() < bytes) {
    records_.reset();  // no copy of the previous run's records is pending
    const size_t capacity = std::max<size_t>(count, 8);
    records_ = device_.allocatePinned(capacity * sizeof(CallSignature));
    std::uninitialized_default_construct_n(reinterpret_cast<CallSignature*>(records_.data()),
                                           capacity);
  }
  return reinterpret_cast<CallSignature*>(records_.data());
}

void DeviceDataPlane::readBack(void* to, const void* where, size_t bytes) {
  if (readBack_.size() == 0) readBack_ = device_.allocatePinned(kMaxReadBack);
  device_.copy(readBack_.data(), where, bytes);
  // In stream order after the receive that wrote the size, which completed:
  // this waits for one small copy.
  const uint64_t marker = device_.mark();
  const auto giveUp = Clock::now() + timeout_;
  while (!device_.reached(marker)) {
    if (Clock::now() > giveUp) {
      fail(tidalTimeout, "the GPU did not finish a {}-byte copy of a message header in {} s", bytes,
           timeout_.count());
    }
    std::this_thread::yield();
  }
  std::memcpy(to, readBack_.data(), bytes);
}

}  // namespace tidal
