// Captures the lines of the shared logger for a test's lifetime, so a test
// can check that a refusal was WARNed and whom it named.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <memory>
#include <string>

#include "core/log.h"

namespace tidal::test {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000)) {
    log::logger().sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = log::logger().sinks();
    std::erase(sinks, sink_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // True when one captured line holds both `a` and `b`.
  bool contains(const std::string& a, const std::string& b) const {
    for (const auto& line : sink_->last_formatted()) {
      if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
    }
    return false;
  }
  std::string all() const {
    std::string out;
    for (const auto& line : sink_->last_formatted()) out += line;
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace tidal::test
