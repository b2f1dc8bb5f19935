// A page-aligned host buffer that is touched once when allocated.
//
// On these machines the first touch of a 4 KiB page costs microseconds; a
// buffer that is faulted in during a collective costs more than the data
// movement itself. Staging and scratch buffers are therefore allocated once,
// grown rarely, and pre-faulted here, never on the data path.
#pragma once

#include <cstddef>

namespace tidal {

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes) { allocate(bytes); }
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();

  // Ensures at least `bytes`, reallocating (contents lost) when it must grow.
  void reserve(size_t bytes);
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void allocate(size_t bytes);
  void release();
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tidal
