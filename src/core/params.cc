#include "core/params.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "core/error.h"

namespace tidal::params {

namespace {

struct Resolved {
  std::string value;
  std::string source;
};

// Cache of resolved values; the registry is the one place global mutable
// state is allowed (ARCHITECTURE.md), guarded by a mutex.
struct Cache {
  std::mutex mutex;
  bool loaded = false;
  std::map<std::string, std::string, std::less<>> fileValues;
  std::string filePath;
};

Cache& cache() {
  static Cache c;
  return c;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

void loadFileLocked(Cache& c) {
  if (c.loaded) return;
  c.loaded = true;
  c.fileValues.clear();
  const char* env = std::getenv("TIDAL_CONF_FILE");
  c.filePath = env ? env : "/etc/tidal.conf";
  std::ifstream in(c.filePath);
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    c.fileValues[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
}

const Definition& find(std::string_view name) {
  for (const auto& d : definitions()) {
    if (name == d.name) return d;
  }
  fail(tidalInternalError, "parameter {} is not declared in params_table.cc", name);
}

Resolved resolve(const Definition& def) {
  if (const char* env = std::getenv(def.name)) return {env, "environment"};
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  loadFileLocked(c);
  if (auto it = c.fileValues.find(def.name); it != c.fileValues.end()) {
    return {it->second, "config file " + c.filePath};
  }
  return {def.defaultValue, "default"};
}

}  // namespace

const Definition* lookup(std::string_view name) {
  for (const auto& d : definitions()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

Entry current(const Definition& def) {
  auto r = resolve(def);
  return {&def, r.value, r.source};
}

std::vector<Entry> snapshot() {
  std::vector<Entry> out;
  for (const auto& d : definitions()) {
    auto r = resolve(d);
    out.push_back({&d, r.value, r.source});
  }
  return out;
}

int64_t getInt(std::string_view name) {
  const auto& def = find(name);
  const auto r = resolve(def);
  const std::string text = trim(r.value);
  errno = 0;
  char* end = nullptr;
  // Decimal, or hexadecimal with 0x (sizes are often written that way). Not
  // strtoll's base 0: it reads "010" as octal 8, which no user means.
  const bool hex = text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0;
  const long long v = std::strtoll(text.c_str(), &end, hex ? 16 : 10);
  if (text.empty() || errno != 0 || end == nullptr || *end != '\0') {
    fail(tidalInvalidArgument,
         "{}='{}' (from {}) is not an integer in [{}, {}] (decimal, or hex with 0x)", def.name,
         r.value, r.source, std::numeric_limits<long long>::min(),
         std::numeric_limits<long long>::max());
  }
  return v;
}

bool getBool(std::string_view name) {
  const auto& def = find(name);
  const auto r = resolve(def);
  std::string t = trim(r.value);
  for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off" || t.empty()) return false;
  fail(tidalInvalidArgument, "{}='{}' (from {}) is not a boolean (use 0 or 1)", def.name, r.value,
       r.source);
}

std::string getString(std::string_view name) { return trim(resolve(find(name)).value); }

void reload() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  c.loaded = false;
}

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::Int:
      return "int";
    case Kind::Bool:
      return "bool";
    case Kind::String:
      return "string";
  }
  return "?";
}

}  // namespace tidal::params
