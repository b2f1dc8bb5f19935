// A string as a JSON string literal (quotes, backslashes and control
// characters escaped). Header-only: the *_perf programs' -J reports use it
// too without linking the library's internals.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace tidal {

inline std::string jsonQuote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace tidal
