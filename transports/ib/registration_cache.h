// Memory registrations of one protection domain, cached.
//
// Registering memory (ibv_reg_mr) pins its pages and gives the NIC a
// translation; it costs a system call and page-table walks, so a connection
// must not register every chunk it moves. The cache registers page-aligned
// windows: on a miss it registers the pages of the request widened by up to
// kWindowBytes on each side, within the mapping that holds it (from
// /proc/self/maps), so the next chunks of the same buffer hit. Entries are
// refcounted by the transfers in flight that use them. The widening is at
// most kWidenFactor times the request, so a small buffer in a large heap
// mapping does not pin megabytes it never uses.
//
// Staying correct when memory is freed and its address reused: a pinned
// registration keeps the *old* physical pages, so a buffer freed (munmap,
// or malloc trimming) and allocated again at the same address would, through
// a stale entry, have the NIC read and write pages the program no longer
// sees - silent corruption. The kernel tells user space nothing about
// munmap, so the cache does not guess: entries for memory it was not told
// about ("transient" ones) are retired whenever every connection of the
// device is idle (no transfer in flight), which is always true between two
// collective calls. Within a call the API contract keeps the buffers alive;
// between calls nothing survives that could go stale. Memory registered
// explicitly (Transport::registerMemory, e.g. GPU buffers and long-lived
// staging) is "pinned": it stays until deregisterMemory, and the caller
// promises not to free it before.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_kind.h"
#include "transports/ib/verbs_api.h"

namespace tidal::ib {

class GpuDirect;

class RegistrationCache {
 public:
  // How far a miss widens a registration on each side, inside the mapping.
  static constexpr size_t kWindowBytes = size_t{8} << 20;
  static constexpr size_t kWidenFactor = 8;

  struct Entry {
    uintptr_t start = 0, end = 0;
    ibv_mr* mr = nullptr;
    int refs = 0;
    bool pinned = false;
    bool retired = false;  // deregister as soon as refs drops to 0
    bool writable = true;
    MemoryKind kind = MemoryKind::Host;
  };

  struct Stats {
    uint64_t hits = 0, misses = 0, registrations = 0, deregistrations = 0;
    uint64_t bytesRegistered = 0;
  };

  RegistrationCache(const VerbsApi& api, ibv_pd* pd, std::string where);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration covering [p, p + bytes) of host memory with local and
  // remote write access (remote read only, for a read-only mapping that
  // can only be a send source); refs + 1. Throws SystemError naming the
  // range and the locked-memory limit when registration fails.
  Entry* acquire(const void* p, size_t bytes);
  void release(Entry* entry);

  // Explicit registration (Transport::registerMemory); CUDA memory goes
  // through `gpu` (dma-buf or peer memory).
  Entry* pin(void* p, size_t bytes, MemoryKind kind, const GpuDirect* gpu);
  void unpin(Entry* entry);

  // Retires every transient entry no transfer uses (see above).
  void retireTransient();

  const Stats& stats() const { return stats_; }
  std::string statsText() const;

 private:
  Entry* find(uintptr_t start, uintptr_t end);
  // Null with `err` set when ibv_reg_mr fails; registerRange throws instead.
  ibv_mr* tryRegister(uintptr_t start, uintptr_t end, bool writable, int& err);
  ibv_mr* registerRange(uintptr_t start, uintptr_t end, bool writable);
  [[noreturn]] void registrationFailed(uintptr_t start, uintptr_t end, int err) const;
  void destroy(Entry* entry);

  const VerbsApi& api_;
  ibv_pd* pd_;
  std::string where_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Stats stats_;
};

// The mapping of /proc/self/maps that contains `p`, for widening windows.
struct Mapping {
  uintptr_t start = 0, end = 0;
  bool writable = false;
};
bool findMapping(uintptr_t p, Mapping& out);

}  // namespace tidal::ib
