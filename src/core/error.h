// Internal error type. Inside the library failures travel as tidal::Error
// exceptions; the C API boundary (src/comm/api.cc) catches them, records the
// text as the communicator's last error and returns the code. Nothing throws
// across the C boundary.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "tidal/tidal.h"

namespace tidal {

// The internal class lives in tidal::internal so that its mangled name never
// collides with the public tidal::Error of tidal/tidal.hpp (one program may
// link both, e.g. tests and tidal-info); inside the library it is simply
// tidal::Error through the using-declarations below.
namespace internal {

class Error : public std::runtime_error {
 public:
  Error(tidalResult_t code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  tidalResult_t code() const { return code_; }

 private:
  tidalResult_t code_;
};

template <typename... Args>
[[noreturn]] void fail(tidalResult_t code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace internal

using internal::Error;
using internal::fail;

// "errno text (errno N)" for system-call failures.
std::string errnoText(int err);

}  // namespace tidal
