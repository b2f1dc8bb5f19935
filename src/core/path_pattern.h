// File names with placeholders, as TIDAL_DEBUG_FILE and TIDAL_DUMP_FILE take
// them: %h the host name, %p the pid, and whatever the caller adds.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tidal {

// Replaces %h and %p, then each (key, value) of `more` ("%r" -> "3").
std::string expandPathPattern(std::string pattern,
                              const std::vector<std::pair<std::string, std::string>>& more = {});

}  // namespace tidal
