// The data plane of host buffers: memcpy, the SIMD reduction core
// (src/reduce), staging and scratch in host memory.
#pragma once

#include <vector>

#include "core/host_buffer.h"
#include "engine/data_plane.h"

namespace tidal {

class HostDataPlane final : public DataPlane {
 public:
  explicit HostDataPlane(size_t stagingBytes) { staging_.reserve(stagingBytes); }

  void copy(void* dst, const void* src, size_t bytes) override;
  void reduce(void* dst, const void* a, const void* b, size_t count, tidalDataType_t type,
              tidalRedOp_t op, int divisor) override;
  char* staging() override { return staging_.data(); }
  char* scratch(size_t bytes) override {
    scratch_.reserve(bytes);
    return scratch_.data();
  }
  void readBack(void* to, const void* where, size_t bytes) override;
  CallSignature* signatureRecords(size_t count) override {
    if (records_.size() < count) records_.resize(count);
    return records_.data();
  }
  bool buffersInHostMemory() const override { return true; }
  bool wakesOnDescriptors() const override { return true; }
  uint64_t markEnd() override { return 0; }
  bool finished(uint64_t) override { return true; }
  const char* where() const override { return ""; }

 private:
  HostBuffer staging_;
  HostBuffer scratch_;
  std::vector<CallSignature> records_;
};

}  // namespace tidal
