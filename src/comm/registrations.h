// The buffers registered with one communicator (tidalCommRegister) and its
// windows (tidalCommWindowRegister), with every rank's part of each window
// (the target of tidalPutSignal, one_sided.h). Handles
// are checked tokens, not pointers: each is a number from one process-wide
// counter, never reused, so deregistering an unknown handle, one already
// deregistered or one of another communicator is told apart and refused.
// Collectives do not consult the registry yet; a transport that can use a
// registered buffer in place (ib) will look it up here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/memory_kind.h"

namespace tidal {

// Where one rank's part of a window is in its own process.
struct WindowSpan {
  uint64_t address = 0;
  uint64_t bytes = 0;
  bool device = false;  // CUDA device memory: one-sided calls cannot write it
};

struct Registration {
  void* pointer = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Host;
  bool window = false;  // from tidalCommWindowRegister, not tidalCommRegister
  // Windows only: registered every rank together, the number-th of the
  // communicator; (*spans)[r] is rank r's part (one_sided.h). Shared, so that
  // find()'s copy on every tidalPutSignal allocates nothing.
  uint64_t number = 0;
  std::shared_ptr<const std::vector<WindowSpan>> spans;
};

class Registrations {
 public:
  Registrations() = default;
  ~Registrations();
  Registrations(const Registrations&) = delete;
  Registrations& operator=(const Registrations&) = delete;

  void* add(const Registration& r);
  std::optional<Registration> find(void* handle) const;
  // Removes handle if it is a registration of this kind (window or not).
  bool remove(void* handle, bool window);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<void*, Registration> entries_;
};

// True when some communicator of this process holds `handle`.
bool registrationLiveElsewhere(void* handle);

}  // namespace tidal
