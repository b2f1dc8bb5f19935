// The parameter registry. Every TIDAL_* tunable is declared exactly once, in
// params_table.cc, with its type, default and a one-line doc. Values come from
// (highest priority first) the environment, the config file named by
// TIDAL_CONF_FILE (default /etc/tidal.conf, lines NAME=VALUE, # comments), then
// the default. Each value remembers where it came from so `tidal-info --params`
// can print it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tidal::params {

enum class Kind { Int, Bool, String };

struct Definition {
  const char* name;
  Kind kind;
  const char* defaultValue;
  const char* doc;
};

struct Entry {
  const Definition* def;
  std::string value;   // as text
  std::string source;  // "default", "environment", or "config file <path>"
};

// All declared parameters, in declaration order.
const std::vector<Definition>& definitions();

// Current value of every parameter with its source.
std::vector<Entry> snapshot();

// The declaration of `name`, or null when no parameter has that name.
const Definition* lookup(std::string_view name);
// Current value of one parameter with its source.
Entry current(const Definition& def);

// Typed getters. Throw tidal::Error(InvalidArgument) naming the variable and the
// value when it does not parse, and InternalError for an undeclared name.
int64_t getInt(std::string_view name);
bool getBool(std::string_view name);
std::string getString(std::string_view name);

// Drops cached values so the next get re-reads environment and config file.
void reload();

const char* kindName(Kind kind);

}  // namespace tidal::params
