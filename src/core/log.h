// Logging through spdlog. TIDAL_DEBUG picks the level, TIDAL_DEBUG_SUBSYS the
// subsystems, TIDAL_DEBUG_FILE the destination (%h host, %p pid).
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace tidal::log {

enum class Subsys : unsigned { Init = 1, Boot = 2, Net = 4, Coll = 8, Env = 16 };

// The shared logger, configured from the parameters on first use.
spdlog::logger& logger();
// NCCL's labels for the levels: "WARN", "INFO", "TRACE". The logger's pattern
// has no level field: the version line shares the sink and says "VERSION".
const char* levelLabel(spdlog::level::level_enum level);
bool enabled(spdlog::level::level_enum level, Subsys subsys);
const char* subsysName(Subsys subsys);
// True when TIDAL_DEBUG asks for the version banner (VERSION, INFO or TRACE).
bool versionRequested();
// Writes the version banner, labelled "VERSION" rather than with a level.
void version(const std::string& text);

// Why TIDAL_DEBUG or TIDAL_DEBUG_SUBSYS is not acceptable ("TIDAL_DEBUG='x'
// (from SOURCE) is not one of ..."); empty when both are. Logging itself comes
// up with defaults regardless, so communicator init reports this as its error.
std::string settingsError();

// Text put before every log line of the calling thread ("comm 'NAME' "),
// empty by default. The C API sets it for the duration of a call on a named
// communicator (tidalConfig_t::commName).
const std::string& threadPrefix();
class ScopedPrefix {
 public:
  explicit ScopedPrefix(std::string prefix);
  ~ScopedPrefix();
  ScopedPrefix(const ScopedPrefix&) = delete;
  ScopedPrefix& operator=(const ScopedPrefix&) = delete;

 private:
  std::string previous_;
};

}  // namespace tidal::log

// TIDAL_LOG_AT takes the subsystem as a value (a log::Subsys chosen at run
// time); the others name it: TIDAL_WARN(Net, ...).
#define TIDAL_LOG_AT(level, subsys, ...)                                                         \
  do {                                                                                           \
    if (::tidal::log::enabled(level, subsys))                                                    \
      ::tidal::log::logger().log(level, "{} {}[{}] {}", ::tidal::log::levelLabel(level),         \
                                 ::tidal::log::threadPrefix(), ::tidal::log::subsysName(subsys), \
                                 fmt::format(__VA_ARGS__));                                      \
  } while (0)
#define TIDAL_LOG_(level, subsys, ...) \
  TIDAL_LOG_AT(level, ::tidal::log::Subsys::subsys, __VA_ARGS__)

#define TIDAL_WARN(subsys, ...) TIDAL_LOG_(spdlog::level::warn, subsys, __VA_ARGS__)
#define TIDAL_INFO(subsys, ...) TIDAL_LOG_(spdlog::level::info, subsys, __VA_ARGS__)
#define TIDAL_TRACE(subsys, ...) TIDAL_LOG_(spdlog::level::trace, subsys, __VA_ARGS__)
