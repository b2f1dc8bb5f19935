#include "transports/ib/registration_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "transports/ib/gpu_direct.h"

namespace tidal::ib {

namespace {

constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

uintptr_t pageSize() {
  static const auto size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return size;
}
uintptr_t pageDown(uintptr_t p) { return p & ~(pageSize() - 1); }
uintptr_t pageUp(uintptr_t p) { return (p + pageSize() - 1) & ~(pageSize() - 1); }

std::string memlockText() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return "unknown";
  if (lim.rlim_cur == RLIM_INFINITY) return "unlimited";
  return fmt::format("{} KiB", lim.rlim_cur / 1024);
}

}  // namespace

bool findMapping(uintptr_t p, Mapping& out) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) != 3) continue;
    if (p >= start && p < end) {
      out = {start, end, perms[1] == 'w'};
      return true;
    }
  }
  return false;
}

RegistrationCache::RegistrationCache(const VerbsApi& api, ibv_pd* pd, std::string where)
    : api_(api), pd_(pd), where_(std::move(where)) {}

RegistrationCache::~RegistrationCache() {
  for (auto& e : entries_) {
    if (e->mr) api_.deregMr(e->mr);
  }
}

RegistrationCache::Entry* RegistrationCache::find(uintptr_t start, uintptr_t end) {
  Entry* best = nullptr;
  for (auto& e : entries_) {
    if (e->retired || e->start > start || e->end < end) continue;
    // Prefer pinned entries: they say what the owner registered on purpose.
    if (best == nullptr || (e->pinned && !best->pinned)) best = e.get();
  }
  return best;
}

ibv_mr* RegistrationCache::tryRegister(uintptr_t start, uintptr_t end, bool writable, int& err) {
  const int access = writable ? kRemoteAccess : IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = api_.regMr(pd_, reinterpret_cast<void*>(start), end - start, access);
  if (mr == nullptr) {
    err = errno;
    return nullptr;
  }
  ++stats_.registrations;
  stats_.bytesRegistered += end - start;
  return mr;
}

void RegistrationCache::registrationFailed(uintptr_t start, uintptr_t end, int err) const {
  fail(tidalSystemError,
       "{}: ibv_reg_mr of {} bytes at {:#x} failed: {}; the locked-memory limit (ulimit -l) "
       "is {}: raise it (e.g. LimitMEMLOCK=infinity, or 'ulimit -l unlimited')",
       where_, end - start, start, errnoText(err), memlockText());
}

ibv_mr* RegistrationCache::registerRange(uintptr_t start, uintptr_t end, bool writable) {
  int err = 0;
  ibv_mr* mr = tryRegister(start, end, writable, err);
  if (mr == nullptr) registrationFailed(start, end, err);
  return mr;
}

RegistrationCache::Entry* RegistrationCache::acquire(const void* p, size_t bytes) {
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
    if (e->mr == nullptr && err != EFAULT) registrationFailed(e->start, e->end, err);
    if (e->mr == nullptr) {
      // Part of the window is no longer mapped: the heap can shrink between
      // reading /proc/self/maps and registering (malloc trims its top when
      // a free leaves enough there: the free of that file's own buffer, or
      // one in another thread). The request's own pages are live.
      e->start = start;
      e->end = end;
    }
  }
  if (e->mr == nullptr) e->mr = registerRange(e->start, e->end, e->writable);
  e->refs = 1;
  entries_.push_back(std::move(e));
  return entries_.back().get();
}

void RegistrationCache::destroy(Entry* entry) {
  if (entry->mr) api_.deregMr(entry->mr);
  ++stats_.deregistrations;
  std::erase_if(entries_, [&](const std::unique_ptr<Entry>& e) { return e.get() == entry; });
}

void RegistrationCache::release(Entry* entry) {
  if (--entry->refs == 0 && entry->retired) destroy(entry);
}

RegistrationCache::Entry* RegistrationCache::pin(void* p, size_t bytes, MemoryKind kind,
                                                 const GpuDirect* gpu) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto e = std::make_unique<Entry>();
  e->start = pageDown(addr);
  e->end = pageUp(addr + std::max<size_t>(bytes, 1));
  e->pinned = true;
  e->kind = kind;
  if (kind == MemoryKind::Cuda) {
    if (gpu == nullptr) {
      fail(tidalInvalidUsage, "{}: CUDA memory at {:#x} cannot be registered: {}", where_, addr,
           "GPUDirect RDMA is off (TIDAL_GDR)");
    }
    e->mr = gpu->registerDeviceMemory(pd_, p, bytes, kRemoteAccess);
    e->start = addr;  // device memory is registered exactly, not by host pages
    e->end = addr + bytes;
    ++stats_.registrations;
    stats_.bytesRegistered += bytes;
  } else {
    e->mr = registerRange(e->start, e->end, true);
  }
  entries_.push_back(std::move(e));
  return entries_.back().get();
}

void RegistrationCache::unpin(Entry* entry) {
  entry->retired = true;
  entry->pinned = false;
  if (entry->refs == 0) destroy(entry);
}

void RegistrationCache::retireTransient() {
  std::vector<Entry*> idle;
  for (auto& e : entries_) {
    if (!e->pinned && !e->retired) {
      e->retired = true;
      if (e->refs == 0) idle.push_back(e.get());
    }
  }
  for (Entry* e : idle) destroy(e);
}

std::string RegistrationCache::statsText() const {
  return fmt::format("{} hits, {} misses, {} registrations ({:.1f} MiB), {} deregistrations",
                     stats_.hits, stats_.misses, stats_.registrations,
                     static_cast<double>(stats_.bytesRegistered) / (1 << 20),
                     stats_.deregistrations);
}

}  // namespace tidal::ib
