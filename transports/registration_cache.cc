#include "transports/registration_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace tidal {

namespace {

uintptr_t pageSize() {
  static const auto size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

uintptr_t pageDown(uintptr_t p) { return p & ~(pageSize() - 1); }
uintptr_t pageUp(uintptr_t p) { return (p + pageSize() - 1) & ~(pageSize() - 1); }

std::string memlockText() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return "unknown";
  if (lim.rlim_cur == RLIM_INFINITY) return "unlimited";
  return fmt::format("{} KiB", lim.rlim_cur / 1024);
}

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

std::string RegistrationStats::text() const {
  return fmt::format("{} hits, {} misses, {} registrations ({:.1f} MiB), {} deregistrations", hits,
                     misses, registrations, static_cast<double>(bytesRegistered) / (1 << 20),
                     deregistrations);
}

}  // namespace tidal
