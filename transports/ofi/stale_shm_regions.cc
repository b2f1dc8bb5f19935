#include "transports/ofi/stale_shm_regions.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tidal::ofi {

std::vector<std::string> removeStaleShmRegions(const std::string& dir, pid_t pid, uid_t uid,
                                               std::chrono::system_clock::time_point processStart) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  const std::string prefix = std::to_string(pid) + ":" + std::to_string(uid) + ":";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) continue;
    const auto modified = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(st.st_mtim.tv_sec) +
            std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    // A second's margin: file times come from the kernel's coarse clock
    // (a tick behind), the start time is rounded down to a tick, and a live
    // region wrongly removed is far worse than a stale one left (which fails
    // init with EBUSY, by name).
    if (modified >= processStart - std::chrono::seconds(1)) continue;
    std::error_code removeError;
    if (fs::remove(it->path(), removeError)) removed.push_back(name);
  }
  return removed;
}

std::chrono::system_clock::time_point processStartTime() {
  // Field 22 of /proc/self/stat, after the command name in parentheses
  // (which may itself hold spaces and parentheses: read from the last ')').
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  // Fields 3..21 precede the start time.
  for (int i = 3; i <= 21 && fields >> field; ++i) {
  }
  unsigned long long startTicks = 0;
  if (!(fields >> startTicks)) return {};
  const long hz = ::sysconf(_SC_CLK_TCK);
  timespec boot{};
  if (hz <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return {};
  // Now on the wall clock, minus how long ago (since boot) the process began.
  const auto sinceBoot = std::chrono::seconds(boot.tv_sec) + std::chrono::nanoseconds(boot.tv_nsec);
  const auto startSinceBoot =
      std::chrono::nanoseconds(static_cast<long long>(startTicks) * (1000000000LL / hz));
  return std::chrono::system_clock::now() -
         std::chrono::duration_cast<std::chrono::system_clock::duration>(sinceBoot -
                                                                         startSinceBoot);
}

}  // namespace tidal::ofi
