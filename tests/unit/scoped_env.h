// Sets or unsets one environment variable for a scope, restores it
// afterwards, and makes the parameter registry re-read the environment both
// times, so a test can change TIDAL_* settings without leaking them.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "core/params.h"

namespace tidal::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
    params::reload();
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
    params::reload();
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace tidal::test
