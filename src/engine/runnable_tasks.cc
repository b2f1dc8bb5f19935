#include "engine/runnable_tasks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace tidal {

int runnableTasksOnHost() {
  // "0.52 0.58 0.59 3/187 2331": the fourth field is runnable/total.
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char* p = text;
  for (int field = 0; field < 3; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return -1;
    ++p;
  }
  char* end = nullptr;
  const long runnable = std::strtol(p, &end, 10);
  if (end == p || *end != '/' || runnable < 0) return -1;
  return static_cast<int>(runnable);
}

}  // namespace tidal
