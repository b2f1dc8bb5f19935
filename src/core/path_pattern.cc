#include "core/path_pattern.h"

#include <unistd.h>

namespace tidal {

std::string expandPathPattern(std::string pattern,
                              const std::vector<std::pair<std::string, std::string>>& more) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::vector<std::pair<std::string, std::string>> fields = {{"%h", host},
                                                             {"%p", std::to_string(::getpid())}};
  fields.insert(fields.end(), more.begin(), more.end());
  for (const auto& [key, value] : fields) {
    for (size_t pos; (pos = pattern.find(key)) != std::string::npos;) {
      pattern.replace(pos, key.size(), value);
    }
  }
  return pattern;
}

}  // namespace tidal
