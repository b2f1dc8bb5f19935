// Page-aligned, pre-faulted host memory for the compare/ programs (the same
// treatment as the *_perf buffers), so no page fault lands in a timed loop.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace tidal::compare {

template <typename T>
struct HostBuffer {
  explicit HostBuffer(size_t bytes) {
    void* p = nullptr;
    const size_t rounded = bytes < 4096 ? 4096 : (bytes + 4095) / 4096 * 4096;
    if (posix_memalign(&p, 4096, rounded) != 0) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    data.reset(static_cast<T*>(p));
  }
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data;
};

}  // namespace tidal::compare
