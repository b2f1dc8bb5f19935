// The data plane of device buffers: the GPU does the data work on the engine
// stream of a DeviceApi. Prologue copies are cudaMemcpyAsync, reductions of
// staged receives are our kernels, and receives that reduce on arrival
// (cuda_ipc's ring, pinned staging) run the kernel straight on the arrived
// bytes. Staging and scratch are device memory.
//
// The connections an engine on this plane is given take device pointers:
// cuda_ipc between ranks on one host, or StagedSend/RecvConnection
// (staged_connection.h) over a host transport. Their contract, beyond
// transport.h's:
//  - every write they make into local memory (a receive's destination) is
//    enqueued on the engine stream, and every read of a send's source too;
//  - completed() counts a transfer once that work has finished on the GPU.
// Because the interpreter's own work is on the same stream, a device staging
// slot may be reused as soon as its reduction is enqueued: the next write
// into it comes later on the same stream. A run ends when a marker placed
// after all of its work has been reached (markEnd / finished), so the outputs
// are complete on the GPU when Engine::run returns (and the stream engine
// releases the caller's stream).
#pragma once

#include <chrono>

#include "cuda/device_api.h"
#include "engine/data_plane.h"

namespace tidal {

class DeviceDataPlane final : public DataPlane {
 public:
  // `timeout` bounds readBack's wait for the GPU.
  DeviceDataPlane(DeviceApi& device, size_t stagingBytes, std::chrono::seconds timeout);

  void copy(void* dst, const void* src, size_t bytes) override;
  void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
              tidalRedOp_t op, int divisor) override;
  char* staging() override { return staging_.data(); }
  char* scratch(size_t bytes) override;
  size_t scratchBytes() const { return scratch_.size(); }
  // Frees the scratch (between runs only); the next run that needs it grows it back.
  void releaseScratch() { scratch_.reset(); }
  void readBack(void* to, const void* where, size_t bytes) override;
  CallSignature* signatureRecords(size_t count) override;
  bool buffersInHostMemory() const override { return false; }
  bool wakesOnDescriptors() const override { return false; }
  uint64_t markEnd() override { return device_.mark(); }
  bool finished(uint64_t token) override { return device_.reached(token); }
  const char* where() const override { return " on device buffers"; }

  DeviceApi& device() const { return device_; }

 private:
  DeviceApi& device_;
  std::chrono::seconds timeout_;
  OwnedMemory staging_;   // stagingSlots x chunkBytes of device memory
  OwnedMemory scratch_;   // grown to the largest schedule's scratchBytes
  OwnedMemory readBack_;  // pinned: where readBack copies a header to
  OwnedMemory records_;   // pinned: the call signatures of a run
};

}  // namespace tidal
