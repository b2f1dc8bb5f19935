#include "core/host_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace tidal {

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

HostBuffer::~HostBuffer() { release(); }

void HostBuffer::reserve(size_t bytes) {
  if (bytes <= size_) return;
  release();
  allocate(bytes);
}

void HostBuffer::allocate(size_t bytes) {
  if (bytes == 0) return;
  constexpr size_t kPage = 4096;
  const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fail(tidalSystemError, "cannot allocate a {} byte staging buffer: {}", rounded,
         errnoText(errno));
  }
  // Large buffers benefit from huge pages (fewer faults and TLB misses); the
  // hint is advisory and harmless where transparent huge pages are off.
  if (rounded >= (2u << 20)) ::madvise(p, rounded, MADV_HUGEPAGE);
  std::memset(p, 0, rounded);  // fault every page in now, off the data path
  data_ = static_cast<char*>(p);
  size_ = rounded;
}

void HostBuffer::release() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace tidal
