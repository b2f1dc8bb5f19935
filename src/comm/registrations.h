// The buffers registered with one communicator (tidalCommRegister) and its
// windows (tidalCommWindowRegister). Handles
// are checked tokens, not pointers: each is a number from one process-wide
// counter, never reused, so deregistering an unknown handle, one already
// deregistered or one of another communicator is told apart and refused.
// Collectives do not consult the registry yet; a transport that can use a
// registered buffer in place (ib) will look it up here.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>

#include "core/memory_kind.h"

namespace tidal {

struct Registration {
  void* pointer = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Host;
  bool window = false;  // from tidalCommWindowRegister, not tidalCommRegister
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
