#include "comm/registrations.h"

#include <cstdint>
#include <set>

namespace tidal {

namespace {

struct LiveHandles {
  std::mutex mutex;
  std::set<void*> handles;
  // Odd values far from small integers and from typical heap addresses, so a
  // stray pointer or a small integer passed as a handle is never mistaken.
  uintptr_t next = (uintptr_t{0x7d1a} << 32) | 1;
};

LiveHandles& live() {
  static LiveHandles* l = new LiveHandles;  // never destroyed: registries may outlive statics
  return *l;
}

}  // namespace

Registrations::~Registrations() {
  LiveHandles& l = live();
  std::scoped_lock lock(mutex_, l.mutex);
  for (const auto& [h, r] : entries_) l.handles.erase(h);
}

void* Registrations::add(const Registration& r) {
  LiveHandles& l = live();
  std::scoped_lock lock(mutex_, l.mutex);
  void* handle = reinterpret_cast<void*>(l.next);
  l.next += 2;
  l.handles.insert(handle);
  entries_.emplace(handle, r);
  return handle;
}

std::optional<Registration> Registrations::find(void* handle) const {
  std::scoped_lock lock(mutex_);
  const auto it = entries_.find(handle);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool Registrations::remove(void* handle, bool window) {
  LiveHandles& l = live();
  std::scoped_lock lock(mutex_, l.mutex);
  const auto it = entries_.find(handle);
  if (it == entries_.end() || it->second.window != window) return false;
  entries_.erase(it);
  l.handles.erase(handle);
  return true;
}

size_t Registrations::size() const {
  std::scoped_lock lock(mutex_);
  return entries_.size();
}

bool registrationLiveElsewhere(void* handle) {
  LiveHandles& l = live();
  std::scoped_lock lock(l.mutex);
  return l.handles.count(handle) > 0;
}

}  // namespace tidal
