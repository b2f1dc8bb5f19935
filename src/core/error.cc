#include "core/error.h"

#include <cstring>

namespace tidal {

std::string errnoText(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* text = strerror_r(err, buf, sizeof buf);
  return fmt::format("{} (errno {})", text, err);
}

}  // namespace tidal
