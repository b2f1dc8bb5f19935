// Memory registrations of one registration domain (an ib protection domain,
// a libfabric domain), cached: shared by the transports that register memory.
//
// Registering memory pins its pages and gives the NIC a translation; it costs
// a system call and page-table walks, so a connection must not register
// every chunk it moves. The cache registers page-aligned windows: on a miss
// it registers the pages of the request widened by up to kWindowBytes on each
// side, within the mapping that holds it (from /proc/self/maps), so the next
// chunks of the same buffer hit. Entries are refcounted by the transfers in
// flight that use them. The widening is at most kWidenFactor times the
// request, so a small buffer in a large heap mapping does not pin megabytes
// it never uses.
//
// Staying correct when memory is freed and its address reused: a pinned
// registration keeps the *old* physical pages, so a buffer freed (munmap, or
// malloc trimming) and allocated again at the same address would, through a
// stale entry, have the NIC read and write pages the program no longer sees -
// silent corruption. The kernel tells user space nothing about munmap, so the
// cache does not guess: entries for memory it was not told about
// ("transient" ones) are retired whenever the owner says every transfer of
// the domain has finished (retireTransient), which is always true between
// two collective calls. Within a call the API contract keeps the buffers
// alive; between calls nothing survives that could go stale. Memory
// registered explicitly (Transport::registerMemory, e.g. GPU buffers and
// long-lived staging) is "pinned": it stays until unpin, and the caller
// promises not to free it before.
//
// `Mr` is the transport's registration (ibv_mr, fid_mr); a Backend registers
// and deregisters it. Not thread-safe: the owner serialises calls.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_kind.h"

namespace tidal {

// The mapping of /proc/self/maps that contains `p`, for widening windows.
struct Mapping {
  uintptr_t start = 0, end = 0;
  bool writable = false;
};
bool findMapping(uintptr_t p, Mapping& out);
uintptr_t pageDown(uintptr_t p);
uintptr_t pageUp(uintptr_t p);
// RLIMIT_MEMLOCK as text ("unlimited", "8192 KiB"), for registration errors.
std::string memlockText();

struct RegistrationStats {
  uint64_t hits = 0, misses = 0, registrations = 0, deregistrations = 0;
  uint64_t bytesRegistered = 0;
  // "3 hits, 1 misses, 1 registrations (16.0 MiB), 1 deregistrations"
  std::string text() const;
};

template <typename Mr>
class RegistrationCache {
 public:
  // How far a miss widens a registration on each side, inside the mapping.
  static constexpr size_t kWindowBytes = size_t{8} << 20;
  static constexpr size_t kWidenFactor = 8;

  struct Backend {
    // Registers [start, end); null with `err` (an errno value) set when it
    // fails. `writable`: the NIC may write it (false for a read-only mapping,
    // which can only be a send source).
    std::function<Mr*(uintptr_t start, uintptr_t end, bool writable, int& err)> tryRegister;
    std::function<void(Mr*)> deregister;
    // Throws the transport's error for a registration that failed; must not return.
    std::function<void(uintptr_t start, uintptr_t end, int err)> failed;
  };

  struct Entry {
    uintptr_t start = 0, end = 0;
    Mr* mr = nullptr;
    int refs = 0;
    bool pinned = false;
    bool retired = false;  // deregister as soon as refs drops to 0
    bool writable = true;
    MemoryKind kind = MemoryKind::Host;
  };
  using Stats = RegistrationStats;

  explicit RegistrationCache(Backend backend) : backend_(std::move(backend)) {}
  ~RegistrationCache() {
    for (auto& e : entries_) {
      if (e->mr) backend_.deregister(e->mr);
    }
  }
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration covering [p, p + bytes) of host memory; refs + 1. Throws
  // (Backend::failed) when registration fails.
  Entry* acquire(const void* p, size_t bytes) {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    const uintptr_t start = pageDown(addr), end = pageUp(addr + std::max<size_t>(bytes, 1));
    if (Entry* e = find(start, end)) {
      ++stats_.hits;
      ++e->refs;
      return e;
    }
    ++stats_.misses;
    auto e = std::make_unique<Entry>();
    e->start = start;
    e->end = end;
    Mapping m;
    if (findMapping(addr, m) && m.end >= end) {
      const uintptr_t widen = pageUp(std::min(kWindowBytes, kWidenFactor * (end - start)));
      e->writable = m.writable;
      e->start = std::max(m.start, start > widen ? start - widen : 0);
      e->end = std::min(m.end, end + widen);
      int err = 0;
      e->mr = tryRegister(e->start, e->end, e->writable, err);
      if (e->mr == nullptr && err != EFAULT) backend_.failed(e->start, e->end, err);
      if (e->mr == nullptr) {
        // Part of the window is no longer mapped: the heap can shrink
        // between reading /proc/self/maps and registering (malloc trims its
        // top when a free leaves enough there: the free of that file's own
        // buffer, or one in another thread). The request's own pages are live.
        e->start = start;
        e->end = end;
      }
    }
    if (e->mr == nullptr) e->mr = registerRange(e->start, e->end, e->writable);
    e->refs = 1;
    entries_.push_back(std::move(e));
    return entries_.back().get();
  }
  void release(Entry* entry) {
    if (--entry->refs == 0 && entry->retired) destroy(entry);
  }

  // Explicit registration of host memory (Transport::registerMemory).
  Entry* pin(void* p, size_t bytes) {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    const uintptr_t start = pageDown(addr), end = pageUp(addr + std::max<size_t>(bytes, 1));
    return keep(start, end, registerRange(start, end, true), MemoryKind::Host);
  }
  // A registration the transport made itself (device memory, registered
  // exactly rather than by host pages), kept as a pinned entry.
  Entry* adopt(uintptr_t start, uintptr_t end, Mr* mr, MemoryKind kind) {
    ++stats_.registrations;
    stats_.bytesRegistered += end - start;
    return keep(start, end, mr, kind);
  }
  void unpin(Entry* entry) {
    entry->retired = true;
    entry->pinned = false;
    if (entry->refs == 0) destroy(entry);
  }

  // Retires every transient entry: deregistered now when no transfer uses
  // it, else when the last one releases it (see above).
  void retireTransient() {
    std::vector<Entry*> idle;
    for (auto& e : entries_) {
      if (!e->pinned && !e->retired) {
        e->retired = true;
        if (e->refs == 0) idle.push_back(e.get());
      }
    }
    for (Entry* e : idle) destroy(e);
  }

  const Stats& stats() const { return stats_; }
  std::string statsText() const { return stats_.text(); }

 private:
  // A pinned entry for a registration already counted.
  Entry* keep(uintptr_t start, uintptr_t end, Mr* mr, MemoryKind kind) {
    auto e = std::make_unique<Entry>();
    e->start = start;
    e->end = end;
    e->mr = mr;
    e->pinned = true;
    e->kind = kind;
    entries_.push_back(std::move(e));
    return entries_.back().get();
  }
  Entry* find(uintptr_t start, uintptr_t end) {
    Entry* best = nullptr;
    for (auto& e : entries_) {
      if (e->retired || e->start > start || e->end < end) continue;
      // Prefer pinned entries: they say what the owner registered on purpose.
      if (best == nullptr || (e->pinned && !best->pinned)) best = e.get();
    }
    return best;
  }
  Mr* tryRegister(uintptr_t start, uintptr_t end, bool writable, int& err) {
    Mr* mr = backend_.tryRegister(start, end, writable, err);
    if (mr != nullptr) {
      ++stats_.registrations;
      stats_.bytesRegistered += end - start;
    }
    return mr;
  }
  Mr* registerRange(uintptr_t start, uintptr_t end, bool writable) {
    int err = 0;
    Mr* mr = tryRegister(start, end, writable, err);
    if (mr == nullptr) {
      backend_.failed(start, end, err);
      // Not reached: failed() throws (a std::function cannot say noreturn).
      fail(tidalInternalError, "registration of {} bytes at {:#x} failed", end - start, start);
    }
    return mr;
  }
  void destroy(Entry* entry) {
    if (entry->mr) backend_.deregister(entry->mr);
    ++stats_.deregistrations;
    std::erase_if(entries_, [&](const std::unique_ptr<Entry>& e) { return e.get() == entry; });
  }

  Backend backend_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Stats stats_;
};

}  // namespace tidal
