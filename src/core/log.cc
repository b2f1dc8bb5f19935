#include "core/log.h"

#include <unistd.h>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/params.h"
#include "core/path_pattern.h"

namespace tidal::log {

namespace {

struct State {
  std::shared_ptr<spdlog::logger> logger;
  bool version = false;
  spdlog::level::level_enum level = spdlog::level::warn;
  unsigned subsysMask = ~0u;
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

constexpr const char* kLevels = "NONE, VERSION, WARN, INFO, TRACE";
constexpr const char* kSubsystems = "INIT, BOOT, NET, COLL, ENV, ALL";

std::optional<spdlog::level::level_enum> parseLevel(const std::string& text) {
  const std::string t = upper(text);
  if (t == "NONE") return spdlog::level::off;
  if (t == "VERSION" || t == "WARN") return spdlog::level::warn;
  if (t == "INFO") return spdlog::level::info;
  if (t == "TRACE") return spdlog::level::trace;
  return std::nullopt;
}

// The first name in a TIDAL_DEBUG_SUBSYS list that is no subsystem; empty when all are.
std::string unknownSubsys(const std::string& text) {
  const std::string list = !text.empty() && text[0] == '^' ? text.substr(1) : text;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = upper(list.substr(start, comma - start));
    bool known = name == "ALL";
    for (Subsys s : {Subsys::Init, Subsys::Boot, Subsys::Net, Subsys::Coll, Subsys::Env}) {
      known = known || name == subsysName(s);
    }
    if (!known) return name.empty() ? std::string("(empty name)") : name;
    start = comma + 1;
  }
  return {};
}

// "environment", "default" or "config file PATH", for error messages.
std::string sourceOf(std::string_view name) {
  for (const params::Entry& e : params::snapshot()) {
    if (e.def->name == name) return e.source;
  }
  return "unknown";
}

unsigned parseSubsys(const std::string& text) {
  bool exclude = !text.empty() && text[0] == '^';
  std::string list = exclude ? text.substr(1) : text;
  unsigned mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = upper(list.substr(start, comma - start));
    if (name == "ALL") mask |= ~0u;
    for (Subsys s : {Subsys::Init, Subsys::Boot, Subsys::Net, Subsys::Coll, Subsys::Env}) {
      if (name == subsysName(s)) mask |= static_cast<unsigned>(s);
    }
    start = comma + 1;
  }
  return exclude ? ~mask : mask;
}

State& state() {
  // Never destroyed: detached threads (a bootstrap root that refuses a
  // stranger, a root giving up at its deadline) may log while the process
  // exits, after static destructors would have freed the logger under them.
  static State& s = *new State([] {
    State st;
    std::string levelText = "WARN", subsys = "ALL", file;
    try {
      levelText = params::getString("TIDAL_DEBUG");
      subsys = params::getString("TIDAL_DEBUG_SUBSYS");
      file = params::getString("TIDAL_DEBUG_FILE");
    } catch (...) {
      // Logging must come up even with a broken config; defaults then.
    }
    st.level = parseLevel(levelText).value_or(spdlog::level::warn);
    const std::string lt = upper(levelText);
    st.version = lt == "VERSION" || lt == "INFO" || lt == "TRACE";
    st.subsysMask = parseSubsys(subsys.empty() ? "ALL" : subsys);
    spdlog::sink_ptr sink;
    if (!file.empty()) {
      try {
        sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(expandPathPattern(file));
      } catch (const spdlog::spdlog_ex&) {
        sink = nullptr;  // fall back to stderr below
      }
    }
    if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    st.logger = std::make_shared<spdlog::logger>("tidal", sink);
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    // No %l: a pattern belongs to the sink, so the level label is part of
    // each message (levelLabel), and the version line can carry its own.
    st.logger->set_pattern(fmt::format("{}:{}:%t TIDAL %v", host, getpid()));
    st.logger->set_level(st.level);
    st.logger->flush_on(spdlog::level::warn);
    return st;
  }());
  return s;
}

}  // namespace

spdlog::logger& logger() { return *state().logger; }

namespace {
thread_local std::string tlsPrefix;
}  // namespace

const std::string& threadPrefix() { return tlsPrefix; }

ScopedPrefix::ScopedPrefix(std::string prefix) : previous_(std::move(tlsPrefix)) {
  tlsPrefix = std::move(prefix);
}

ScopedPrefix::~ScopedPrefix() { tlsPrefix = std::move(previous_); }

bool enabled(spdlog::level::level_enum level, Subsys subsys) {
  const State& s = state();
  return level >= s.level && s.level != spdlog::level::off &&
         (s.subsysMask & static_cast<unsigned>(subsys)) != 0;
}

bool versionRequested() { return state().version; }

const char* levelLabel(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return "TRACE";
    case spdlog::level::info:
      return "INFO";
    default:
      return "WARN";
  }
}

// At warn, the lowest level TIDAL_DEBUG=VERSION keeps (versionRequested gates it).
void version(const std::string& text) {
  state().logger->log(spdlog::level::warn, "VERSION {}", text);
}

std::string settingsError() {
  const std::string level = params::getString("TIDAL_DEBUG");
  if (!parseLevel(level)) {
    return fmt::format("TIDAL_DEBUG='{}' (from {}) is not one of {}", level,
                       sourceOf("TIDAL_DEBUG"), kLevels);
  }
  const std::string subsys = params::getString("TIDAL_DEBUG_SUBSYS");
  if (const std::string bad = unknownSubsys(subsys.empty() ? "ALL" : subsys); !bad.empty()) {
    return fmt::format(
        "TIDAL_DEBUG_SUBSYS='{}' (from {}): '{}' is not a subsystem; accepted: a comma list "
        "of {}, optionally after '^' to exclude",
        subsys, sourceOf("TIDAL_DEBUG_SUBSYS"), bad, kSubsystems);
  }
  return {};
}

const char* subsysName(Subsys subsys) {
  switch (subsys) {
    case Subsys::Init:
      return "INIT";
    case Subsys::Boot:
      return "BOOT";
    case Subsys::Net:
      return "NET";
    case Subsys::Coll:
      return "COLL";
    case Subsys::Env:
      return "ENV";
  }
  return "?";
}

}  // namespace tidal::log
