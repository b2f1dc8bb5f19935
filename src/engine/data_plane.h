// What the schedule interpreter (engine.h) does to memory, behind one small
// interface, so that one interpreter runs every schedule on host buffers and
// on device buffers alike.
//
// The interpreter owns the control flow: posting sends and receives in
// schedule order, credits for staging slots, completing in order, sized
// messages, reduce on arrival, waiting, the timeout and abort. A data plane
// owns the data work and the memory it happens in:
//  - host (host_data_plane.h): memcpy and the SIMD reduction core, staging
//    and scratch in host memory, nothing left to wait for when a run ends;
//  - device (device_data_plane.h): copies and reduction kernels enqueued on
//    the engine stream of a DeviceApi, staging and scratch in device memory,
//    and a run ends only once the GPU has finished what it enqueued.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/call_signature.h"
#include "tidal/tidal.h"
#include "transports/transport.h"

namespace tidal {

class DataPlane {
 public:
  virtual ~DataPlane() = default;

  // dst = src, `bytes` bytes (a schedule's prologue copies).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // dst = a op b [/ divisor] over `count` elements (reduce.h semantics).
  virtual void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
                      tidalRedOp_t op, int divisor) = 0;

  // The staging slots (TIDAL_STAGING_SLOTS x TIDAL_CHUNK_SIZE), allocated once.
  virtual char* staging() = 0;
  // At least `bytes` of scratch for one run; called before the run starts,
  // when no work of an earlier run still uses the old scratch.
  virtual char* scratch(size_t bytes) = 0;

  // Copies `bytes` (at most kMaxReadBack) that a completed receive put at
  // `where` (possibly device memory) into host memory at `to`: a sized
  // message's size word or header, read once its receive completed.
  static constexpr size_t kMaxReadBack = 64;
  virtual void readBack(void* to, const void* where, size_t bytes) = 0;
  // The 8-byte size a sized message announced.
  uint64_t readSize(const void* where) {
    uint64_t size = 0;
    readBack(&size, where, sizeof size);
    return size;
  }

  // Host memory for `count` call-signature records (call_signature.h) that
  // this plane's connections send from and receive into, and that the
  // interpreter reads and writes directly: plain memory on the host plane,
  // page-locked on the device plane, so that a GPU copy of a record is truly
  // asynchronous. Called when a run starts, never while a transfer of the
  // previous run's records is pending; valid until the next call.
  virtual CallSignature* signatureRecords(size_t count) = 0;
  // Whether the run's buffers are host memory the interpreter may read and
  // write itself: a send's bytes ride inside its call signature only then.
  virtual bool buffersInHostMemory() const = 0;

  // Whether the poll() descriptors of the connections wake a sleeping wait
  // for everything this plane waits on. GPU completions have no descriptor:
  // the device plane sleeps in short steps instead.
  virtual bool wakesOnDescriptors() const = 0;

  // A run's end: a token after all of its work, and whether the work before
  // a token has finished (the host plane's work is done when it returns).
  virtual uint64_t markEnd() = 0;
  virtual bool finished(uint64_t token) = 0;

  // " on device buffers" or "", for error texts.
  virtual const char* where() const = 0;
};

// Combines arriving bytes through a data plane: the op of a schedule and the
// avg divisor of its step.
class PlaneReducer final : public ArrivalReducer {
 public:
  PlaneReducer() = default;
  PlaneReducer(DataPlane* plane, tidalDataType_t type, tidalRedOp_t op, int divisor)
      : plane_(plane), type_(type), op_(op), divisor_(divisor) {}
  void combine(void* dst, const void* local, const void* incoming, size_t bytes) const override;

 private:
  DataPlane* plane_ = nullptr;
  tidalDataType_t type_ = tidalFloat32;
  tidalRedOp_t op_ = tidalSum;
  int divisor_ = 0;
};

}  // namespace tidal
