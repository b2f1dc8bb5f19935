// A DeviceApi that counts the device memory allocated through it and still
// live: what tidalCommMemStats reports. It forwards everything else to the
// real (or test) device unchanged.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "cuda/device_api.h"

namespace tidal {

class MeteredDeviceApi final : public DeviceApi {
 public:
  explicit MeteredDeviceApi(std::unique_ptr<DeviceApi> inner) : inner_(std::move(inner)) {}

  // Bytes of device memory allocated here and not yet released.
  uint64_t liveDeviceBytes() const { return live_->load(); }

  int device() const override { return inner_->device(); }
  std::string describe() const override { return inner_->describe(); }

  OwnedMemory allocateDevice(size_t bytes) override {
    OwnedMemory m = inner_->allocateDevice(bytes);
    const size_t size = m.size();
    live_->fetch_add(size);
    // The counter is shared with the release, which may run after this
    // object is gone (memory moved out and freed later).
    auto release = std::make_shared<OwnedMemory>(std::move(m));
    void* data = release->data();
    return OwnedMemory(data, size, [release, live = live_, size](void*) {
      release->reset();
      live->fetch_sub(size);
    });
  }
  OwnedMemory allocatePinned(size_t bytes) override { return inner_->allocatePinned(bytes); }
  IpcMemoryHandle exportMemory(void* base) override { return inner_->exportMemory(base); }
  OwnedMemory importMemory(const IpcMemoryHandle& handle, size_t bytes) override {
    return inner_->importMemory(handle, bytes);
  }
  bool reachPeer(int peerDevice) override { return inner_->reachPeer(peerDevice); }
  void bindThread() override { inner_->bindThread(); }

  void copy(void* dst, const void* src, size_t bytes) override { inner_->copy(dst, src, bytes); }
  void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
              tidalRedOp_t op, int divisor) override {
    inner_->reduce(dst, a, b, count, type, op, divisor);
  }
  uint64_t mark() override { return inner_->mark(); }
  bool reached(uint64_t marker) override { return inner_->reached(marker); }
  bool drain(std::chrono::milliseconds timeout) override { return inner_->drain(timeout); }

  uint64_t captureInput(void* userStream) override { return inner_->captureInput(userStream); }
  void holdStream(void* userStream, uint32_t seq) override { inner_->holdStream(userStream, seq); }
  void waitForInput(uint64_t token) override { inner_->waitForInput(token); }
  void release(uint32_t seq) override { inner_->release(seq); }

 private:
  std::unique_ptr<DeviceApi> inner_;
  std::shared_ptr<std::atomic<uint64_t>> live_ = std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace tidal
